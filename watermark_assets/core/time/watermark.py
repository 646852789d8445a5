"""The time watermark (kind ``"time"``): one high watermark per window, and the cut-off rule.

**Value.** A mapping *window start -> high watermark*, both in epoch milliseconds (DIL works in
milliseconds). A window's high watermark is its end when it succeeded: the seed's daily partition
2020-02-20 has high watermark 2020-02-21 00:00; a partial window's is ``to`` at that run (the seed's
``[2020-02-01, 2020-02-21)`` has 2020-02-21). Its JSON form sorts chronologically::

    {"2020-02-20T00:00:00.000Z": 1582243200000}

**No history is an absent key.** A window that never succeeded has no entry, so it always runs.
DIL stores a failed first run as a high watermark *equal to the window's start* and ignores it on
the next run; an entry at or below its window's start is therefore dropped when a watermark is
built (read from old state, say), and the window is new again.

**Moving.** :meth:`TimeWatermark.advance` records the windows a run committed and
:meth:`~TimeWatermark.merge` combines concurrent runs; both take the per-window maximum, so no entry
ever goes down (the contract of :mod:`watermark_assets.core.watermark`).

**Deciding a tick** (:meth:`~TimeWatermark.cut_off`, :meth:`~TimeWatermark.due`, seed 003)::

    effective cut-off = highest high watermark + abstinent days - grace days   (first run: from)

A window runs when its end is after the cut-off, or when it has no history. The cut-off is never
put before ``from``: nothing before ``from`` is read, so an earlier cut-off would decide the same,
and this keeps the cut-off from moving backwards after a first run with a large grace period.
:class:`~.tick.DueWindows` says why in words for the tick.

Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from watermark_assets.core.errors import WatermarkJSONError
from watermark_assets.core.frozen_map import FrozenMap
from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.time.instant import (
    format_millis,
    from_millis,
    parse_millis,
    to_millis,
)
from watermark_assets.core.time.partitioning import TimeWindows, windows
from watermark_assets.core.time.spec import TimeSpec
from watermark_assets.core.time.tick import CutOff, DueWindows, short_instant
from watermark_assets.core.watermark import Watermark, register

Observed: TypeAlias = "TimeWindow | Iterable[TimeWindow]"
"""What :meth:`TimeWatermark.advance` takes: the window(s) a run committed."""


class HighWatermarks(FrozenMap[int, int]):
    """An immutable, hashable mapping window start (ms) -> high watermark (ms), in start order.

    Equal to any mapping with the same items. Entries whose high watermark is not after the start
    (DIL's failed first run) are left out.
    """

    __slots__ = ("_highest",)

    def _prepare(self, items: dict[int, int]) -> dict[int, int]:
        checked: dict[int, int] = {}
        for start, high in items.items():
            for value in (start, high):
                if isinstance(value, bool) or not isinstance(value, int):
                    raise TypeError(
                        f"time watermark entry {start!r}: {high!r} must map epoch milliseconds "
                        "(int) to epoch milliseconds (int)"
                    )
            if high > start:
                checked[start] = high
        self._highest = max(checked.values(), default=None)
        return checked

    @property
    def highest(self) -> int | None:
        """The largest high watermark; None when empty."""
        return self._highest


@register
@dataclass(frozen=True)
class TimeWatermark:
    """The high watermark of each window that succeeded (module docstring).

    ``high_watermarks`` maps a window's start to its high watermark, in epoch milliseconds; it is
    stored as a :class:`HighWatermarks`. Build one with :meth:`empty`, :meth:`of` (datetimes), or
    :meth:`from_json`.
    """

    kind: ClassVar[str] = "time"

    high_watermarks: Mapping[int, int] = field(default_factory=HighWatermarks)

    def __post_init__(self) -> None:
        if not isinstance(self.high_watermarks, HighWatermarks):
            object.__setattr__(self, "high_watermarks", HighWatermarks(self.high_watermarks))

    @classmethod
    def empty(cls) -> TimeWatermark:
        """No window has succeeded yet (a first run)."""
        return cls()

    @classmethod
    def of(cls, high_watermarks: Mapping[datetime, datetime]) -> TimeWatermark:
        """From aware datetimes: window start -> high watermark."""
        return cls({to_millis(s): to_millis(h) for s, h in high_watermarks.items()})

    @property
    def _entries(self) -> HighWatermarks:
        assert isinstance(self.high_watermarks, HighWatermarks)  # normalised in __post_init__
        return self.high_watermarks

    @property
    def is_empty(self) -> bool:
        """No window has succeeded: the cut-off is ``from`` and every window runs."""
        return not self._entries

    @property
    def highest(self) -> datetime | None:
        """The largest high watermark (the job's, in the seed's words); None when empty."""
        highest = self._entries.highest
        return None if highest is None else from_millis(highest)

    def high_watermark(self, window: TimeWindow | datetime) -> datetime | None:
        """The high watermark of the window starting at ``window`` (or ``window.start``); None
        when that window has no history."""
        start = window.start if isinstance(window, TimeWindow) else window
        high = self._entries.get(to_millis(start))
        return None if high is None else from_millis(high)

    def as_dict(self) -> dict[datetime, datetime]:
        """Window start -> high watermark, as aware datetimes, in start order."""
        return {from_millis(s): from_millis(h) for s, h in self._entries.items()}

    def advance(self, observed: Observed) -> TimeWatermark:
        """The watermark after the windows in ``observed`` were committed: each window's high
        watermark becomes its end (``to`` for a partial window), unless it already is higher.

        The only way forward: no entry goes down. A window that failed is simply not passed; it
        keeps the entry it had, or stays without history (then it runs again).
        """
        committed = [observed] if isinstance(observed, TimeWindow) else observed
        highs: dict[int, int] = {}
        for window in committed:
            start, end = to_millis(window.start), to_millis(window.end)
            if end > highs.get(start, end - 1):  # one start twice in a batch: the later end
                highs[start] = end
        return self.merge(TimeWatermark(highs)) if highs else self

    def merge(self, other: TimeWatermark) -> TimeWatermark:
        """Per-window maximum of the two: commutative, associative, idempotent."""
        if not other._entries:
            return self
        if not self._entries:
            return other
        merged = dict(self._entries)
        for start, high in other._entries.items():
            if high > merged.get(start, high - 1):
                merged[start] = high
        return TimeWatermark(merged)

    def to_json(self) -> str:
        """``{"<window start, ISO>": <high watermark, epoch ms>, ...}`` in start order."""
        return json.dumps(
            {format_millis(s): h for s, h in self._entries.items()},
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> TimeWatermark:
        """Read :meth:`to_json`'s text (``{}`` and ``null`` are the empty watermark)."""
        try:
            value: Any = json.loads(text)
        except (TypeError, ValueError) as error:
            raise WatermarkJSONError(text, f"not JSON ({error})") from None
        if value is None:
            return cls()
        if not isinstance(value, dict):
            raise WatermarkJSONError(text, "a time watermark is a JSON object or null")
        entries: dict[int, int] = {}
        for key, high in value.items():
            start = parse_millis(key)
            if start is None:
                raise WatermarkJSONError(
                    text, f"key {key!r} is not an ISO window start like 2020-02-20T00:00:00.000Z"
                )
            if isinstance(high, bool) or not isinstance(high, int):
                raise WatermarkJSONError(
                    text, f"the high watermark of {key!r} is {high!r}; expected epoch ms (int)"
                )
            entries[start] = high
        return cls(entries)

    def cut_off(self, spec: TimeSpec, now: datetime) -> CutOff:
        """The effective cut-off at ``now``: highest high watermark + abstinent - grace (days),
        never before ``from``; ``from`` itself on a first run (``now`` resolves a rolling
        ``from``)."""
        start = spec.resolve_from(now)
        highest = self.highest
        if highest is None:
            return CutOff(start, None, spec.grace_days, spec.abstinent_days, start)
        formula = highest + timedelta(days=spec.abstinent_days - spec.grace_days)
        return CutOff(max(formula, start), highest, spec.grace_days, spec.abstinent_days, start)

    def due(self, windows: TimeWindows, cut_off: CutOff) -> DueWindows:
        """The windows that run: those ending after the cut-off, and those without history.

        Windows end in increasing order, so the first kind is a suffix of ``windows`` found by
        index; the windows before it are only scanned for missing entries (a set difference of
        their starts, no window built), so the time stays small however many already succeeded.
        """
        boundary = windows.first_ending_after(cut_off.at)
        entries = self._entries
        starts = windows.starts_ms()
        missing = set(starts[:boundary]).difference(entries)
        new = (
            [windows[i] for i, s in enumerate(starts[:boundary]) if s in missing] if missing else []
        )
        rerun: list[TimeWindow] = []
        for i, window in enumerate(windows[boundary:], start=boundary):
            (rerun if starts[i] in entries else new).append(window)
        return DueWindows(cut_off, tuple(rerun), tuple(new), windows)

    def due_at(self, spec: TimeSpec, now: datetime) -> DueWindows:
        """One tick's decision: :meth:`due` over ``windows(spec, now)`` with
        :meth:`cut_off` ``(spec, now)``."""
        return self.due(windows(spec, now), self.cut_off(spec, now))

    def __str__(self) -> str:
        if self.is_empty:
            return "(empty: every window runs)"
        return f"{len(self._entries)} windows, highest watermark {short_instant(self.highest)}"


if TYPE_CHECKING:
    # Static proof that the time kind satisfies the contract (mypy checks this assignment).
    def _conforms(w: TimeWatermark) -> Watermark[Observed]:
        return w
