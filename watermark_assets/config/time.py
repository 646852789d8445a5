"""A time pipeline (``watermark.kind: time``, seed 003): windows of ``[from, to)`` as Dagster
partitions, each replaced in ONE commit."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from watermark_assets import names
from watermark_assets.config.base import Model as _Model
from watermark_assets.config.column import _time_merge_keys
from watermark_assets.config.shared import (
    ColumnTableConfig,
    PipelineModel,
    yaml_instant_text,
)
from watermark_assets.config.sources import ColumnSourceConfig, FileDownloadSourceConfig
from watermark_assets.core.errors import FileTemplateError, TimeRangeError, TimeSpecError
from watermark_assets.core.time import FixedTime, Partitioning, TimeSpec
from watermark_assets.core.time.file_dates import DateTemplate
from watermark_assets.exceptions import ConfigError
from watermark_assets.spark.ddl import parse_read_schema

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


class TimePipelineConfig(PipelineModel):
    """Windows of a time watermark read from a column source, each replaced in ONE commit with
    its high watermark; the windows are the asset's Dagster partitions."""

    name: str = Field(description="Pipeline name: lower case, digits, '_'.")
    description: str | None = Field(default=None, description="Shown on the asset in the UI.")
    source: ColumnSourceConfig
    watermark: TimeWatermarkConfig
    table: ColumnTableConfig
    schedule: TimeScheduleConfig = Field(default_factory=TimeScheduleConfig)

    @model_validator(mode="before")
    @classmethod
    def _downloads_into_the_tables_staging(cls, data: Any) -> Any:
        """A ``file_download`` source without ``staging_uri`` downloads into the table's
        staging folder: said once, when the configuration is read (no run rewrites it)."""
        if not isinstance(data, dict):
            return data
        source, table = data.get("source"), data.get("table")
        uri = table.get("uri") if isinstance(table, dict) else getattr(table, "uri", None)
        if (
            isinstance(source, dict)
            and source.get("type") == "file_download"
            and source.get("staging_uri") is None
            and isinstance(uri, str)
        ):
            staging = f"{uri.rstrip('/')}/{names.STAGING_DIR}"
            return {**data, "source": {**source, "staging_uri": staging}}
        return data

    @model_validator(mode="after")
    def _replace_only(self) -> TimePipelineConfig:
        _time_merge_keys(self.table, self.watermark.column)
        if isinstance(self.source, FileDownloadSourceConfig):
            self._check_file_download(self.source)
        try:  # the source checks its settings against the time column, as its builder does
            self.source.check_watermark(self.name, self.watermark.columns)
        except ConfigError as error:
            raise ValueError(str(error)) from error
        return self

    def _check_file_download(self, source: FileDownloadSourceConfig) -> None:
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

    @property
    def dataflow_id(self) -> str:
        return self.name
