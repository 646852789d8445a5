"""The tracker: the next event-time watermark from a run's event-time statistics (seed 004).

As Spark's ``WatermarkTracker.updateWatermark``, for each input of a query:

- an input whose run had rows gets ``max(event time) - delay``, kept only when greater than its
  previous mark (an input's mark never goes down);
- an input that has never had rows counts as 0 ("Populate 0 if we haven't seen any data yet");
- the policy (:class:`WatermarkPolicy`, ``spark.sql.streaming.multipleWatermarkPolicy``) chooses
  one value among the inputs: ``min`` (the default, safe: nothing one input still sends is late
  because another is ahead) or ``max`` (advances with the fastest input; more records are late);
- the chosen value becomes the global watermark only when it is greater ("Event time watermark
  didn't move" otherwise).

One addition Spark lacks (Flink's ``withIdleness``): with ``idle_timeout_ms``, an input that had
no rows for longer than that (processing time, ``now``) is left out of the choice, so one idle
source does not hold the min back forever. It counts again as soon as it has rows; records it
then sends below the global watermark are late (the watermark never moves back). An input that
never had rows is idle once the first run the watermark saw (``started_ms``) is longer ago than
the timeout (Flink starts the idle timer when the source starts); before that it counts 0, as in
Spark. When every input is idle, the watermark stays where it is.

The tracker takes its settings once (the factory reads the configuration; the tracker never
does) and is pure: ``observe`` returns a new value, which the caller commits with its data.

Standard library only.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from watermark_assets.core.event_time.operators import LocalWatermarks
from watermark_assets.core.event_time.watermark import EventTimeWatermark, InputMark, InputMarks
from watermark_assets.core.text import millis_text


class WatermarkPolicy(enum.Enum):
    """How several inputs' watermarks make one (``spark.sql.streaming.multipleWatermarkPolicy``)."""

    MIN = "min"
    MAX = "max"

    @classmethod
    def _missing_(cls, value: object) -> WatermarkPolicy | None:
        if isinstance(value, str):
            for member in cls:
                if member.value == value.lower():
                    return member
        return None

    def choose(self, values: Iterable[int]) -> int | None:
        """The min or the max of ``values``; None when there are none."""
        chosen = list(values)
        if not chosen:
            return None
        return min(chosen) if self is WatermarkPolicy.MIN else max(chosen)


@dataclass(frozen=True, kw_only=True)
class EventTimeStats:
    """What one run saw of one input's event time (Spark's ``EventTimeStats``): ``count`` rows,
    the least and greatest event time (milliseconds, UTC; None when ``count`` is 0)."""

    count: int
    min_ms: int | None = None
    max_ms: int | None = None
    #: the greatest event time per partition of the input (its local watermarks' source), under
    #: ``partitioning`` (the partition columns; None: not tracked)
    local_max_ms: Mapping[str, int] = field(default_factory=dict)
    partitioning: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError(f"row count {self.count} is refused: 0 or more")
        if (self.count == 0) != (self.max_ms is None) or (self.max_ms is None) != (
            self.min_ms is None
        ):
            raise ValueError(
                f"event time stats {self!r}: min and max are given exactly when count > 0"
            )
        if self.min_ms is not None and self.max_ms is not None and self.min_ms > self.max_ms:
            raise ValueError(f"event time stats {self!r}: min is after max")

    @classmethod
    def of(cls, event_times_ms: Iterable[int]) -> EventTimeStats:
        """The stats of some event times (tests and small inputs; Spark computes them with one
        aggregation on the executors)."""
        times = list(event_times_ms)
        if not times:
            return cls(count=0)
        return cls(count=len(times), min_ms=min(times), max_ms=max(times))


NO_ROWS = EventTimeStats(count=0)


@dataclass(frozen=True, kw_only=True)
class WatermarkTracker:
    """The settings of a query's event-time watermark, and :meth:`observe` (module docstring).

    ``delays_ms``: input name -> its delay (``withWatermark(col, delay)``), one entry per input;
    ``policy``: min (default) or max; ``idle_timeout_ms``: None (Spark: never idle) or the
    processing time after which an input without rows is left out of the choice.
    """

    delays_ms: Mapping[str, int]
    policy: WatermarkPolicy = WatermarkPolicy.MIN
    idle_timeout_ms: int | None = None

    def __post_init__(self) -> None:
        if not self.delays_ms:
            raise ValueError("a watermark tracker needs at least one input (name -> delay)")
        for name, delay in self.delays_ms.items():
            if delay < 0:
                raise ValueError(
                    f"input {name!r}: delay {delay} ms is refused; a delay is 0 or more "
                    "(how late an event may arrive, e.g. 600000 for 10 minutes)"
                )
        if self.idle_timeout_ms is not None and self.idle_timeout_ms <= 0:
            raise ValueError(
                f"idle timeout {self.idle_timeout_ms} ms is refused: more than 0, or None for "
                "never idle"
            )
        object.__setattr__(self, "delays_ms", dict(sorted(self.delays_ms.items())))

    def observe(
        self,
        current: EventTimeWatermark,
        batch: Mapping[str, EventTimeStats],
        now_ms: int,
    ) -> EventTimeWatermark:
        """The watermark after a run that saw ``batch`` (input -> stats; an input left out had
        no rows) at processing time ``now_ms``. Never lower than ``current`` in any field."""
        unknown = set(batch) - set(self.delays_ms)
        if unknown:
            raise ValueError(
                f"event time stats for unknown input(s) {sorted(unknown)}; the inputs are "
                f"{list(self.delays_ms)}"
            )
        marks: dict[str, InputMark] = {}
        for name, delay in self.delays_ms.items():
            mark = current.mark(name)
            stats = batch.get(name, NO_ROWS)
            if stats.count and stats.max_ms is not None:
                advanced = mark.merge(
                    InputMark(
                        watermark_ms=stats.max_ms - delay,
                        max_event_ms=stats.max_ms,
                        last_data_ms=now_ms,
                    )
                )
                if stats.partitioning is not None:
                    local = _local_after(mark, stats, delay)
                    advanced = replace(advanced, local=local, partitioning=stats.partitioning)
                mark = advanced
            marks[name] = mark
        started = now_ms if current.started_ms is None else current.started_ms
        chosen = self.choose(marks, started, now_ms)
        next_value = EventTimeWatermark(
            watermark_ms=current.watermark_ms if chosen is None else chosen,
            inputs=InputMarks(marks),
            started_ms=started,
        )
        return current.advance(next_value)

    def active_inputs(
        self, marks: Mapping[str, InputMark], started_ms: int | None, now_ms: int
    ) -> list[str]:
        """The inputs the policy chooses among at ``now_ms``: all, less the idle ones (no rows
        for longer than ``idle_timeout_ms``: since their last rows, or since ``started_ms`` for
        an input that never had any)."""
        if self.idle_timeout_ms is None:
            return list(marks)
        active: list[str] = []
        for name, mark in marks.items():
            since = mark.last_data_ms if mark.last_data_ms is not None else started_ms
            if since is None or now_ms - since <= self.idle_timeout_ms:
                active.append(name)
        return active

    def choose(
        self, marks: Mapping[str, InputMark], started_ms: int | None, now_ms: int
    ) -> int | None:
        """The policy's value over the active inputs (an input without rows counts 0); None
        when every input is idle."""
        active = self.active_inputs(marks, started_ms, now_ms)
        values = (
            0 if marks[name].watermark_ms is None else marks[name].watermark_ms for name in active
        )
        return self.policy.choose(v for v in values if v is not None)

    def explain(self, before: EventTimeWatermark, after: EventTimeWatermark, now_ms: int) -> str:
        """One line: the inputs' marks, the idle ones, the policy and whether the watermark moved,
        e.g. ``watermark 12:05 -> 12:10 (min of clicks 12:10, views 12:14; idle: none)``."""
        active = set(self.active_inputs(after.inputs, after.started_ms, now_ms))
        parts = []
        for name in self.delays_ms:
            mark = after.mark(name)
            value = (
                "no rows yet (0)" if mark.watermark_ms is None else millis_text(mark.watermark_ms)
            )
            parts.append(f"{name} {value}{'' if name in active else ' (idle, left out)'}")
        moved = (
            f"{millis_text(before.watermark_ms)} -> {millis_text(after.watermark_ms)}"
            if after.watermark_ms > before.watermark_ms
            else f"stays at {millis_text(after.watermark_ms)}"
        )
        return f"watermark {moved} ({self.policy.value} of {', '.join(parts)})"


def _instant(millis: int | None, none: str) -> str:
    return none if millis is None else millis_text(millis)


def _local_after(mark: InputMark, stats: EventTimeStats, delay: int) -> LocalWatermarks:
    """The input's local watermarks after a run that saw ``stats``. When the partitioning
    changed (partitions merged or split), the old state is rescaled first: every partition of
    the new partitioning starts at the maximum of the old ones (seed 002), so no local
    watermark is ever below one already reached; then each moves to its max event - delay."""
    local = mark.local
    if mark.partitioning != stats.partitioning:
        local = local.rescale(stats.local_max_ms)
    for partition, top in sorted(stats.local_max_ms.items()):
        local = local.advance(partition, top - delay)
    return local
