"""A pipeline's ``backlog_limits:`` key: limits on its backlog, checked as a Dagster asset check.

A file-path pipeline's sensor measures on every tick how many files and bytes wait above the
watermarks and how old the oldest of them is; an event-time pipeline's run measures how far its
watermark lags the clock. With limits set, the asset gets the check ``backlog_within_limits``:
the sensor (file path) or the run (event time) reports its result beside the numbers, so the
asset's page says whether the backlog is within its limits, and a user (or Dagster's alerting)
can act on a failed check. Absent (the default): no check, the numbers alone.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from watermark_assets.config.base import Model


def duration_seconds(value: str, key: str) -> float:
    """``"2 hours"`` -> 7200.0; a ValueError naming ``key`` and the accepted form."""
    from watermark_assets.core.event_time.duration import parse_duration_ms

    try:
        return parse_duration_ms(value) / 1000
    except ValueError as error:
        raise ValueError(f"backlog_limits.{key}: {error}") from None


class BacklogLimits(Model):
    """What a file-path and an event-time pipeline's limits share: the severity, and the
    limits as numbers (:meth:`maxima`)."""

    severity: Literal["warn", "error"] = Field(
        default="warn",
        description="The check's severity when a limit is passed: warn (the default) or error.",
    )

    @field_validator("*", mode="after")
    @classmethod
    def _valid_duration(cls, value: Any, info: Any) -> Any:
        if info.field_name.endswith(("_age", "_lag")) and value is not None:
            duration_seconds(value, info.field_name)
        return value

    @model_validator(mode="after")
    def _one_limit(self) -> BacklogLimits:
        if all(getattr(self, name) is None for name in self.limit_names()):
            raise ValueError(
                f"backlog_limits sets no limit; set at least one of {list(self.limit_names())}, "
                "or remove the key"
            )
        return self

    @classmethod
    def limit_names(cls) -> tuple[str, ...]:
        return tuple(name for name in cls.model_fields if name != "severity")

    def maxima(self) -> dict[str, float]:
        """Each limit that is set, as a number (durations in seconds)."""
        found: dict[str, float] = {}
        for name in self.limit_names():
            value = getattr(self, name)
            if value is not None:
                found[name] = (
                    duration_seconds(value, name) if isinstance(value, str) else float(value)
                )
        return found


class FileBacklogLimits(BacklogLimits):
    """A file-path pipeline's limits, checked on every sensor tick that observes the backlog."""

    files_pending: int | None = Field(
        default=None, ge=0, description="Most files waiting above the watermarks."
    )
    bytes_pending: int | None = Field(
        default=None, ge=0, description="Most bytes in files waiting above the watermarks."
    )
    oldest_pending_age: str | None = Field(
        default=None,
        description="Longest time the oldest waiting file may wait since it landed (its name's "
        "or landing folder's time), e.g. '2 hours'.",
    )


class EventTimeBacklogLimits(BacklogLimits):
    """An event-time pipeline's limit, checked on every run."""

    event_time_lag: str | None = Field(
        default=None,
        description="Longest the event-time watermark may lag the clock after a run, "
        "e.g. '1 hour'.",
    )
