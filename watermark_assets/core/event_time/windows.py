"""Tumbling event-time windows, and when a window is closed or a record late (seeds 002, 004).

Every window is closed at its start and open at its end, ``[start, end)``, like every interval in
this project. Times are integer milliseconds since the epoch (UTC), as Spark's ``EventTimeStats``
keeps them.

- A window is *closed* once the watermark reaches its end (``end <= watermark``): no record that
  is not late can fall in it any more, so it is emitted (append mode) and its state removed. This
  is Spark's eviction predicate for a windowed aggregation.
- A record is *late* when its window was already closed by the watermark the run started with,
  less an allowed lateness (0 by default: Spark's behaviour): ``end <= watermark - lateness``.
  Spark drops such records; this project keeps them in a late-records table. A lateness holds the
  windows open just as long (they close at ``watermark - lateness``): a window emitted while rows
  could still join it would be emitted twice.

Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

from watermark_assets.core.text import millis_text


@dataclass(frozen=True, order=True)
class EventWindow:
    """One window ``[start_ms, end_ms)``; ordered by start."""

    start_ms: int
    end_ms: int

    def __post_init__(self) -> None:
        if self.end_ms <= self.start_ms:
            raise ValueError(
                f"window [{self.start_ms}, {self.end_ms}) is empty: its end must be after its start"
            )

    def contains(self, event_ms: int) -> bool:
        return self.start_ms <= event_ms < self.end_ms

    def is_closed(self, watermark_ms: int) -> bool:
        """The watermark has reached the window's end: it is emitted and never changes again."""
        return self.end_ms <= watermark_ms

    def __str__(self) -> str:
        return f"[{millis_text(self.start_ms)}, {millis_text(self.end_ms)})"


@dataclass(frozen=True)
class TumblingWindows:
    """Windows of ``size_ms`` starting at ``origin_ms + k * size_ms`` for every integer k
    (Spark's ``window(col, "5 minutes")`` has origin 0, the epoch)."""

    size_ms: int
    origin_ms: int = 0

    def __post_init__(self) -> None:
        if self.size_ms <= 0:
            raise ValueError(
                f"window size {self.size_ms} ms is refused: a window lasts at least 1 ms, "
                "e.g. 300000 for 5 minutes"
            )

    def window_of(self, event_ms: int) -> EventWindow:
        """The one window holding ``event_ms`` (floor division: right for times before the
        origin too)."""
        start = self.origin_ms + (event_ms - self.origin_ms) // self.size_ms * self.size_ms
        return EventWindow(start, start + self.size_ms)

    def is_late(self, event_ms: int, watermark_ms: int, lateness_ms: int = 0) -> bool:
        """``event_ms`` falls in a window the watermark (less ``lateness_ms``) already closed."""
        if lateness_ms < 0:
            raise ValueError(f"allowed lateness {lateness_ms} ms is refused: it is 0 or more")
        return self.window_of(event_ms).is_closed(watermark_ms - lateness_ms)


def is_late_record(event_ms: int, watermark_ms: int, timeout_ms: int = 0) -> bool:
    """Seed 002's watermark filter, for records that are not windowed: a record older than the
    watermark minus ``timeout_ms`` is late."""
    if timeout_ms < 0:
        raise ValueError(f"timeout {timeout_ms} ms is refused: it is 0 or more")
    return event_ms < watermark_ms - timeout_ms
