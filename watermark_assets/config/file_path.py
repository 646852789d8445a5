"""A file-path pipeline (``watermark.kind: file_path``): files above the watermark of their
landing partition are committed to Delta."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from watermark_assets.config.backlog import FileBacklogLimits
from watermark_assets.config.base import Model as _Model
from watermark_assets.config.schema import SchemaMode
from watermark_assets.config.shared import (
    BackfillConfig,
    CheckpointConfig,
    Granularity,
    PartitionsConfig,
    PipelineModel,
    SensorConfig,
    TableConfig,
)
from watermark_assets.config.sources import FileSourceConfig
from watermark_assets.core.filepath.path import NameOrdering
from watermark_assets.core.filepath.timeparts import PartitionTemplate
from watermark_assets.exceptions import PartitionTemplateError

if TYPE_CHECKING:
    from watermark_assets.sources.files import FileSource


class ColdStartConfig(_Model):
    """Where a pipeline starts when it has no watermark yet (its cold start)."""

    lookback_days: int | None = Field(
        default=None,
        ge=0,
        description="Scan only the partitions of today and the N days before it (the prefixes are "
        "generated from partition_template). Absent: a full recursive scan of the source.",
    )


class SweepConfig(_Model):
    """The sweep: how the sensor finds files that landed where the regular listing no longer
    looks (partitions older than ``late_arrival_days``, or older than a cold start's lookback)."""

    interval_minutes: int = Field(
        default=60,
        ge=0,
        description="List those partitions at most this often (0: never), and name the files "
        "found below their partition's watermark. Files found there are reported (skip reason, "
        "asset observation, `watermark-assets explain`); with `ingest: true` the ones below a "
        "watermark are ingested by late runs.",
    )
    days: int = Field(
        default=7,
        ge=1,
        description="How many days below the listing horizon the sweep looks; the watermarks of "
        "these partitions are kept for it (older ones are pruned).",
    )
    max_paths: int = Field(
        default=200_000,
        ge=1,
        description="Stop a sweep after listing this many paths (a sensor tick is bounded).",
    )
    ingest: bool = Field(
        default=False,
        description="Also ingest the files a sweep names below their partition's watermark: runs "
        "of an explicit late mode (run config `late: true`, txn ids of their own, the watermark "
        "stays), never a duplicate. False: they are reported (skip reason, asset observation).",
    )


class FilePathWatermarkConfig(_Model):
    """The file-path watermark: per landing partition, the last file committed."""

    kind: Literal["file_path"] = "file_path"
    partition_template: str = Field(
        default="date=%Y-%m-%d",
        description="strftime template of the landing partition directories, coarsest first, e.g. "
        "'date=%Y-%m-%d/hour=%H'. Maps each file to a Dagster partition and drives pruning.",
    )
    file_name_ordering: NameOrdering = Field(
        default=NameOrdering.AUTO,
        description="How file names sort chronologically: auto (a Unix-timestamp, UUIDv7 or "
        "ISO 8601 prefix is required), one of those, or lexicographic (you vouch that names sort).",
    )
    cold_start: ColdStartConfig = Field(default_factory=ColdStartConfig)
    late_arrival_days: int | None = Field(
        default=3,
        ge=0,
        description="Landing partitions up to this many days older than the newest one processed "
        "are still listed for late files; older per-partition watermarks are pruned (bounded "
        "state, cheap polls). None: keep every partition's watermark and list them all.",
    )
    sweep: SweepConfig = Field(default_factory=SweepConfig)

    @property
    def template(self) -> PartitionTemplate:
        return PartitionTemplate(self.partition_template)


class FilePipelineConfig(PipelineModel):
    """A file-path pipeline: files above the watermark of their landing partition are committed
    to Delta, by Spark (``source.type: files``) or in place (``parquet_commit``)."""

    name: str = Field(
        description="Pipeline name: lower case, digits, '_'. Names the asset, job, sensor."
    )
    description: str | None = Field(default=None, description="Shown on the asset in the UI.")
    source: FileSourceConfig
    watermark: FilePathWatermarkConfig = Field(default_factory=FilePathWatermarkConfig)
    table: TableConfig
    partitions: PartitionsConfig = Field(default_factory=PartitionsConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    sensor: SensorConfig = Field(default_factory=SensorConfig)
    backfill: BackfillConfig = Field(default_factory=BackfillConfig)
    on_rewrite: Literal["report", "replace"] = Field(
        default="report",
        description="A committed landing file rewritten in place (same name, another size or "
        "modification time/ETag): 'report' names it (sensor, observation, explain); 'replace' "
        "also starts a run that removes its rows and adds its new ones in ONE commit "
        "(source.type files only: the rows' _source_file names the file).",
    )
    backlog_limits: FileBacklogLimits | None = Field(
        default=None,
        description="Limits on the backlog the sensor measures (files, bytes, age of the oldest "
        "waiting file): the asset check backlog_within_limits.",
    )

    @model_validator(mode="after")
    def _replace_needs_lineage(self) -> FilePipelineConfig:
        if self.on_rewrite == "replace" and self.source.type != "files":
            raise ValueError(
                f"on_rewrite is 'replace' but source.type is {self.source.type!r}: only the "
                "rows of a 'files' source name their landing file (_source_file); use "
                "on_rewrite: report"
            )
        return self

    @model_validator(mode="after")
    def _template_fits_granularity(self) -> FilePipelineConfig:
        template = self.watermark.partition_template
        try:
            grain = self.watermark.template.grain
        except PartitionTemplateError as error:
            raise ValueError(str(error)) from error
        if self.partitions.granularity is Granularity.HOURLY and grain not in ("hour", "minute"):
            raise ValueError(
                f"watermark.partition_template {template!r} has no %H but "
                "partitions.granularity is hourly; add an hour directory (e.g. "
                "'date=%Y-%m-%d/hour=%H') or use daily partitions"
            )
        if grain in ("month", "year") and self.partitions.granularity is not Granularity.MONTHLY:
            raise ValueError(
                f"watermark.partition_template {template!r} is coarser than "
                f"{self.partitions.granularity.value} partitions; add %d (and %H) to the template"
            )
        return self

    @model_validator(mode="after")
    def _source_fits_table(self) -> FilePipelineConfig:
        self.source.check_table(self.table)  # raises ValueError
        return self

    @model_validator(mode="after")
    def _schema_known(self) -> FilePipelineConfig:
        if self.source.type == "files":  # infer on another source: PipelineModel refuses it
            self.source.schema_needed(self.schema_policy.infer)  # raises ValueError
        return self

    @model_validator(mode="after")
    def _schema_mode_of_files_in_place(self) -> FilePipelineConfig:
        """A ``parquet_commit`` source commits its files by reference, never rewritten: no
        value can move into ``_rescued_data``, no column can be retyped by a hint."""
        if self.source.type != "parquet_commit":
            return self
        policy = self.schema_policy
        if policy.mode is SchemaMode.RESCUE:
            raise ValueError(
                "schema.mode rescue cannot apply to a parquet_commit source: its files are "
                "committed by reference, never rewritten, so no value can be moved into "
                "_rescued_data. Use add_columns (new columns join the table), ignore (left out of "
                "the table's schema) or fail, or source.type: files with format: parquet (the "
                "rows are rewritten: rescue applies)"
            )
        if policy.hints:
            raise ValueError(
                f"schema.hints {dict(policy.hints)} cannot apply to a parquet_commit source: a "
                "new column takes its files' own type (they are committed as they are); remove "
                "schema.hints, or use source.type: files to read the column as another type"
            )
        return self

    @property
    def checkpoint_uri(self) -> str:
        """{table_uri}/_watermarks/{pipeline}_{source}_checkpoint.json, as in the seed."""
        name = f"{self.name}_{self.source.name}_checkpoint.json"
        return f"{self.table.uri.rstrip('/')}/_watermarks/{name}"

    @property
    def file_source(self) -> FileSource:
        """The source strategy that stages this pipeline's files."""
        return self.source.build(self)
