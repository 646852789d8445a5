"""A column pipeline (``watermark.kind: column``, seed 001): rows above a column watermark, read
from a table or files; its replay."""

from __future__ import annotations

import os
import re
from datetime import date, datetime, timedelta
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from watermark_assets.config.base import Model as _Model
from watermark_assets.config.providers import DeltaMetadataProviderConfig, ProviderConfig
from watermark_assets.config.shared import (
    ColumnTableConfig,
    PartitionsConfig,
    PipelineModel,
)
from watermark_assets.config.sources import ColumnSourceConfig
from watermark_assets.core.column.lookback import Backward
from watermark_assets.core.column.replay import ReplayChunk, ReplayRange, split_range
from watermark_assets.core.errors import LookbackError
from watermark_assets.exceptions import ConfigError


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

    def chunks(self, column: str) -> list[ReplayChunk]:
        """``[start, end)`` over ``column`` cut into chunks of ``chunk`` (the last one shorter
        when the size does not divide the range)."""
        return split_range(column, self.start, self.end, self.chunk.step)

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


class ColumnPipelineConfig(PipelineModel):
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
    replay: ReplayConfig | None = Field(
        default=None,
        description="The range ``watermark-assets replay PIPELINE`` replays in chunks "
        "({start, end, chunk, save_watermark, target_table}); --start/--end override it.",
    )

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

    def replay_problem(self, replay: ReplayRange) -> None:
        """ValueError when ``replay`` would duplicate rows: a replay into the pipeline's own
        table re-reads rows its runs committed, so it must replace its chunks' windows."""
        if self.replays_own_table(replay) and not self.destination.replace_by_watermark:
            raise ValueError(
                "replay into the pipeline's own table re-reads rows it already holds, which an "
                "append would duplicate; set destination.replace_by_watermark: true (each chunk "
                "replaces its window) or give replay.target_table (a new table)"
                + (_NOT_MERGE_FOR_WINDOWS if self.table.merge_keys else "")
            )

    def replays_own_table(self, replay: ReplayRange) -> bool:
        """Whether ``replay`` writes to the pipeline's own table (no other ``target_table``)."""
        target = replay.target_table
        return target is None or _same_location(target, self.table.uri)

    @model_validator(mode="after")
    def _source_takes_the_watermark(self) -> ColumnPipelineConfig:
        # A source checks its settings against the watermark columns (e.g. an HTTP API's
        # watermark_param_mapping names only watermark columns), as its builder does.
        try:
            self.source.check_watermark(self.name, self.watermark.columns)
        except ConfigError as error:
            raise ValueError(str(error)) from error
        return self

    @property
    def dataflow_id(self) -> str:
        """The watermark's key in its provider: the pipeline name."""
        return self.name


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
