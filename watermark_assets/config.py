"""The one configuration file: pipelines declared in YAML, validated with pydantic.

The file is the repo's demo file by default (``watermark_assets/demo/pipelines.yaml``), another one
through the ``WATERMARK_ASSETS_CONFIG`` environment variable. ``${VAR}`` and ``${VAR:-default}`` are
interpolated from the environment before parsing. Relative local paths are resolved against the
current working directory when the file is loaded.

Every validation error names the pipeline, the key, the bad value and the fix.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from watermark_assets import storage
from watermark_assets.config_automation import AutomationSetting
from watermark_assets.config_backlog import FileBacklogLimits
from watermark_assets.config_base import Model as _Model
from watermark_assets.config_base import iso_instant_text
from watermark_assets.config_base import pipeline_name as _pipeline_name
from watermark_assets.config_base import yaml_instant_text as yaml_instant_text
from watermark_assets.config_event_time import (
    EVENT_TIME_SOURCE_TYPES as EVENT_TIME_SOURCE_TYPES,
)
from watermark_assets.config_event_time import (
    EventTimePipelineConfig as EventTimePipelineConfig,
)
from watermark_assets.config_freshness import Freshness
from watermark_assets.config_problems import did_you_mean, problems_of
from watermark_assets.config_storage import StorageConfig
from watermark_assets.core.column.lookback import Backward
from watermark_assets.core.errors import LookbackError, UnitIdError
from watermark_assets.core.filepath.path import NameOrdering
from watermark_assets.core.filepath.timeparts import PartitionTemplate
from watermark_assets.exceptions import ConfigError, PartitionTemplateError
from watermark_assets.spark.ddl import parse_read_schema

if TYPE_CHECKING:
    from watermark_assets.core.time import TimeSpec
    from watermark_assets.providers.base import CommitCarriedProvider, WatermarkProvider
    from watermark_assets.sources.column import ColumnSource
    from watermark_assets.sources.files import FileSource
    from watermark_assets.sources.secondary_input import SecondaryInput

CONFIG_ENV_VAR = "WATERMARK_ASSETS_CONFIG"
DEFAULT_CONFIG_PATH = Path(__file__).parent / "demo" / "pipelines.yaml"

_ENV_PATTERN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class Granularity(str, Enum):
    """Size of the Dagster time partitions of a pipeline's asset."""

    HOURLY = "hourly"
    DAILY = "daily"
    WEEKLY = "weekly"
    MONTHLY = "monthly"


class SourceFormat(str, Enum):
    """How landing files are read. ``ndjson`` reads ``.ndjson`` and ``.ndjson.gz`` alike."""

    NDJSON = "ndjson"
    CSV = "csv"
    PARQUET = "parquet"


_SUFFIXES: Mapping[SourceFormat, tuple[str, ...]] = {
    SourceFormat.NDJSON: (".ndjson", ".ndjson.gz", ".json", ".json.gz", ".jsonl", ".jsonl.gz"),
    SourceFormat.CSV: (".csv", ".csv.gz"),
    SourceFormat.PARQUET: (".parquet",),
}


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


class _FileSourceBase(_Model):
    uri: str = Field(description="Folder the files land in: a local path or file:// URI.")
    name: str = Field(
        default="main",
        description="Source name, used in the checkpoint file name "
        "{pipeline}_{source}_checkpoint.json.",
    )

    def check_table(self, table: TableConfig) -> None:
        """ValueError when this source cannot write into ``table`` (any table by default)."""


class LandingFilesSourceConfig(_FileSourceBase):
    """Landing files that Spark reads and writes into the table as Parquet."""

    type: Literal["files"]
    format: SourceFormat = Field(
        default=SourceFormat.NDJSON, description="File format: ndjson (also .gz), csv or parquet."
    )
    schema_ddl: str | None = Field(
        default=None,
        alias="schema",
        description="Spark DDL schema of the records, e.g. 'id BIGINT, ts TIMESTAMP'. Required for "
        "ndjson and csv (records that do not match it are quarantined); parquet uses its own.",
    )
    csv_options: dict[str, str] = Field(
        default_factory=lambda: {"header": "true"},
        description="Options passed to Spark's CSV reader.",
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("schema_ddl")
    @classmethod
    def _schema_is_spark_ddl(cls, value: str | None) -> str | None:
        # Checked here, not when Spark first reads: a SparkSchemaError (a ValueError) names the
        # position and the fix.
        if value is not None and value.strip():
            parse_read_schema(value)
        return value

    @model_validator(mode="after")
    def _schema_required(self) -> LandingFilesSourceConfig:
        if self.format is not SourceFormat.PARQUET and not self.schema_ddl:
            raise ValueError(
                f"source.schema is required for format {self.format.value!r} so that malformed "
                "records can be quarantined; add e.g. schema: 'id BIGINT, ts TIMESTAMP'"
            )
        return self

    @property
    def suffixes(self) -> tuple[str, ...]:
        """File name endings this source ingests; other files are ignored."""
        return _SUFFIXES[self.format]

    def build(self, pipeline: FilePipelineConfig) -> FileSource:
        """The source strategy of ``pipeline`` (whose source this is)."""
        from watermark_assets.sources.landing_files import LandingFilesSource

        return LandingFilesSource(pipeline, self)


class ParquetCommitSourceConfig(_FileSourceBase):
    """Parquet files another writer puts under the table folder, committed where they are:
    no Spark, no copy."""

    type: Literal["parquet_commit"]

    def check_table(self, table: TableConfig) -> None:
        """The files must lie inside the table (add actions are relative to its root) and are
        not rewritten (no derived columns)."""
        inside = table.uri.rstrip("/") + "/"
        if not (self.uri.rstrip("/") + "/").startswith(inside):
            raise ValueError(
                f"source.uri {self.uri!r} must be inside table.uri {table.uri!r}: the Delta add "
                "actions reference files relative to the table root. Let the writer put its "
                f"Parquet files under {inside}"
            )
        if table.derived_columns:
            raise ValueError(
                "a parquet_commit source does not rewrite files; remove table.derived_columns"
            )

    @property
    def format(self) -> SourceFormat:
        """Always Parquet: the files become the table's files."""
        return SourceFormat.PARQUET

    @property
    def suffixes(self) -> tuple[str, ...]:
        return _SUFFIXES[SourceFormat.PARQUET]

    def build(self, pipeline: FilePipelineConfig) -> FileSource:
        """The source strategy of ``pipeline`` (whose source this is)."""
        from watermark_assets.sources.parquet_commit import ParquetCommitSource

        return ParquetCommitSource(pipeline)


FileSourceConfig = Annotated[
    LandingFilesSourceConfig | ParquetCommitSourceConfig, Field(discriminator="type")
]

#: The accepted ``source.type`` values of a file-path pipeline, and what each one does.
FILE_SOURCE_TYPES: Mapping[str, str] = {
    "files": "landing files that Spark reads and writes into the table as Parquet",
    "parquet_commit": "Parquet files another writer puts under the table, committed in place",
}


class TableConfig(_Model):
    """The Delta table a pipeline commits to."""

    uri: str = Field(description="Delta table root: a local path or file:// URI.")
    partition_by: list[str] = Field(
        default_factory=list, description="Columns the Delta table is partitioned by."
    )
    derived_columns: dict[str, str] = Field(
        default_factory=dict,
        description="Columns computed with Spark SQL expressions, "
        "e.g. {event_date: 'to_date(ts)'}.",
    )
    quarantine_uri: str | None = Field(
        default=None,
        description="Delta table for malformed records. Default: the table URI + '_quarantine'.",
    )

    @property
    def quarantine(self) -> str:
        return self.quarantine_uri or self.uri.rstrip("/") + "_quarantine"


class PartitionsConfig(_Model):
    """The Dagster time partitions of the pipeline's asset."""

    granularity: Granularity = Field(default=Granularity.DAILY)
    start: str = Field(
        default="2024-01-01",
        description="First partition, ISO date or datetime (UTC). Files before it are "
        "reported, not ingested.",
    )
    end: str | None = Field(
        default=None,
        description="End of the last partition (exclusive), ISO date or datetime (UTC), for a "
        "pipeline over a closed period. Partitions run up to the current (still filling) period "
        "with or without it: an end in the future never hides the current period's files.",
    )

    @field_validator("start", "end", mode="before")
    @classmethod
    def _instant_text(cls, value: Any) -> Any:
        """An unquoted YAML date or datetime as its ISO text; text that is no instant (e.g.
        ``2020-02-30``) is refused with the accepted forms."""
        return iso_instant_text(value)


class CheckpointConfig(_Model):
    """How often the checkpoint file is written (the Delta log stays the truth in between)."""

    interval_files: int = Field(default=100, ge=1, description="Write after this many files.")
    interval_secs: int = Field(default=60, ge=0, description="Or after this many seconds.")


class SensorConfig(_Model):
    """How the pipeline's sensor polls and how much work one tick may request."""

    minimum_interval_seconds: int = Field(default=30, ge=1)
    max_files_per_run: int = Field(default=1000, ge=1)
    max_runs_per_tick: int = Field(default=10, ge=1)
    running_by_default: bool = Field(
        default=False, description="Start the sensor as soon as the daemon runs."
    )


class BackfillConfig(_Model):
    """How a backfill of many partitions is split into runs."""

    max_partitions_per_run: int | None = Field(
        default=None,
        ge=1,
        description="None: a range backfill is one run covering the whole time window (one Spark "
        "job, one Delta commit). A number: runs of at most that many partitions.",
    )


class FilePipelineConfig(_Model):
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
    freshness: Freshness = None
    automation_condition: AutomationSetting = None
    backlog_limits: FileBacklogLimits | None = Field(
        default=None,
        description="Limits on the backlog the sensor measures (files, bytes, age of the oldest "
        "waiting file): the asset check backlog_within_limits.",
    )

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return _pipeline_name(value)

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

    @property
    def checkpoint_uri(self) -> str:
        """{table_uri}/_watermarks/{pipeline}_{source}_checkpoint.json, as in the seed."""
        name = f"{self.name}_{self.source.name}_checkpoint.json"
        return f"{self.table.uri.rstrip('/')}/_watermarks/{name}"

    @property
    def file_source(self) -> FileSource:
        """The source strategy that stages this pipeline's files."""
        return self.source.build(self)


# --- column pipelines (seed 001): rows above a column watermark, read from a table or files ---


class DeltaTableSourceConfig(_Model):
    """A Delta table read through its log (``deltalake``): files skipped by statistics, then the
    predicate pushed into Spark's Parquet scan."""

    type: Literal["delta_table"] = "delta_table"
    uri: str = Field(description="Delta table root of the source: a local path or file:// URI.")
    storage_options: dict[str, str] | None = Field(
        default=None, description="delta-rs storage options (S3 endpoint, credentials...)."
    )

    def build(self, name: str, watermark_columns: Sequence[str] = ()) -> ColumnSource:
        """The source strategy this configuration describes (the watermark columns unused:
        the frame has them)."""
        from watermark_assets.sources.table import DeltaTableSource

        return DeltaTableSource(name, self.uri, self.storage_options)

    @property
    def location(self) -> str:
        """Where the rows come from, as the UI shows it (each source type says it its way)."""
        return self.uri


class ParquetSourceConfig(_Model):
    """A folder of Parquet files (Hive-style partition folders allowed); Spark's own push-down."""

    type: Literal["parquet"] = "parquet"
    uri: str = Field(description="Folder of the Parquet files: a local path or file:// URI.")

    def build(self, name: str, watermark_columns: Sequence[str] = ()) -> ColumnSource:
        """The source strategy this configuration describes (the watermark columns unused:
        the frame has them)."""
        from watermark_assets.sources.table import ParquetFilesSource

        return ParquetFilesSource(name, self.uri)

    @property
    def location(self) -> str:
        """Where the rows come from, as the UI shows it (each source type says it its way)."""
        return self.uri


class _TextSourceConfig(_Model):
    uri: str = Field(description="Folder of the files: a local path or file:// URI.")
    schema_ddl: str = Field(
        alias="schema",
        description="Spark DDL schema of the rows, e.g. 'id BIGINT, updated_at TIMESTAMP' "
        "(required: an inferred schema could type a watermark column differently per run).",
    )
    options: dict[str, str] = Field(
        default_factory=dict, description="Spark reader options (header, delimiter, ...)."
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("schema_ddl")
    @classmethod
    def _schema_is_spark_ddl(cls, value: str) -> str:
        parse_read_schema(value)
        return value

    @property
    def location(self) -> str:
        """Where the rows come from, as the UI shows it (each source type says it its way)."""
        return self.uri


class CsvSourceConfig(_TextSourceConfig):
    """CSV files: a full scan, then the predicate applied in Spark."""

    type: Literal["csv"] = "csv"
    options: dict[str, str] = Field(
        default_factory=lambda: {"header": "true"},
        description="Spark CSV reader options; default {header: 'true'}.",
    )

    def build(self, name: str, watermark_columns: Sequence[str] = ()) -> ColumnSource:
        """The source strategy this configuration describes (the watermark columns unused:
        the frame has them)."""
        from watermark_assets.sources.table import CsvJsonSource

        return CsvJsonSource(name, self.uri, "csv", self.schema_ddl, self.options)


class JsonSourceConfig(_TextSourceConfig):
    """JSON files (one object a line): a full scan, then the predicate applied in Spark."""

    type: Literal["json"] = "json"

    def build(self, name: str, watermark_columns: Sequence[str] = ()) -> ColumnSource:
        """The source strategy this configuration describes (the watermark columns unused:
        the frame has them)."""
        from watermark_assets.sources.table import CsvJsonSource

        return CsvJsonSource(name, self.uri, "json", self.schema_ddl, self.options)


class JdbcSourceConfig(_Model):
    """A PostgreSQL table (or query) read through Spark JDBC: the watermark's WHERE clause runs
    in the database; ``num_partitions > 1`` reads in parallel on the leading watermark column.

    Spark needs the PostgreSQL driver jar on its classpath: the code location adds Debian's
    ``/usr/share/java/postgresql.jar`` to ``spark.jars`` when it is there (``make jdbc``
    installs it); elsewhere set ``spark.conf`` ``spark.jars.packages:
    org.postgresql:postgresql:42.7.4``.
    """

    type: Literal["jdbc"] = "jdbc"
    url: str = Field(
        description="JDBC URL of the database, e.g. 'jdbc:postgresql://127.0.0.1:5432/shop' "
        "(no password here: use password_env)."
    )
    table: str | None = Field(
        default=None,
        description="The table to read, quoted as given (case and special characters kept). "
        "Exactly one of table and query.",
    )
    query: str | None = Field(
        default=None,
        description="A SELECT whose result is read (the watermark predicate is applied to it "
        "in the database). Exactly one of table and query.",
    )
    db_schema: str | None = Field(
        default=None,
        alias="schema",
        description="Schema of the table (default: the connection's search_path).",
    )
    user_env: str | None = Field(
        default=None,
        description="Environment variable holding the user name (default: the URL's user=).",
    )
    password_env: str | None = Field(
        default=None, description="Environment variable holding the password."
    )
    num_partitions: int = Field(
        default=1,
        ge=1,
        description="Parallel JDBC reads, partitioned on the leading watermark column (a "
        "numeric, date or timestamp column); 1: one connection.",
    )
    fetchsize: int = Field(
        default=10_000,
        ge=0,
        description="Rows per round trip (0, the driver's default, fetches the whole result "
        "at once).",
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: str) -> str:
        if not value.startswith("jdbc:postgresql:"):
            raise ValueError(
                f"{value!r} is not a PostgreSQL JDBC URL; write it as "
                "'jdbc:postgresql://HOST:PORT/DATABASE' (the PostgreSQL driver is the one "
                "supported)"
            )
        return value

    @model_validator(mode="after")
    def _table_or_query(self) -> JdbcSourceConfig:
        if (self.table is None) == (self.query is None):
            given = "both" if self.table is not None else "neither"
            raise ValueError(
                f"source.table and source.query: {given} given; set exactly one, e.g. "
                "'table: orders' or 'query: SELECT * FROM orders WHERE NOT deleted'"
            )
        return self

    def build(self, name: str, watermark_columns: Sequence[str] = ()) -> ColumnSource:
        """The source strategy this configuration describes, over ``watermark_columns``."""
        from watermark_assets.sources.jdbc import JdbcSource

        return JdbcSource(
            name=name,
            url=self.url,
            table=self.table,
            schema=self.db_schema,
            query=self.query,
            watermark_columns=tuple(watermark_columns),
            user_env=self.user_env,
            password_env=self.password_env,
            num_partitions=self.num_partitions,
            fetchsize=self.fetchsize,
        )

    @property
    def location(self) -> str:
        """The URL (a ``password=`` parameter masked) and the table or ``(query)``."""
        url = re.sub(r"(?i)(password=)[^&;]*", r"\1***", self.url)
        if self.table is None:
            return f"{url} (query)"
        return f"{url} {self.db_schema + '.' if self.db_schema else ''}{self.table}"


class NextLinkPaginationConfig(_Model):
    """Pages linked by a field of each response holding the next page's URL."""

    type: Literal["next_link"] = "next_link"
    path: str = Field(
        default="next",
        description="Dotted path of the next page's URL in a response (absent or null: the "
        "last page), e.g. 'links.next'.",
    )


class PageNumberPaginationConfig(_Model):
    """Pages counted by a query parameter until a page is empty or shorter than page_size."""

    type: Literal["page_number"] = "page_number"
    param: str = Field(default="page", description="Query parameter holding the page number.")
    start: int = Field(default=1, ge=0, description="Number of the first page.")
    size_param: str | None = Field(
        default=None, description="Query parameter sending page_size (None: not sent)."
    )
    page_size: int | None = Field(
        default=None,
        ge=1,
        description="Records per full page: a shorter page is the last (None: only an empty "
        "page ends the read).",
    )


_PAGINATION_TYPES = ("next_link", "page_number")

PaginationConfig = Annotated[
    NextLinkPaginationConfig | PageNumberPaginationConfig, Field(discriminator="type")
]


class HttpApiSourceConfig(_Model):
    """A paged JSON API: the watermark goes into the requests (``watermark_param_*``), the exact
    predicate is applied again in Spark to the records received."""

    type: Literal["http_api"] = "http_api"
    url: str = Field(description="URL of the first page, e.g. 'https://api.example.com/orders'.")
    method: Literal["GET", "POST"] = Field(
        default="GET", description="HTTP method of every page request (POST for a body)."
    )
    schema_ddl: str = Field(
        alias="schema",
        description="Spark DDL schema of the records, e.g. 'id BIGINT, updated_at TIMESTAMP' "
        "(a record the schema cannot hold fails the run; a missing field is null).",
    )
    watermark_param_mapping: dict[str, str] = Field(
        default_factory=dict,
        description="Watermark column -> request parameter carrying the watermark's value of "
        "that column (the read's lower bound), e.g. {updated_at: updated_since}.",
    )
    watermark_to_param: str | None = Field(
        default=None,
        description="Request parameter carrying the read's upper bound (the run's time), "
        "e.g. updated_before. None: not sent.",
    )
    watermark_param_location: Literal["query", "params", "body"] = Field(
        default="query",
        description="Where the watermark parameters go: query ('params' is the same) or body "
        "(a JSON object; needs method POST).",
    )
    watermark_param_format: str = Field(
        default="iso",
        description="How a datetime watermark is sent: iso, date, timestamp (epoch seconds), "
        "timestamp_ms or a strftime pattern ('%Y-%m-%dT%H:%M:%SZ').",
    )
    params: dict[str, str] = Field(
        default_factory=dict, description="Static query parameters of the first request."
    )
    body: dict[str, Any] = Field(
        default_factory=dict,
        description="Static JSON body (the watermark parameters are added to it in body location).",
    )
    pagination: PaginationConfig | None = Field(
        default=None,
        description="{type: next_link, path} or {type: page_number, param, start, size_param, "
        "page_size}; None: one page.",
    )
    records_path: str = Field(
        default="data",
        description="Dotted path of the records list in a page ('' when the page is the list).",
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="Static request headers (no secrets: headers_env)."
    )
    headers_env: dict[str, str] = Field(
        default_factory=dict,
        description="Header -> environment variable holding its value, e.g. "
        "{Authorization: ORDERS_API_TOKEN}.",
    )
    timeout_seconds: float = Field(default=30.0, gt=0, description="Per request.")
    max_pages: int = Field(
        default=10_000, ge=1, description="More pages than this fail the run (never truncated)."
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("method", mode="before")
    @classmethod
    def _upper_method(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("schema_ddl")
    @classmethod
    def _schema_is_spark_ddl(cls, value: str) -> str:
        parse_read_schema(value)
        return value

    @field_validator("watermark_param_format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        from watermark_assets.sources.http_api import NAMED_FORMATS

        if value not in NAMED_FORMATS and "%" not in value:
            raise ValueError(
                f"{value!r} is not a watermark format; use one of {list(NAMED_FORMATS)} or a "
                "strftime pattern such as '%Y-%m-%dT%H:%M:%SZ'"
            )
        return value

    @model_validator(mode="after")
    def _body_needs_post(self) -> HttpApiSourceConfig:
        if self.watermark_param_location == "body" and self.method == "GET":
            raise ValueError(
                "source.watermark_param_location is 'body' but source.method is 'GET'; set "
                "method: POST, or watermark_param_location: query"
            )
        return self

    def build(self, name: str, watermark_columns: Sequence[str] = ()) -> ColumnSource:
        """The source strategy this configuration describes, over ``watermark_columns``."""
        from watermark_assets.sources.http_api import (
            HttpApiSource,
            NextLink,
            PageNumber,
            Pagination,
            ParamLocation,
        )

        pagination: Pagination = None
        if isinstance(self.pagination, NextLinkPaginationConfig):
            pagination = NextLink(path=self.pagination.path)
        elif isinstance(self.pagination, PageNumberPaginationConfig):
            pagination = PageNumber(
                param=self.pagination.param,
                start=self.pagination.start,
                size_param=self.pagination.size_param,
                page_size=self.pagination.page_size,
            )
        return HttpApiSource(
            name=name,
            url=self.url,
            schema_ddl=self.schema_ddl,
            watermark_columns=tuple(watermark_columns),
            method=self.method,
            watermark_param_mapping=dict(self.watermark_param_mapping),
            watermark_to_param=self.watermark_to_param,
            watermark_param_location=ParamLocation.parse(self.watermark_param_location),
            watermark_param_format=self.watermark_param_format,
            params=dict(self.params),
            body=dict(self.body),
            pagination=pagination,
            records_path=self.records_path,
            headers=dict(self.headers),
            headers_env=dict(self.headers_env),
            timeout_seconds=self.timeout_seconds,
            max_pages=self.max_pages,
        )

    @property
    def location(self) -> str:
        """The method and the first page's URL."""
        return f"{self.method} {self.url}"


class FileDownloadSourceConfig(_Model):
    """Files named by date, downloaded over HTTP(S) (time pipelines only): a window downloads the
    files whose date is in it, e.g. ``url: https://host/files/file{date:%Y%m%d}.csv``."""

    type: Literal["file_download"] = "file_download"
    url: str = Field(
        description="URL template: {date:PATTERN} fields with strftime directives %Y %y %m %b %B "
        "%d %j %H; the finest is the file period (hourly, daily, monthly), e.g. "
        "'https://host/files/file{date:%Y%m%d}.csv'. Names are written as they are (spaces, "
        "'*'): the URL is percent-encoded when built."
    )
    format: Literal["csv", "ndjson", "json", "parquet"] = Field(
        description="csv, ndjson (one JSON object a line), json (one document or array a "
        "file) or parquet."
    )
    schema_ddl: str = Field(
        alias="schema",
        description="Spark DDL schema of the rows, e.g. 'id BIGINT, amount DOUBLE' (required: "
        "an inferred schema could change from file to file).",
    )
    options: dict[str, str] = Field(
        default_factory=dict,
        description="Spark reader options over the format's own (csv: header 'true'; json: "
        "multiLine 'true').",
    )
    date_column: str | None = Field(
        default=None,
        description="A TIMESTAMP column added to the rows holding their file's date (its "
        "period's start); the watermark's column must then be this one. None: the rows hold "
        "the watermark's column themselves.",
    )
    missing: Literal["skip", "fail"] = Field(
        default="skip",
        description="A file the server answers 404 for: skip (the window commits nothing and "
        "keeps its rows and high watermark; the run says which files) or fail (the run fails).",
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="Static request headers (no secrets: headers_env)."
    )
    headers_env: dict[str, str] = Field(
        default_factory=dict,
        description="Header -> environment variable holding its value, e.g. "
        "{Authorization: FILES_TOKEN}.",
    )
    timeout_seconds: float = Field(default=60.0, gt=0, description="Per file request.")
    staging_uri: str | None = Field(
        default=None,
        description="Where files are downloaded before Spark reads them (default: the table's "
        "_staging folder); removed once the rows are staged.",
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("url")
    @classmethod
    def _dated_http_url(cls, value: str) -> str:
        from watermark_assets.core.time.file_dates import DateTemplate

        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http:// or https:// URL template")
        DateTemplate.parse(value)  # FileTemplateError names the problem and the fix
        return value

    @field_validator("schema_ddl")
    @classmethod
    def _schema_is_spark_ddl(cls, value: str) -> str:
        parse_read_schema(value)
        return value

    @model_validator(mode="after")
    def _date_column_is_new(self) -> FileDownloadSourceConfig:
        names = [f.name for f in parse_read_schema(self.schema_ddl)]
        if self.date_column is not None and self.date_column in names:
            raise ValueError(
                f"source.date_column {self.date_column!r} is already a column of the schema; "
                "name a new column, or leave date_column out to use the rows' own"
            )
        return self

    def build(self, name: str, watermark_columns: Sequence[str] = ()) -> ColumnSource:
        """The source strategy this configuration describes (``staging_uri`` set by the time
        pipeline)."""
        from watermark_assets.sources.file_download import FileDownloadSource

        if self.staging_uri is None or len(watermark_columns) != 1:
            raise ConfigError(
                f"file_download source of {name!r} is built by a time pipeline (one time column "
                "and a staging folder); use watermark.kind: time",
                pipeline=name,
                key="source.type",
                value=self.type,
            )
        return FileDownloadSource(
            name=name,
            url=self.url,
            format=self.format,
            schema_ddl=self.schema_ddl,
            time_column=watermark_columns[0],
            date_column=self.date_column,
            options=dict(self.options),
            missing=self.missing,
            headers=dict(self.headers),
            headers_env=dict(self.headers_env),
            timeout_seconds=self.timeout_seconds,
            staging_uri=self.staging_uri,
        )

    @property
    def location(self) -> str:
        """The URL template (secrets redacted)."""
        from watermark_assets.sources.http_fetch import redact_url

        return f"GET {redact_url(self.url)}"


ColumnSourceConfig = Annotated[
    DeltaTableSourceConfig
    | ParquetSourceConfig
    | CsvSourceConfig
    | JsonSourceConfig
    | JdbcSourceConfig
    | HttpApiSourceConfig
    # time pipelines only (WATERMARK_KINDS): it reads windows, by the date in the file names
    | FileDownloadSourceConfig,
    Field(discriminator="type"),
]

#: The accepted ``source.type`` values of a column pipeline, and what each one reads.
COLUMN_SOURCE_TYPES: Mapping[str, str] = {
    "delta_table": "a Delta table (statistics skip files, the filter is pushed into the scan)",
    "parquet": "a folder of Parquet files (the filter is pushed into the scan)",
    "csv": "CSV files (full scan, then the filter)",
    "json": "JSON-lines files (full scan, then the filter)",
    "jdbc": "a PostgreSQL table or query through Spark JDBC (the WHERE clause runs in the "
    "database)",
    "http_api": "a paged JSON API (the watermark is sent as request parameters)",
}
#: The accepted ``source.type`` values of a time pipeline: the column sources and files
#: downloaded by the date in their names.
TIME_SOURCE_TYPES: Mapping[str, str] = {
    **COLUMN_SOURCE_TYPES,
    "file_download": "files named by date over HTTP(S) (a window downloads the files dated in it)",
}


class DeltaMetadataProviderConfig(_Model):
    """The watermark travels in the data commit's custom metadata (default): one atomic commit."""

    type: Literal["delta_metadata"] = "delta_metadata"

    def build(
        self, table_uri: str, pipeline: str | None = None
    ) -> WatermarkProvider | CommitCarriedProvider:
        """The provider over the pipeline's target table."""
        from watermark_assets.providers.delta_metadata import DeltaMetadataProvider

        return DeltaMetadataProvider(table_uri, pipeline=pipeline)


class FileProviderConfig(_Model):
    """One JSON file per pipeline under ``uri``, written atomically after the commit."""

    type: Literal["file"] = "file"
    uri: str = Field(description="Folder of the watermark files (local path or fsspec URI).")

    def build(
        self, table_uri: str, pipeline: str | None = None
    ) -> WatermarkProvider | CommitCarriedProvider:
        """The provider (``table_uri`` unused: the file is its own store)."""
        from watermark_assets.providers.file import FileWatermarkProvider

        return FileWatermarkProvider(self.uri)


class PostgresProviderConfig(_Model):
    """One row per pipeline in a PostgreSQL table (created on first use), after the commit."""

    type: Literal["postgres"] = "postgres"
    conninfo: str = Field(
        description="libpq connection string or URI, e.g. "
        "'postgresql://postgres@127.0.0.1:5432/test' (use ${ENV} for secrets)."
    )
    table: str = Field(
        default="watermark_assets_watermarks", description="Table of the watermarks."
    )
    db_schema: str | None = Field(
        default=None, alias="schema", description="Schema of that table (default: search_path)."
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def build(
        self, table_uri: str, pipeline: str | None = None
    ) -> WatermarkProvider | CommitCarriedProvider:
        """The provider (``table_uri`` unused: the database is its own store)."""
        from watermark_assets.providers.postgres import PostgresWatermarkProvider

        return PostgresWatermarkProvider(self.conninfo, table=self.table, schema=self.db_schema)


ProviderConfig = Annotated[
    DeltaMetadataProviderConfig | FileProviderConfig | PostgresProviderConfig,
    Field(discriminator="type"),
]


_PROVIDER_TYPES = ("delta_metadata", "file", "postgres")


class BackwardConfig(_Model):
    """A nested look-back: re-read a window behind the watermark."""

    days: int = Field(default=0, ge=0, description="Days before the watermark's leading column.")
    months: int = Field(default=0, ge=0, description="Calendar months before it (first).")
    closing_day: int | None = Field(
        default=None,
        ge=1,
        le=28,
        description="Accounting months: a month stays open until this day of the next month; "
        "an open month is re-read from its first day, a closed one never.",
    )


class ColumnWatermarkConfig(_Model):
    """Where a column pipeline's watermark stands, where it is kept, how far back a run reads."""

    kind: Literal["column"] = "column"
    columns: list[str] = Field(
        min_length=1,
        description="Watermark columns in comparison order, e.g. [updated_at, id]: the tuple is "
        "compared in order, so a run resumes exactly inside rows sharing one timestamp.",
    )
    provider: ProviderConfig = Field(
        default_factory=DeltaMetadataProviderConfig,
        description="delta_metadata (default: in the data commit), file ({type: file, uri}) or "
        "postgres ({type: postgres, conninfo}). A bare name is accepted: 'provider: file'.",
    )
    backward_days: int | None = Field(
        default=None, ge=0, description="Re-read this many days behind the watermark."
    )
    backward: BackwardConfig | None = Field(
        default=None, description="Nested look-back {days, months, closing_day}."
    )
    lag: timedelta | None = Field(
        default=None,
        description="Safety lag for rows a database commits late with an older timestamp: "
        "re-read this much behind the watermark (seconds or ISO 8601, e.g. PT10M).",
    )
    null_watermark: Literal["quarantine", "skip", "include"] = Field(
        default="quarantine",
        description="Rows with a NULL watermark column (no place in the order, never above a "
        "watermark): quarantine (default: into {table}_quarantine, each row once), skip (left "
        "in the source), include (committed once, whenever they appear). Counted either way "
        "(rows/null_watermark).",
    )

    @field_validator("provider", mode="before")
    @classmethod
    def _bare_provider_name(cls, value: Any) -> Any:
        return {"type": value} if isinstance(value, str) else value

    @field_validator("columns")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value) or not all(value):
            raise ValueError(f"{value!r}: watermark columns must be distinct, non-empty names")
        return value

    @model_validator(mode="after")
    def _one_lookback(self) -> ColumnWatermarkConfig:
        self.lookback  # noqa: B018 - validates backward_days/backward
        return self

    @property
    def lookback(self) -> Backward:
        """The look-back as the core's value (zero when none is configured)."""
        configure: dict[str, Any] = {"backward_days": self.backward_days}
        if self.backward is not None:
            configure["backward"] = self.backward.model_dump()
        try:
            return Backward.from_configure(configure)
        except LookbackError as error:
            raise ValueError(str(error)) from error

    @property
    def reads_behind(self) -> bool:
        """Whether runs re-read rows at or below the watermark (a look-back or a lag)."""
        return not self.lookback.is_zero or bool(self.lag)


class ColumnTableConfig(_Model):
    """The Delta table a column pipeline commits to."""

    uri: str = Field(description="Delta table root: a local path or file:// URI.")
    partition_by: list[str] = Field(
        default_factory=list, description="Columns the Delta table is partitioned by."
    )
    merge_keys: list[str] = Field(
        default_factory=list,
        description="Columns that identify a row, e.g. [id] or [region, id]: each run's rows are "
        "upserted in ONE Delta commit (table rows with the key of a row read are replaced; one "
        "row per key is kept from a run, the greatest watermark). Accepts a look-back or lag; "
        "not together with destination.replace_by_watermark. Time (and time x unit) pipelines: "
        "replacing a window also removes its keys' rows from the other windows in the same "
        "commit, the newest row of a key (by the time column) wins.",
    )

    @field_validator("merge_keys")
    @classmethod
    def _valid_merge_keys(cls, value: list[str]) -> list[str]:
        from watermark_assets.core.column.merge import merge_key_names

        return list(merge_key_names(value)) if value else value

    @property
    def quarantine(self) -> str:
        """The Delta table of the source's malformed records (CSV/JSON): the table URI +
        ``_quarantine``, as for a file pipeline."""
        return self.uri.rstrip("/") + "_quarantine"


class DestinationConfig(_Model):
    """How rows are written to the table."""

    replace_by_watermark: bool = Field(
        default=False,
        description="Replace the window {leading column: (watermark before, watermark after)} "
        "in ONE Delta commit (rows in it removed, the rows read added) instead of appending. "
        "Required with a look-back or lag, so re-read rows never duplicate.",
    )


class ReplayChunkConfig(_Model):
    """The size of one replay chunk: a duration (datetime/date columns) or ``size`` (numbers)."""

    days: int = Field(default=0, ge=0, description="Days per chunk.")
    hours: int = Field(default=0, ge=0, description="Hours per chunk (datetime columns).")
    minutes: int = Field(default=0, ge=0, description="Minutes per chunk (datetime columns).")
    size: int | None = Field(
        default=None, gt=0, description="Values per chunk, for a numeric leading column."
    )

    @model_validator(mode="after")
    def _one_size(self) -> ReplayChunkConfig:
        duration = self.days or self.hours or self.minutes
        if bool(duration) == (self.size is not None):
            raise ValueError(
                f"replay.chunk {self.model_dump(exclude_defaults=True)}: give a duration "
                "({days, hours, minutes}) for a datetime or date column, or {size: N} for a "
                "numeric one, not both and not neither"
            )
        return self

    @property
    def step(self) -> timedelta | int:
        """What :func:`~watermark_assets.core.column.replay.split_range` takes."""
        if self.size is not None:
            return self.size
        return timedelta(days=self.days, hours=self.hours, minutes=self.minutes)


class ReplayConfig(_Model):
    """Replay the range ``[start, end)`` of the leading watermark column in chunks,
    each chunk read with ``>=`` its start and ``<`` its end and committed on
    its own (``watermark-assets replay PIPELINE``)."""

    start: datetime | date | int = Field(
        description="First value of the leading watermark column replayed (included). "
        "Datetimes with an offset for a timestamp column (2026-04-01T00:00:00Z), naive for a "
        "timestamp-without-time-zone one; dates; or integers."
    )
    end: datetime | date | int = Field(
        description="Where the replay stops (excluded): rows at exactly ``end`` are not read."
    )
    chunk: ReplayChunkConfig = Field(
        description="Size of one chunk, e.g. {days: 1} or {hours: 6}; {size: 1000} for numbers."
    )
    save_watermark: bool = Field(
        default=False,
        description="False (default): the production watermark is never touched (safe backfill "
        "into a new table) and a re-run replays every chunk. True: each chunk's upper bound is "
        "saved in its commit and a re-run skips the chunks already committed (crash-resume); "
        "a replay into the pipeline's own table also advances its watermark when the range "
        "starts at or below it.",
    )
    target_table: str | None = Field(
        default=None,
        description="Delta table the replay writes to (a local path or file:// URI); default: "
        "the pipeline's table. Chunks are appended to a target table, or replace their window "
        "with destination.replace_by_watermark.",
    )

    @field_validator("start", "end", mode="before")
    @classmethod
    def _parse_text(cls, value: Any) -> Any:
        """Text as written (YAML quoted or ``--start``): digits are an integer, ``YYYY-MM-DD`` a
        date, anything else an ISO 8601 datetime (never a Unix time, never a guessed type)."""
        if not isinstance(value, str):
            return value
        text = value.strip()
        if re.fullmatch(r"[+-]?\d+", text):
            return int(text)
        try:
            if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
                return date.fromisoformat(text)
            return datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"{value!r} is not an integer, a date (2026-04-01) or an ISO 8601 datetime "
                "(2026-04-01T00:00:00Z)"
            ) from None

    @model_validator(mode="after")
    def _valid_range(self) -> ReplayConfig:
        from watermark_assets.core.column.replay import split_range

        try:
            split_range("replay", self.start, self.end, self.chunk.step)
        except ValueError as error:
            raise ValueError(f"replay: {error}") from None
        return self


_NOT_MERGE_FOR_WINDOWS = (
    ". table.merge_keys is not enough here (remove it): windows run in any order, and running "
    "an older window again would overwrite a key's newer row when the source keeps older "
    "versions; rows deleted from the source would stay"
)


class ColumnPipelineConfig(_Model):
    """Rows above a column watermark are read from a table or files and committed to Delta:
    the watermark is saved only with, or after, the commit."""

    name: str = Field(
        description="Pipeline name: lower case, digits, '_'. Names the asset, job and the "
        "watermark's dataflow id."
    )
    description: str | None = Field(default=None, description="Shown on the asset in the UI.")
    source: ColumnSourceConfig
    watermark: ColumnWatermarkConfig
    table: ColumnTableConfig
    destination: DestinationConfig = Field(default_factory=DestinationConfig)
    partitions: PartitionsConfig | None = Field(
        default=None,
        description="Optional Dagster time partitions of the asset ({granularity, start, end}). "
        "A run of partitions replays their windows, one chunk per partition (read with >= the "
        "window's start and < its end, each window replaced in one commit: requires "
        "destination.replace_by_watermark); a UI backfill of a range runs once over the range. "
        "Without it the asset is unpartitioned and each run reads above the watermark.",
    )
    freshness: Freshness = None
    automation_condition: AutomationSetting = None
    replay: ReplayConfig | None = Field(
        default=None,
        description="The range ``watermark-assets replay PIPELINE`` replays in chunks "
        "({start, end, chunk, save_watermark, target_table}); --start/--end override it.",
    )

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return _pipeline_name(value)

    @model_validator(mode="after")
    def _no_duplicates_on_re_read(self) -> ColumnPipelineConfig:
        keys, replace = self.table.merge_keys, self.destination.replace_by_watermark
        if keys and replace:
            raise ValueError(
                f"table.merge_keys {keys!r} and destination.replace_by_watermark: true are two "
                "ways of writing re-read rows; pick one. merge_keys: each row read replaces the "
                "table's row with its key (a key's old version is removed wherever it was). "
                "replace_by_watermark: the window read replaces the table's rows in it (rows "
                "deleted from the source inside it disappear; needed for partitions and replay)"
            )
        if self.watermark.reads_behind and not (keys or replace):
            raise ValueError(
                "watermark.backward_days/backward/lag re-read rows at or below the watermark, "
                "which an append would duplicate; set table.merge_keys (re-read rows are upserted "
                "on their key) or destination.replace_by_watermark: true (the re-read window is "
                "replaced in one commit), or remove the look-back"
            )
        if self.watermark.null_watermark == "include" and replace:
            raise ValueError(
                "watermark.null_watermark: include commits rows whose watermark column is NULL, "
                "which lie in no window that destination.replace_by_watermark replaces; use "
                "null_watermark: quarantine (or skip), or table.merge_keys instead of the replace"
            )
        if self.partitions is not None and not replace:
            raise ValueError(
                "partitions: a partition run replays its window into the pipeline's table, which "
                "an append would duplicate on a re-run; set destination.replace_by_watermark: "
                "true (each window is replaced in one commit), or remove the partitions block"
                + (_NOT_MERGE_FOR_WINDOWS if keys else "")
            )
        if self.replay is not None:
            self.replay_problem(self.replay)  # raises ValueError
        return self

    def replay_problem(self, replay: ReplayConfig) -> None:
        """ValueError when ``replay`` would duplicate rows: a replay into the pipeline's own
        table re-reads rows its runs committed, so it must replace its chunks' windows."""
        if self.replays_own_table(replay) and not self.destination.replace_by_watermark:
            raise ValueError(
                "replay into the pipeline's own table re-reads rows it already holds, which an "
                "append would duplicate; set destination.replace_by_watermark: true (each chunk "
                "replaces its window) or give replay.target_table (a new table)"
                + (_NOT_MERGE_FOR_WINDOWS if self.table.merge_keys else "")
            )

    def replays_own_table(self, replay: ReplayConfig) -> bool:
        """Whether ``replay`` writes to the pipeline's own table (no other ``target_table``)."""
        target = replay.target_table
        return target is None or _same_location(target, self.table.uri)

    @model_validator(mode="after")
    def _source_takes_the_watermark(self) -> ColumnPipelineConfig:
        # A source checks its settings against the watermark columns when it is built (e.g. an
        # HTTP API's watermark_param_mapping names only watermark columns); building does no I/O.
        try:
            self.source.build(self.name, self.watermark.columns)
        except ConfigError as error:
            raise ValueError(str(error)) from error
        return self

    @property
    def dataflow_id(self) -> str:
        """The watermark's key in its provider: the pipeline name."""
        return self.name


# --- unit pipelines (seed 003, "Unit" watermark): one Dagster partition per unit id ---


class FileSecondaryInputConfig(_Model):
    """A file listing the unit ids: CSV with a header row, JSON lines or Parquet."""

    type: Literal["file"] = "file"
    path: str = Field(description="The file: a local path or fsspec URL (s3://...).")
    fields: list[str] = Field(
        default_factory=lambda: ["id"],
        description="Column(s) holding the id; several are joined with '~'.",
    )
    format: Literal["csv", "jsonl", "parquet"] | None = Field(
        default=None, description="csv, jsonl or parquet; default: from the file's suffix."
    )

    def build(self) -> SecondaryInput:
        """The input :func:`~watermark_assets.sources.secondary_input.read_units` reads."""
        from watermark_assets.sources.secondary_input import FileInput

        return FileInput(path=self.path, fields=tuple(self.fields), format=self.format)


class DeltaTableSecondaryInputConfig(_Model):
    """A Delta table listing the unit ids (a preceding pipeline's table)."""

    type: Literal["delta_table"] = "delta_table"
    uri: str = Field(description="The Delta table's root: a local path or URI.")
    fields: list[str] = Field(default_factory=lambda: ["id"], description="Column(s) of the id.")

    def build(self) -> SecondaryInput:
        """The input :func:`~watermark_assets.sources.secondary_input.read_units` reads."""
        from watermark_assets.sources.secondary_input import DeltaTableInput

        return DeltaTableInput(uri=self.uri, fields=tuple(self.fields))


class PostgresSecondaryInputConfig(_Model):
    """A PostgreSQL table or query listing the unit ids."""

    type: Literal["postgres"] = "postgres"
    conninfo: str = Field(description="libpq connection string (password in PGPASSWORD).")
    table: str | None = Field(default=None, description="The table (or give query).")
    db_schema: str | None = Field(default=None, alias="schema", description="The table's schema.")
    query: str | None = Field(default=None, description="A SELECT instead of a table.")
    fields: list[str] = Field(default_factory=lambda: ["id"], description="Column(s) of the id.")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _table_or_query(self) -> PostgresSecondaryInputConfig:
        self.build()  # exactly one of table and query (ValueError naming the fix)
        return self

    def build(self) -> SecondaryInput:
        """The input :func:`~watermark_assets.sources.secondary_input.read_units` reads."""
        from watermark_assets.exceptions import SecondaryInputError
        from watermark_assets.sources.secondary_input import PostgresInput

        try:
            return PostgresInput(
                conninfo=self.conninfo,
                fields=tuple(self.fields),
                table=self.table,
                schema=self.db_schema,
                query=self.query,
            )
        except SecondaryInputError as error:
            raise ValueError(str(error)) from None


SecondaryInputConfig = Annotated[
    FileSecondaryInputConfig | DeltaTableSecondaryInputConfig | PostgresSecondaryInputConfig,
    Field(discriminator="type"),
]

#: The placeholder of an ``http_api`` source's URL that a unit run replaces with the unit's id.
UNIT_PLACEHOLDER = "{unit}"


class UnitWatermarkConfig(_Model):
    """A unit watermark: one Dagster partition per unit id, each with its own
    watermark (when its last run committed). The ids are explicit (``units``: static
    partitions) or read from a ``secondary_input`` (dynamic partitions, added by a sensor)."""

    kind: Literal["unit"]
    column: str = Field(
        min_length=1,
        description="The source's column holding the unit id (a string column): a unit's run "
        "reads the rows where it equals the id and replaces exactly those rows in the table.",
    )
    units: str | None = Field(
        default=None,
        description="Explicit ids, comma-separated, e.g. 'id1,id2,id3' (static partitions). "
        "An id that cannot be a partition key, a txn app id or a path segment is refused, by "
        "the same rule as a secondary input's values: spaces around a comma belong to the id "
        "and are refused, never trimmed ('id1, id2' is refused; write 'id1,id2').",
    )
    secondary_input: SecondaryInputConfig | None = Field(
        default=None,
        description="Where the ids are listed: {type: file, path, fields} | {type: delta_table, "
        "uri, fields} | {type: postgres, conninfo, table|query, fields}. Dynamic partitions; a "
        "sensor adds new ids, never removes one.",
    )
    unit_param: str | None = Field(
        default=None,
        description="http_api sources: the request parameter carrying the unit's id (or put "
        "'{unit}' in source.url).",
    )
    time: TimeWatermarkConfig | None = Field(
        default=None,
        description="Time x unit: a time watermark per unit ({column, from, to, partition, "
        "grace_days, abstinent_days, partial_partition}, as for kind: time). Each (window, unit) "
        "cell is a partition of a two-dimensional (multi) partitioning with its own high "
        "watermark, read with unit = id AND start <= time < end and replaced in ONE commit.",
    )

    @field_validator("units")
    @classmethod
    def _valid_units(cls, value: str | None) -> str | None:
        if value is not None:
            from watermark_assets.core.unit import parse_units

            parse_units(value, source="watermark.units")  # UnitIdError names the id and its row
        return value

    @model_validator(mode="after")
    def _one_listing(self) -> UnitWatermarkConfig:
        if (self.units is None) == (self.secondary_input is None):
            raise ValueError(
                "watermark: give exactly one of units (explicit ids, 'id1,id2,id3': static "
                "partitions) and secondary_input (a file or table listing them: dynamic "
                f"partitions); got {'both' if self.units is not None else 'neither'}"
            )
        return self

    @model_validator(mode="after")
    def _time_fits_a_grid(self) -> UnitWatermarkConfig:
        if self.time is None:
            return self
        if self.time.partition == "none":
            raise ValueError(
                "watermark.time.partition 'none' is refused for time x unit: a grid needs "
                "windows (the time dimension of the partitions); use monthly, weekly, daily or "
                "hourly, or remove watermark.time for a unit pipeline (one partition per id)"
            )
        if self.time.column == self.column:
            raise ValueError(
                f"watermark.time.column {self.time.column!r} is the unit column too; give the "
                "source's time column (a timestamp), e.g. answered_at"
            )
        return self

    @property
    def explicit_units(self) -> tuple[str, ...] | None:
        """The explicit ids, in order, each once; None with a secondary input."""
        from watermark_assets.core.unit import parse_units

        return None if self.units is None else parse_units(self.units, source="watermark.units")


class UnitSensorConfig(_Model):
    """How often the sensor of a unit pipeline with a secondary input reads the input."""

    minimum_interval_seconds: int = Field(default=60, ge=1)
    max_runs_per_tick: int = Field(
        default=100,
        ge=1,
        description="Runs one tick requests at most; the rest is requested by later ticks, in "
        "order. Unit pipelines: new ids are added as partitions at once, one run each. Time x "
        "unit: one run per unit and range of due windows.",
    )
    running_by_default: bool = Field(
        default=False, description="Start the sensor as soon as the daemon runs."
    )


class UnitPipelineConfig(_Model):
    """A unit pipeline: one Dagster partition per unit id; a unit's run reads the
    source's rows of that unit (``column = id``, pushed down) and replaces exactly those rows
    in the table in ONE Delta commit, with the unit's watermark (when it was done)."""

    name: str = Field(description="Pipeline name: lower case, digits, '_'.")
    description: str | None = Field(default=None, description="Shown on the asset in the UI.")
    source: ColumnSourceConfig
    watermark: UnitWatermarkConfig
    table: ColumnTableConfig
    sensor: UnitSensorConfig = Field(default_factory=UnitSensorConfig)
    backfill: BackfillConfig = Field(
        default_factory=lambda: BackfillConfig(max_partitions_per_run=1),
        description="max_partitions_per_run: units per run of a backfill (default 1: one run "
        "per unit); null: one run for the whole backfill, units in order.",
    )
    freshness: Freshness = None
    automation_condition: AutomationSetting = None

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return _pipeline_name(value)

    @model_validator(mode="after")
    def _fits_the_source(self) -> UnitPipelineConfig:
        if self.table.merge_keys and self.watermark.time is None:
            raise ValueError(
                "table.merge_keys: a unit's run replaces the unit's rows (column = id) in one "
                "commit; remove merge_keys (they are for time x unit pipelines: watermark.time)"
            )
        if self.watermark.time is not None:
            _time_merge_keys(self.table, self.watermark.time.column)
        http = isinstance(self.source, HttpApiSourceConfig)
        if self.watermark.unit_param is not None and not http:
            raise ValueError(
                f"watermark.unit_param is for http_api sources, not {self.source.type!r}: the "
                "other sources filter on watermark.column; remove it"
            )
        if isinstance(self.source, JdbcSourceConfig) and self.source.num_partitions > 1:
            raise ValueError(
                "source.num_partitions: a unit's rows are read with one connection (the unit "
                "column is text); set num_partitions: 1"
            )
        in_url = isinstance(self.source, HttpApiSourceConfig) and (
            UNIT_PLACEHOLDER in self.source.url
        )
        if in_url and self.watermark.unit_param:
            raise ValueError(
                f"source.url holds {UNIT_PLACEHOLDER} and watermark.unit_param is set; give one "
                "way of sending the unit's id"
            )
        try:
            self.column_pipeline()
        except ValidationError as error:
            raise ValueError(str(error)) from None
        return self

    @property
    def dataflow_id(self) -> str:
        """The key of the unit watermark in the commits: the pipeline name."""
        return self.name

    @property
    def is_time_by_unit(self) -> bool:
        """A time x unit pipeline (``watermark.time`` set): multi-partitions (window, unit)."""
        return self.watermark.time is not None

    @property
    def cells_per_backfill_run(self) -> int | None:
        """Time x unit: the cells of a backfill run (None: one run per range of one unit's
        windows, Dagster's single-run policy), unless ``backfill`` is written."""
        if "backfill" not in self.model_fields_set:
            return None
        return self.backfill.max_partitions_per_run

    def column_pipeline(self, unit: str | None = None) -> ColumnPipelineConfig:
        """The column pipeline a unit's run is: watermark column = the unit column, read with
        ``=`` the id, replacing its window ``[id, id]`` (``destination.replace_by_watermark``);
        for ``unit`` the ``http_api`` URL's ``{unit}`` holds the id (URL-quoted).

        Time x unit: the time pipeline's column pipeline (watermark column = the time column, a
        cell is a window chunk); the unit is fixed per run (the plan adds ``column = id``), and
        ``unit_param`` is a static query parameter holding the id."""
        source: Any = self.source
        time = self.watermark.time
        if isinstance(source, HttpApiSourceConfig):
            update: dict[str, Any] = {}
            if self.watermark.unit_param is not None and time is None:
                update["watermark_param_mapping"] = {
                    self.watermark.column: self.watermark.unit_param
                }
            elif self.watermark.unit_param is not None and unit is not None:
                update["params"] = {**source.params, self.watermark.unit_param: unit}
            if unit is not None and UNIT_PLACEHOLDER in source.url:
                import urllib.parse

                quoted = urllib.parse.quote(unit, safe="")
                update["url"] = source.url.replace(UNIT_PLACEHOLDER, quoted)
            source = source.model_copy(update=update)
        columns = [self.watermark.column] if time is None else time.columns
        return ColumnPipelineConfig(
            name=self.name,
            description=self.description,
            source=source,
            watermark=ColumnWatermarkConfig(kind="column", columns=columns),
            table=_without_merge_keys(self.table),
            destination=DestinationConfig(replace_by_watermark=True),
        )


def _without_merge_keys(table: ColumnTableConfig) -> ColumnTableConfig:
    """The table of a windowed pipeline's column machinery: its window's replace, not a merge
    (the windows' commit applies ``merge_keys`` itself: ``runs/window_commit``)."""
    return table.model_copy(update={"merge_keys": []}) if table.merge_keys else table


def _time_merge_keys(table: ColumnTableConfig, time_column: str) -> None:
    """``table.merge_keys`` of a time (or time x unit) pipeline cannot hold the time column: it
    tells which row of a key is the newest."""
    if time_column in table.merge_keys:
        raise ValueError(
            f"table.merge_keys {table.merge_keys!r} holds the time column {time_column!r}: the "
            "keys name a row whatever its time (e.g. [id]); the time column tells which row of a "
            "key is the newest. Remove it from merge_keys"
        )


def _same_location(a: str, b: str) -> bool:
    def norm(uri: str) -> str:
        return os.path.normpath(uri.removeprefix("file://")).rstrip("/")

    return norm(a) == norm(b)


# --- time pipelines (seed 003): windows of [from, to) as Dagster partitions, each replaced ---


class TimeWatermarkConfig(_Model):
    """A time watermark: ``[from, to)`` cut into windows derived from ``from``; each
    window is a Dagster partition, read with ``column >= start AND column < end`` and replaced in
    ONE Delta commit that also records the window's high watermark."""

    kind: Literal["time"] = "time"
    column: str = Field(
        min_length=1,
        description="The source's time column the windows are read on (a timestamp column).",
    )
    from_: str = Field(
        alias="from",
        description="Start of the first window: an ISO date or datetime (UTC when no zone), "
        "e.g. '2020-01-01' or '2020-02-21 10:00:00'. Fixed: the partitions start there.",
    )
    to: str = Field(
        default="P0D",
        description="End of the range: an ISO datetime, P<n>D or P<n>DT<m>H (that long before "
        "now), or '-' (now; quote it in YAML).",
    )
    partition: str = Field(
        default="daily", description="monthly, weekly, daily, hourly or none (one window)."
    )
    partial_partition: bool = Field(
        default=True,
        description="Keep the last, incomplete window up to `to` (it grows on later runs).",
    )
    grace_days: int = Field(
        default=0,
        ge=0,
        description="Re-run windows ending this many days before the highest "
        "high watermark (late arrivals).",
    )
    abstinent_days: int = Field(
        default=0,
        ge=0,
        description="Skip windows ending less than this many days after the "
        "highest high watermark (repeated downloads).",
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("from_", "to", mode="before")
    @classmethod
    def _bound_text(cls, value: Any) -> Any:
        """YAML reads an unquoted date or datetime as an object, and a bare ``-`` as a list."""
        if value == [None]:
            raise ValueError("YAML reads a bare '-' as a list; write it quoted: to: '-'")
        return yaml_instant_text(value)

    @model_validator(mode="after")
    def _valid_spec(self) -> TimeWatermarkConfig:
        from watermark_assets.core.errors import TimeRangeError, TimeSpecError
        from watermark_assets.core.time import FixedTime, Partitioning

        try:
            spec = self.spec  # TimeBoundError quotes the value and the accepted forms
        except TimeSpecError as error:
            key = {"partitioning": "partition"}.get(error.setting, error.setting)
            raise ValueError(
                f"watermark.{key} {error.value!r} is refused; expected {error.expected}"
            ) from None
        except TimeRangeError as error:  # named as written, not as normalised
            keys = ("watermark.from", "watermark.to")
            raise ValueError(
                str(TimeRangeError(self.from_, self.to, error.reason, keys=keys))
            ) from None
        if not isinstance(spec.from_, FixedTime):
            if spec.partitioning is Partitioning.NONE:
                return self  # a moving start: one window [now - duration, to) on each run
            raise ValueError(
                f"watermark.from {self.from_!r} is refused for {spec.partitioning.value} "
                "partitions: Dagster partitions need a fixed start (a moving one would rename "
                "every partition on each tick); write an ISO date or datetime, e.g. "
                "'2020-01-01', or use partition: none for a window that moves with now"
            )
        start = spec.from_.at
        if spec.partitioning is not Partitioning.NONE and (start.second or start.microsecond):
            raise ValueError(
                f"watermark.from {self.from_!r} is refused: partitions start on a whole minute "
                "(a cron cannot say seconds); write e.g. '2020-02-21 10:00:00'"
            )
        if spec.partitioning is Partitioning.MONTHLY and start.day > 28:
            raise ValueError(
                f"watermark.from {self.from_!r} is refused for monthly partitions: a window "
                "starting on the 29th-31st cannot start on that day in every month (no Dagster "
                "cron matches it); start on day 1..28, e.g. '2020-01-28' or '2020-02-01'"
            )
        return self

    @property
    def spec(self) -> TimeSpec:
        """The core's :class:`~watermark_assets.core.time.TimeSpec` of this watermark."""
        from watermark_assets.core.time import TimeSpec

        return TimeSpec(
            self.from_,
            self.to,
            self.partition,
            partial_partition=self.partial_partition,
            grace_days=self.grace_days,
            abstinent_days=self.abstinent_days,
        )

    @property
    def columns(self) -> list[str]:
        """The one column windows are read on (what column sources are built with)."""
        return [self.column]


class TimeScheduleConfig(_Model):
    """When the time pipeline's schedule and sensor tick (each requests the windows due)."""

    cron: str | None = Field(
        default=None,
        description="Cron of the schedule (UTC). Default: the partitioning's (a tick when a "
        "window ends; hourly for unpartitioned).",
    )
    minimum_interval_seconds: int = Field(
        default=60, ge=1, description="The sensor's minimum interval between ticks."
    )
    max_runs_per_tick: int = Field(
        default=100,
        ge=1,
        description="Runs (windows) one tick requests at most, oldest first; the other due "
        "windows are requested by later ticks (a first tick over years of hourly windows does "
        "not launch tens of thousands of runs at once).",
    )
    running_by_default: bool = Field(
        default=False, description="Start the schedule and the sensor when the daemon runs."
    )


class TimePipelineConfig(_Model):
    """Windows of a time watermark read from a column source, each replaced in ONE commit with
    its high watermark; the windows are the asset's Dagster partitions."""

    name: str = Field(description="Pipeline name: lower case, digits, '_'.")
    description: str | None = Field(default=None, description="Shown on the asset in the UI.")
    source: ColumnSourceConfig
    watermark: TimeWatermarkConfig
    table: ColumnTableConfig
    schedule: TimeScheduleConfig = Field(default_factory=TimeScheduleConfig)
    freshness: Freshness = None
    automation_condition: AutomationSetting = None

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return _pipeline_name(value)

    @model_validator(mode="after")
    def _replace_only(self) -> TimePipelineConfig:
        _time_merge_keys(self.table, self.watermark.column)
        if isinstance(self.source, FileDownloadSourceConfig):
            self._check_file_download(self.source)
        self.column_pipeline()  # the source checks its settings against the column
        return self

    def _check_file_download(self, source: FileDownloadSourceConfig) -> None:
        from watermark_assets.core.errors import FileTemplateError
        from watermark_assets.core.time import FixedTime
        from watermark_assets.core.time.file_dates import DateTemplate

        column = self.watermark.column
        names = [f.name for f in parse_read_schema(source.schema_ddl)]
        if source.date_column is not None and column != source.date_column:
            raise ValueError(
                f"watermark.column {column!r} must be source.date_column "
                f"{source.date_column!r}: the windows are read on the files' dates"
            )
        if source.date_column is None and column not in names:
            raise ValueError(
                f"watermark.column {column!r} is not in source.schema {names}; add it, or set "
                f"source.date_column: {column} to give the rows their file's date"
            )
        spec = self.watermark.spec
        assert isinstance(spec.from_, FixedTime)  # TimeWatermarkConfig refuses the others
        try:
            DateTemplate.parse(source.url).check_fits(spec.partitioning, spec.from_.at)
        except FileTemplateError as error:
            raise ValueError(str(error)) from None

    def column_pipeline(self) -> ColumnPipelineConfig:
        """The same pipeline as a column pipeline over ``watermark.column`` that replaces what
        it reads: what the column run machinery (plan, stage, commit) takes; a window is a
        chunk. A ``file_download`` source downloads into the table's staging folder."""
        source: Any = self.source
        if isinstance(source, FileDownloadSourceConfig) and source.staging_uri is None:
            from watermark_assets.staging import STAGING_DIR

            staging = f"{self.table.uri.rstrip('/')}/{STAGING_DIR}"
            source = source.model_copy(update={"staging_uri": staging})
        try:
            return ColumnPipelineConfig(
                name=self.name,
                description=self.description,
                source=source,
                watermark=ColumnWatermarkConfig(columns=self.watermark.columns),
                table=_without_merge_keys(self.table),
                destination=DestinationConfig(replace_by_watermark=True),
            )
        except ValidationError as error:
            problems = "; ".join(str(e["msg"]) for e in error.errors())
            raise ValueError(problems) from None

    @property
    def dataflow_id(self) -> str:
        return self.name


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

#: column sources that read a folder (or a Delta table's folder)
FOLDER_SOURCES = (DeltaTableSourceConfig, ParquetSourceConfig, CsvSourceConfig, JsonSourceConfig)


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


class SparkConfig(_Model):
    """The Spark session all ingestion runs share (one per process)."""

    master: str = Field(
        default="local[2]",
        description="Spark master URL: local[N], spark://HOST:7077, yarn, k8s://...",
    )
    remote: str | None = Field(
        default=None,
        description="Spark Connect server, sc://HOST:PORT: runs start no JVM of their own "
        "(instead of master)",
    )
    conf: dict[str, str] = Field(
        default_factory=dict, description="Any spark.* setting, e.g. for S3A or a cluster."
    )
    delta_spark: bool = Field(
        default=False,
        description="Add delta-spark (Maven io.delta:delta-spark_2.13:<installed delta-spark "
        "version>) and its SQL extension and catalog, for format('delta') in Spark",
    )
    prestart: bool = Field(
        default=True,
        description="In a Dagster run worker, start the Spark session in the background as the "
        "code location loads (the JVM starts beside the imports and the planning); false: on "
        "first use",
    )
    class_data_sharing: bool = Field(
        default=True,
        description="Start the driver JVM with Spark's classes mapped from a class-data sharing "
        "archive (built once per Java and Spark, in the cache folder: about half the start-up); "
        "false: read them from the jars",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> SparkConfig:
        from watermark_assets.spark.session import connect_address

        for key in self.conf:
            if not key.startswith("spark."):
                raise ValueError(
                    f"spark.conf key {key!r} is not a Spark setting; Spark settings start with "
                    "'spark.' (e.g. spark.executor.memory)"
                )
        for key, field in (("spark.master", "master"), ("spark.remote", "remote")):
            if key in self.conf:
                raise ValueError(
                    f"spark.conf holds {key}={self.conf[key]!r}; write it as spark.{field}"
                )
        if self.remote is None:
            return self
        if "master" in self.model_fields_set:
            raise ValueError(
                f"spark.master {self.master!r} and spark.remote {self.remote!r} are both set; "
                "they exclude each other: keep master (this process starts Spark) or remote "
                "(a Spark Connect server runs it), not both"
            )
        connect_address(self.remote)  # ValueError: names the URL and the form sc://HOST:PORT
        if self.delta_spark:
            raise ValueError(
                f"spark.delta_spark: true with spark.remote {self.remote!r}: a Connect client "
                "cannot add jars to a running server; start the server with delta-spark "
                "(spark-submit --packages io.delta:delta-spark_2.13:VERSION --conf "
                "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension --conf "
                "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog"
                ") and set delta_spark: false"
            )
        return self

    def settings(self) -> dict[str, str]:
        """Every setting as flat ``spark.*`` keys, for ``spark.session.spark_from_settings``:
        ``spark.master`` or ``spark.remote``, ``conf``, and delta-spark's when asked."""
        from watermark_assets.spark.cds import ENABLED_KEY
        from watermark_assets.spark.session import with_delta_spark

        where = {"spark.remote": self.remote} if self.remote else {"spark.master": self.master}
        merged = {**where, **self.conf}
        if not self.class_data_sharing:
            merged[ENABLED_KEY] = "false"
        return with_delta_spark(merged) if self.delta_spark else merged


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
        from watermark_assets.spark.paths import NATIVE_S3_CONF, native_s3

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


def interpolate_env(text: str, env: Mapping[str, str]) -> str:
    """Replace ``${VAR}`` and ``${VAR:-default}``; an unset variable without default is an error."""

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise ConfigError(
            f"environment variable {name!r} is not set; set it or write ${{{name}:-default}}",
            key=name,
        )

    return _ENV_PATTERN.sub(replace, text)


def _resolve_local(uri: str, base: Path) -> str:
    if "://" in uri and not uri.startswith("file://"):
        return uri
    path = Path(uri.removeprefix("file://"))
    return str(path if path.is_absolute() else (base / path).resolve())


def _resolve_paths(raw: Any, base: Path) -> Any:
    for pipeline in raw.get("pipelines") or []:
        if not isinstance(pipeline, dict):
            continue
        for section, key in (
            ("source", "uri"),
            ("table", "uri"),
            ("table", "quarantine_uri"),
            ("table", "late_uri"),
            ("table", "state_uri"),
            ("replay", "target_table"),
        ):
            block = pipeline.get(section)
            if isinstance(block, dict) and isinstance(block.get(key), str):
                block[key] = _resolve_local(block[key], base)
        watermark = pipeline.get("watermark")
        provider = watermark.get("provider") if isinstance(watermark, dict) else None
        if isinstance(provider, dict) and isinstance(provider.get("uri"), str):
            provider["uri"] = _resolve_local(provider["uri"], base)
        listing = watermark.get("secondary_input") if isinstance(watermark, dict) else None
        if isinstance(listing, dict) and listing.get("type") in ("file", "delta_table"):
            key = "path" if listing.get("type") == "file" else "uri"
            if isinstance(listing.get(key), str):
                listing[key] = _resolve_local(listing[key], base)
    return raw


#: Keys of a file-path pipeline that moved from ``source`` to ``watermark`` (legacy ``kind:``).
_FILE_WATERMARK_KEYS = (
    "partition_template",
    "file_name_ordering",
    "cold_start",
    "late_arrival_days",
    "sweep",
)
_LEGACY_SOURCE_TYPES = {"ingest": "files", "commit": "parquet_commit"}


class ConfigDeprecationWarning(UserWarning):
    """A configuration spelled the old way: it loads, and the message says how to write it now."""


def _upgrade_legacy(raw: Any, origin: str) -> None:
    """Rewrite a pipeline's legacy ``kind: ingest|commit|column`` in place, with a warning.

    ``kind: ingest`` is ``source.type: files``, ``kind: commit`` is ``source.type:
    parquet_commit``; their file-watermark keys move from ``source`` to ``watermark``.
    ``kind: column`` is implied by a column source.
    """
    for number, pipeline in enumerate(raw.get("pipelines") or []):
        if not isinstance(pipeline, dict) or "kind" not in pipeline:
            continue
        kind = pipeline.get("kind")
        name = pipeline.get("name") or f"#{number}"
        source = pipeline.get("source")
        if kind == "column":
            del pipeline["kind"]
            fix = "remove it: a column source (source.type) implies the column watermark"
        elif kind in _LEGACY_SOURCE_TYPES and isinstance(source, dict) and "type" not in source:
            del pipeline["kind"]
            source["type"] = _LEGACY_SOURCE_TYPES[kind]
            if kind == "commit" and source.get("format", "parquet") == "parquet":
                source.pop("format", None)  # implied by parquet_commit
            watermark = pipeline.setdefault("watermark", {})
            moved = [key for key in _FILE_WATERMARK_KEYS if key in source]
            if isinstance(watermark, dict):
                for key in moved:
                    watermark.setdefault(key, source.pop(key))
            fix = f"write 'source: {{type: {source['type']}, ...}}'" + (
                f" and move {', '.join(moved)} from source to watermark" if moved else ""
            )
        else:
            raise ConfigError(
                f"{origin}: pipeline {name!r}: kind {kind!r} is not accepted; remove 'kind' and "
                f"set source.type ({_accepted_source_types()})",
                pipeline=str(name),
                key="kind",
                value=kind,
            )
        warnings.warn(
            f"{origin}: pipeline {name!r}: 'kind: {kind}' is deprecated; {fix}",
            ConfigDeprecationWarning,
            stacklevel=3,
        )


def _all_source_types() -> list[str]:
    return list(dict.fromkeys(t for types in WATERMARK_KINDS.values() for t in types))


def _accepted_source_types() -> str:
    kinds: dict[str, list[str]] = {}
    described: dict[str, str] = {}
    for kind, types in WATERMARK_KINDS.items():
        for source_type, what in types.items():
            kinds.setdefault(source_type, []).append(repr(kind))
            described.setdefault(source_type, what)
    return "; ".join(
        f"{t!r} ({described[t]}, watermark.kind {' or '.join(k)})" for t, k in kinds.items()
    )


def _check_types(raw: Any, origin: str) -> None:
    """Every pipeline names an accepted ``source.type``, and a ``watermark.kind`` that takes it
    (pydantic would only say that it cannot find the discriminator)."""
    for number, pipeline in enumerate(raw.get("pipelines") or []):
        if not isinstance(pipeline, dict):
            continue
        name = str(pipeline.get("name") or f"#{number}")
        source = pipeline.get("source")
        source_type = source.get("type") if isinstance(source, dict) else None
        watermark = pipeline.get("watermark")
        kind = watermark.get("kind") if isinstance(watermark, dict) else None
        if kind is not None and kind not in WATERMARK_KINDS:
            raise ConfigError(
                f"{origin}: pipeline {name!r}: watermark.kind {kind!r} is not an accepted value; "
                f"use one of {list(WATERMARK_KINDS)} or leave it out (the source.type implies it)"
                f"{did_you_mean(kind, WATERMARK_KINDS)}",
                pipeline=name,
                key="watermark.kind",
                value=kind,
            )
        implied = next((k for k, types in WATERMARK_KINDS.items() if source_type in types), None)
        if implied is None:
            problem = (
                "source.type is required"
                if not isinstance(source, dict) or "type" not in source
                else f"source.type {source_type!r} is not an accepted value"
            )
            raise ConfigError(
                f"{origin}: pipeline {name!r}: {problem}; set it to one of "
                f"{_accepted_source_types()}, e.g. 'source: {{type: files, uri: data/landing}}'"
                f"{did_you_mean(source_type, _all_source_types())}",
                pipeline=name,
                key="source.type",
                value=source_type,
            )
        if kind is not None and source_type not in WATERMARK_KINDS[kind]:
            raise ConfigError(
                f"{origin}: pipeline {name!r}: a {source_type!r} source takes a {implied!r} "
                f"watermark, not watermark.kind {kind!r}; sources with a {kind!r} watermark: "
                f"{list(WATERMARK_KINDS[kind])}",
                pipeline=name,
                key="watermark.kind",
                value=kind,
            )


def _union_tags() -> set[str]:
    """The tags pydantic writes into an error's location for the configuration's unions."""
    return {
        *WATERMARK_KINDS,
        *FILE_SOURCE_TYPES,
        *TIME_SOURCE_TYPES,
        *_PROVIDER_TYPES,
        *_PAGINATION_TYPES,
    }


class _ConfigLoader(yaml.SafeLoader):
    """``yaml.safe_load``, except that an unquoted date or timestamp that is no real instant
    (``2020-02-30``, ``2020-13-01``, ``2020-01-01 25:00:00``) stays the text written instead of
    raising a bare ``ValueError`` while the file is read: the key it belongs to then refuses it
    like a quoted value, naming the pipeline, the key, the value and the accepted forms."""


def _timestamp_or_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    try:
        return loader.construct_yaml_timestamp(node)
    except ValueError:
        return loader.construct_scalar(node)


_ConfigLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_or_text)


def parse_config(text: str, *, env: Mapping[str, str], base: Path, origin: str) -> ProjectConfig:
    """Parse YAML text into a validated ProjectConfig (errors name pipeline, key, value, fix)."""
    try:
        raw = yaml.load(interpolate_env(text, env), Loader=_ConfigLoader)  # a SafeLoader
    except yaml.YAMLError as error:
        raise ConfigError(f"{origin} is not valid YAML: {error}") from error
    if not isinstance(raw, dict):
        raise ConfigError(f"{origin} must hold a mapping with a 'pipelines' list")
    raw = _resolve_paths(raw, base)
    _upgrade_legacy(raw, origin)
    _check_types(raw, origin)
    try:
        config = ProjectConfig.model_validate(raw)
    except ValidationError as error:
        # One block per problem, and nothing else: pydantic's own report is not chained (it
        # would print every problem a second time, in its words), except a refused unit id.
        unit_id = next(
            (
                found
                for item in error.errors()
                if isinstance(found := (item.get("ctx") or {}).get("error"), UnitIdError)
            ),
            None,
        )
        problems = problems_of(error, raw, ProjectConfig, _union_tags())
        raise ConfigError.of_problems(origin, problems) from unit_id
    storage.configure(config.storage)  # every fsspec/delta-rs call of this process uses it
    return config


def load_config(
    path: str | os.PathLike[str] | None = None, *, env: Mapping[str, str] | None = None
) -> ProjectConfig:
    """Load the configuration: ``path``, else $WATERMARK_ASSETS_CONFIG, else the demo file."""
    env = os.environ if env is None else env
    chosen = Path(path or env.get(CONFIG_ENV_VAR) or DEFAULT_CONFIG_PATH)
    if not chosen.is_file():
        raise ConfigError(
            f"configuration file {str(chosen)!r} does not exist; "
            f"set {CONFIG_ENV_VAR} to a YAML file",
            value=str(chosen),
        )
    return parse_config(
        chosen.read_text(encoding="utf-8"), env=env, base=Path.cwd(), origin=str(chosen)
    )
