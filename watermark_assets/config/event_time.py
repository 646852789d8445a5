"""The configuration of an event-time pipeline (``watermark.kind: event_time``, issue 9).

One of ``config.PipelineConfig``'s members. The checks that need the whole file (the upstream
pipelines exist; what a stream cannot do) are in ``config.project.ProjectConfig``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from watermark_assets.config.backlog import EventTimeBacklogLimits
from watermark_assets.config.base import Model as _Model
from watermark_assets.config.shared import (
    PartitionsConfig,
    PipelineModel,
)
from watermark_assets.core.event_time import parse_duration_ms
from watermark_assets.spark.window_agg import Aggregate, distinct_column

#: The accepted ``source.type`` values of an event-time pipeline.
EVENT_TIME_SOURCE_TYPES: Mapping[str, str] = {
    "pipeline": "the rows another pipeline of this file appended to its Delta table",
}


class PipelineSourceConfig(_Model):
    """Other pipelines' Delta tables, read incrementally: the rows their commits appended since
    the last batch (an event-time aggregate downstream of ingesting pipelines). Several
    pipelines are several inputs, each with its own watermark (merged by ``watermark.policy``)."""

    type: Literal["pipeline"] = "pipeline"
    pipeline: str | None = Field(
        default=None, description="The upstream pipeline's name (its asset is upstream)."
    )
    pipelines: list[str] | None = Field(
        default=None,
        description="Several upstream pipelines (inputs), instead of pipeline; their rows are "
        "aggregated together and their watermarks combined by watermark.policy.",
    )

    @model_validator(mode="after")
    def _one_form(self) -> PipelineSourceConfig:
        if (self.pipeline is None) == (self.pipelines is None):
            raise ValueError(
                "source: write exactly one of pipeline (one upstream) and pipelines (a list)"
            )
        names = self.names
        if not names or len(set(names)) != len(names):
            raise ValueError(f"source.pipelines {names!r} must name distinct pipelines")
        return self

    @property
    def names(self) -> list[str]:
        """The upstream pipelines, one per input."""
        return [self.pipeline] if self.pipeline is not None else list(self.pipelines or [])


def _duration(value: Any, key: str) -> int:
    try:
        return parse_duration_ms(str(value))
    except ValueError as error:
        raise ValueError(f"{key}: {error}") from None


class EventTimeWatermarkConfig(_Model):
    """An event-time watermark: max(event time) - delay, only forward."""

    kind: Literal["event_time"] = "event_time"
    column: str = Field(description="The upstream table's event-time column (a timestamp).")
    delay: str = Field(
        default="10 minutes",
        description="How late an event may arrive ('10 minutes', Spark's withWatermark delay).",
    )
    allowed_lateness: str = Field(
        default="0",
        description="Extra time a window stays open after the watermark passed its end "
        "('0', '5 minutes'); 0 is Spark's behaviour.",
    )
    late_policy: Literal["keep", "update"] = Field(
        default="keep",
        description="keep: a late record goes to the late table (Spark drops it). update: it "
        "reopens its emitted window, whose row is recomputed from every upstream row and "
        "replaced in ONE commit (engine batch only).",
    )
    policy: Literal["min", "max"] = Field(
        default="min",
        description="How several inputs' watermarks make one (spark.sql.streaming."
        "multipleWatermarkPolicy): min (safe, the default) or max (faster, more late records).",
    )
    idle_timeout: str | None = Field(
        default=None,
        description="An input without new rows for this long is left out of the min, so it does "
        "not hold the others back (Flink's withIdleness); None: never idle (Spark).",
    )

    @field_validator("delay", "allowed_lateness", "idle_timeout")
    @classmethod
    def _valid_duration(cls, value: str | None, info: Any) -> str | None:
        if value is not None:
            _duration(value, f"watermark.{info.field_name}")
        return value

    @property
    def delay_ms(self) -> int:
        return _duration(self.delay, "watermark.delay")

    @property
    def lateness_ms(self) -> int:
        return _duration(self.allowed_lateness, "watermark.allowed_lateness")

    @property
    def idle_timeout_ms(self) -> int | None:
        if self.idle_timeout is None:
            return None
        return _duration(self.idle_timeout, "watermark.idle_timeout") or None


class EventWindowConfig(_Model):
    """Tumbling event-time windows."""

    size: str = Field(default="5 minutes", description="Window length ('5 minutes', '1 hour').")

    @field_validator("size")
    @classmethod
    def _valid_size(cls, value: str) -> str:
        if _duration(value, "window.size") <= 0:
            raise ValueError(f"window.size {value!r} is refused: a window lasts more than 0")
        return value

    @property
    def size_ms(self) -> int:
        return _duration(self.size, "window.size")


class EventTimeTableConfig(_Model):
    """Where an event-time aggregate writes: the output, its late records and its state."""

    uri: str = Field(description="The output table (one row per emitted window, append only).")
    late_uri: str | None = Field(
        default=None, description="Late records (kept, never dropped). Default: uri + '_late'."
    )
    state_uri: str | None = Field(
        default=None, description="Partials of the windows still open. Default: uri + '_state'."
    )

    @property
    def late(self) -> str:
        return self.late_uri or self.uri.rstrip("/") + "_late"

    @property
    def state(self) -> str:
        return self.state_uri or self.uri.rstrip("/") + "_state"


class EventTimePartitionsConfig(PartitionsConfig):
    """The asset's event-time partitions: one closes when the watermark passes its end. The
    shared partitions model with the event-time defaults: hourly or daily (hourly by default),
    ``start`` required."""

    names_key_in_errors: ClassVar[bool] = True

    granularity: Literal["hourly", "daily"] = Field(default="hourly")  # type: ignore[assignment]
    start: str = Field(description="First partition, ISO date or datetime (UTC).")
    end: str | None = Field(
        default=None,
        description="End of the last partition (exclusive), for a closed period. Default: "
        "partitions run up to now.",
    )


class EventTimeSensorConfig(_Model):
    """The sensor that materializes partitions once the watermark passed their end."""

    minimum_interval_seconds: int = Field(default=60, ge=1)
    running_by_default: bool = Field(default=False)


class EventTimePipelineConfig(PipelineModel):
    """Event-time window aggregates of another pipeline's table: windows
    emitted once the watermark passes their end, late records kept, progress committed with the
    data."""

    name: str = Field(description="Pipeline name: lower case, digits, '_'.")
    description: str | None = Field(default=None, description="Shown on the asset in the UI.")
    source: PipelineSourceConfig
    watermark: EventTimeWatermarkConfig
    window: EventWindowConfig = Field(default_factory=EventWindowConfig)
    aggregates: dict[str, str] = Field(
        default_factory=lambda: {"events": "count"},
        description="Output column -> count | sum(col) | min(col) | max(col) | "
        "count_distinct(col).",
    )
    table: EventTimeTableConfig
    partitions: EventTimePartitionsConfig
    sensor: EventTimeSensorConfig = Field(default_factory=EventTimeSensorConfig)
    engine: Literal["batch", "streaming"] = Field(
        default="batch",
        description="batch: this project's batch engine over the upstream tables "
        "(count_distinct, several inputs, allowed lateness, late_policy update). streaming: a "
        "Spark Structured Streaming query over the upstream file pipeline's landing folder "
        "(availableNow; the rows Spark drops as late are kept in the late table too).",
    )
    backlog_limits: EventTimeBacklogLimits | None = Field(
        default=None,
        description="A limit on how far the event-time watermark lags the clock after a run: "
        "the asset check backlog_within_limits.",
    )

    @model_validator(mode="after")
    def _valid_aggregates(self) -> EventTimePipelineConfig:
        if not self.aggregates:
            raise ValueError("aggregates is empty; name at least one, e.g. {events: count}")
        distinct_column(self.parsed_aggregates)
        return self

    @property
    def parsed_aggregates(self) -> tuple[Any, ...]:
        return tuple(Aggregate.parse(name, text) for name, text in self.aggregates.items())

    @property
    def dataflow_id(self) -> str:
        return self.name
