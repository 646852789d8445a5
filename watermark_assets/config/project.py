"""The whole configuration file (``ProjectConfig``): the pipelines of every kind, Spark, storage;
the union that picks a pipeline's model by its ``watermark.kind``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, Discriminator, Field, Tag, model_validator

from watermark_assets.config.base import Model as _Model
from watermark_assets.config.column import ColumnPipelineConfig
from watermark_assets.config.event_time import EVENT_TIME_SOURCE_TYPES, EventTimePipelineConfig
from watermark_assets.config.file_path import FilePipelineConfig
from watermark_assets.config.sources import (
    COLUMN_SOURCE_TYPES,
    FILE_SOURCE_TYPES,
    FOLDER_SOURCES,
    TIME_SOURCE_TYPES,
)
from watermark_assets.config.spark import SparkConfig
from watermark_assets.config.storage import StorageConfig
from watermark_assets.config.time import TimePipelineConfig
from watermark_assets.config.unit import UnitPipelineConfig
from watermark_assets.exceptions import ConfigError
from watermark_assets.spark.paths import NATIVE_S3_CONF, native_s3


def _watermark_kind(value: Any) -> str | None:
    """The kind that picks a pipeline's model: ``watermark.kind``, else the one its
    ``source.type`` implies (file sources: ``file_path``; the others: ``column``)."""
    if isinstance(value, BaseModel):
        watermark = getattr(value, "watermark", None)
        return getattr(watermark, "kind", None)
    if not isinstance(value, dict):
        return None
    watermark = value.get("watermark")
    if isinstance(watermark, dict) and isinstance(watermark.get("kind"), str):
        return str(watermark["kind"])
    source = value.get("source")
    source_type = source.get("type") if isinstance(source, dict) else None
    if source_type in FILE_SOURCE_TYPES:
        return "file_path"
    if source_type in COLUMN_SOURCE_TYPES:
        return "column"
    if source_type in TIME_SOURCE_TYPES:
        return "time"
    if source_type in EVENT_TIME_SOURCE_TYPES:
        return "event_time"
    return None


PipelineConfig = Annotated[
    Annotated[FilePipelineConfig, Tag("file_path")]
    | Annotated[ColumnPipelineConfig, Tag("column")]
    | Annotated[UnitPipelineConfig, Tag("unit")]
    | Annotated[TimePipelineConfig, Tag("time")]
    | Annotated[EventTimePipelineConfig, Tag("event_time")],
    Discriminator(_watermark_kind),
]
#: A file-path pipeline's configuration (landing files or another writer's Parquet files), for
#: type annotations (declared here once).
Pipeline = FilePipelineConfig
#: Any pipeline's configuration, whatever its watermark kind.
AnyPipeline = (
    FilePipelineConfig
    | ColumnPipelineConfig
    | UnitPipelineConfig
    | TimePipelineConfig
    | EventTimePipelineConfig
)


def source_folder(pipeline: AnyPipeline) -> tuple[str, str] | None:
    """(the folder's URI, what it is called) of a pipeline that reads a folder: a file-path
    pipeline's landing folder, or the source folder of one reading a Delta table, Parquet, CSV or
    JSON files (column, time and unit pipelines); None for any other."""
    if isinstance(pipeline, FilePipelineConfig):
        return pipeline.source.uri, "landing folder"
    source = getattr(pipeline, "source", None)
    if isinstance(source, FOLDER_SOURCES):
        return source.uri, "source folder"
    return None


#: The accepted ``watermark.kind`` values, with the ``source.type`` values each one takes.
WATERMARK_KINDS: Mapping[str, Mapping[str, str]] = {
    "file_path": FILE_SOURCE_TYPES,
    "column": COLUMN_SOURCE_TYPES,
    "unit": COLUMN_SOURCE_TYPES,  # kind: unit is written (the source type implies column)
    "time": TIME_SOURCE_TYPES,  # written explicitly for a column source (it implies "column")
    "event_time": EVENT_TIME_SOURCE_TYPES,
}


class ProjectConfig(_Model):
    """The whole configuration file."""

    spark: SparkConfig = Field(default_factory=SparkConfig)
    #: where files live: S3 endpoint, region, credentials (see config_storage.py)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    pipelines: list[PipelineConfig] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> ProjectConfig:
        seen: set[str] = set()
        for pipeline in self.pipelines:
            if pipeline.name in seen:
                raise ValueError(
                    f"pipeline name {pipeline.name!r} is used twice; names must be unique"
                )
            seen.add(pipeline.name)
        for pipeline in self.event_time_pipelines:
            if pipeline.engine == "streaming":
                self._check_streaming(pipeline)
            for upstream in pipeline.source.names:
                if upstream not in seen or upstream == pipeline.name:
                    raise ValueError(
                        f"pipeline {pipeline.name!r}: source.pipeline {upstream!r} is not another "
                        f"pipeline of this file; name one of {sorted(seen - {pipeline.name})}"
                    )
        return self

    @property
    def file_pipelines(self) -> list[Pipeline]:
        """The file-path pipelines: the ones with sensors and landing files."""
        return [p for p in self.pipelines if isinstance(p, FilePipelineConfig)]

    @property
    def column_pipelines(self) -> list[ColumnPipelineConfig]:
        """The column-watermark pipelines."""
        return [p for p in self.pipelines if isinstance(p, ColumnPipelineConfig)]

    @property
    def time_pipelines(self) -> list[TimePipelineConfig]:
        """The time-watermark pipelines (seed 003)."""
        return [p for p in self.pipelines if isinstance(p, TimePipelineConfig)]

    def _check_streaming(self, pipeline: EventTimePipelineConfig) -> None:
        if self.spark.remote is not None:
            # foreachBatch's function would run in a Python process of the Connect server:
            # the run's own state, crash points and errors would not be in the run's process.
            raise ValueError(
                f"pipeline {pipeline.name!r}: engine streaming does not run under Spark Connect "
                f"(spark.remote {self.spark.remote!r}): its foreachBatch commit would run in a "
                "Python process of the server, not in the run; use engine: batch (the same "
                "windows), or spark.master instead of spark.remote"
            )
        names = pipeline.source.names
        upstream = next((p for p in self.file_pipelines if p.name == names[0]), None)
        if len(names) != 1 or upstream is None or upstream.source.type != "files":
            raise ValueError(
                f"pipeline {pipeline.name!r}: engine streaming reads ONE upstream file pipeline's "
                f"landing folder (source.type files), not {names}; use engine: batch"
            )
        native = native_s3(self.spark.conf.get(NATIVE_S3_CONF, "false"))
        if upstream.source.uri.startswith(("s3://", "s3a://")) and not native:
            raise ValueError(
                f"pipeline {pipeline.name!r}: engine streaming reads the landing folder "
                f"{upstream.source.uri!r} with Spark's own file source, which reads S3 only "
                "through s3a (hadoop-aws); use engine: batch (it reads S3 through fsspec), or on "
                f"a cluster with hadoop-aws set spark.conf {NATIVE_S3_CONF}: 'true' and the "
                "fs.s3a.* settings"
            )
        distinct = [a.name for a in pipeline.parsed_aggregates if a.function == "count_distinct"]
        if distinct:
            raise ValueError(
                f"pipeline {pipeline.name!r}: aggregates {distinct} are count_distinct, which "
                "Structured Streaming does not support; use engine: batch"
            )
        if pipeline.watermark.lateness_ms:
            raise ValueError(
                f"pipeline {pipeline.name!r}: watermark.allowed_lateness is for engine: batch; "
                "on a stream add it to watermark.delay"
            )
        if pipeline.watermark.late_policy == "update":
            raise ValueError(
                f"pipeline {pipeline.name!r}: watermark.late_policy update is for engine: batch "
                "(append mode never rewrites an emitted window); use engine: batch"
            )

    def landing_of(self, pipeline: EventTimePipelineConfig) -> FilePipelineConfig:
        """The upstream file pipeline of a streaming event-time pipeline."""
        return self.file_pipeline(pipeline.source.names[0])

    @property
    def event_time_pipelines(self) -> list[EventTimePipelineConfig]:
        """The event-time aggregates (seeds 002, 004)."""
        return [p for p in self.pipelines if isinstance(p, EventTimePipelineConfig)]

    def upstream_tables(self, pipeline: EventTimePipelineConfig) -> dict[str, str]:
        """The Delta tables an event-time pipeline reads: input (upstream pipeline) -> table."""
        return {name: self.pipeline(name).table.uri for name in pipeline.source.names}

    @property
    def unit_pipelines(self) -> list[UnitPipelineConfig]:
        """The unit-watermark pipelines."""
        return [p for p in self.pipelines if isinstance(p, UnitPipelineConfig)]

    def pipeline(self, name: str) -> AnyPipeline:
        for pipeline in self.pipelines:
            if pipeline.name == name:
                return pipeline
        raise ConfigError(
            f"no pipeline named {name!r}; configured: {[p.name for p in self.pipelines]}",
            pipeline=name,
        )

    def file_pipeline(self, name: str) -> Pipeline:
        """The file-path pipeline ``name`` (ConfigError for another kind)."""
        return self._of_kind(name, self.file_pipelines, "file_path")

    def column_pipeline(self, name: str) -> ColumnPipelineConfig:
        """The column pipeline ``name`` (ConfigError for another kind)."""
        return self._of_kind(name, self.column_pipelines, "column")

    def _of_kind(self, name: str, of_kind: Sequence[_P], kind: str) -> _P:
        for pipeline in of_kind:
            if pipeline.name == name:
                return pipeline
        other = self.pipeline(name)  # raises for an unknown name
        raise ConfigError(
            f"pipeline {name!r} has a {other.watermark.kind!r} watermark; this command works on "
            f"pipelines whose watermark.kind is {kind!r}: {[p.name for p in of_kind]}",
            pipeline=name,
            key="watermark.kind",
            value=other.watermark.kind,
        )


_P = TypeVar("_P", FilePipelineConfig, ColumnPipelineConfig)
