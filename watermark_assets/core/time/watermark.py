"""The time watermark (kind ``"time"``): what each window's runs covered, and the cut-off rule.

**Meaning.** A window's high watermark is its end when it succeeded: the seed's daily partition
2020-02-20 has high watermark 2020-02-21 00:00; a partial window's is ``to`` at that run (the seed's
``[2020-02-01, 2020-02-21)`` has 2020-02-21). A window that never succeeded has no history, so it
always runs.

**Value: the covered instants, not one entry per window.** A run of window ``[start, end)`` that
committed replaced the table's rows in ``[start, high)`` (its high watermark). The watermark keeps
the union of those ranges as disjoint half-open spans (:class:`~.spans.Spans`, epoch
milliseconds), so it is as large as the number of *gaps* (windows never run, a partial window
followed by later ones), not the number of windows: five years of hourly windows that all
succeeded are one span. Reading a window back is exact because the windows of one pipeline tile
``[from, to)`` and a recorded high watermark lies in ``(start, end]``:

- a window has history iff its start is covered (only its own run can cover its start);
- its high watermark is ``min(end, end of the span holding its start)``: the span ends exactly at
  a high watermark below the window's end (nothing else covers the rest of that window), and
  anywhere at or after the end otherwise;
- the highest high watermark is the last span's end.

The windows are derived from ``from`` and the partitioning, which a pipeline keeps; when a
configuration changes them, the spans still say which instants were replaced, and each new window
is read against them (a window whose start was covered has history up to the span's end).

**JSON**, spans in order, instants as ISO text (:meth:`TimeWatermark.to_json`)::

    {"spans":[["2019-01-01T00:00:00.000Z","2020-02-21T00:00:00.000Z"]]}

The earlier form, one key per window (window start -> high watermark in ms, as commits written
before the spans hold it), is still read: ``{"2020-02-20T00:00:00.000Z": 1582243200000}``. DIL
stores a failed first run as a high watermark *equal to the window's start*; such an entry covers
nothing, so the window is new again.

**Moving.** :meth:`TimeWatermark.advance` records the windows a run committed and
:meth:`~TimeWatermark.merge` combines concurrent runs; both are a union of spans, so no window's
high watermark ever goes down (the contract of :mod:`watermark_assets.core.watermark`).

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
from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.text import time_text
from watermark_assets.core.time.instant import (
    format_millis,
    from_millis,
    parse_millis,
    to_millis,
)
from watermark_assets.core.time.partitioning import TimeWindows, windows
from watermark_assets.core.time.spans import Spans
from watermark_assets.core.time.spec import TimeSpec
from watermark_assets.core.time.tick import CutOff, DueWindows, Opening
from watermark_assets.core.watermark import Watermark, register

Observed: TypeAlias = "TimeWindow | Iterable[TimeWindow]"
"""What :meth:`TimeWatermark.advance` takes: the window(s) a run committed."""

#: The key of the JSON form (:meth:`TimeWatermark.to_json`).
SPANS_KEY = "spans"


@register
@dataclass(frozen=True)
class TimeWatermark:
    """The instants the pipeline's committed windows covered (module docstring).

    ``spans`` is a :class:`~.spans.Spans`; a mapping window start -> high watermark (epoch ms,
    the earlier per-window form) is accepted too and becomes the union of its ``[start, high)``.
    Build one with :meth:`empty`, :meth:`of` (datetimes), :meth:`advance` or :meth:`from_json`.
    """

    kind: ClassVar[str] = "time"

    spans: Spans = field(default_factory=Spans)

    def __post_init__(self) -> None:
        if isinstance(self.spans, Mapping):
            spans = Spans(self.spans.items())
            object.__setattr__(self, "spans", spans)
        elif not isinstance(self.spans, Spans):
            raise TypeError(f"a time watermark holds Spans, not {self.spans!r}")

    @classmethod
    def empty(cls) -> TimeWatermark:
        """No window has succeeded yet (a first run)."""
        return cls()

    @classmethod
    def of(cls, high_watermarks: Mapping[datetime, datetime]) -> TimeWatermark:
        """From aware datetimes: window start -> high watermark (a high watermark at or before
        its start is no history)."""
        return cls(Spans((to_millis(s), to_millis(h)) for s, h in high_watermarks.items()))

    @property
    def is_empty(self) -> bool:
        """No window has succeeded: the cut-off is ``from`` and every window runs."""
        return not self.spans

    @property
    def highest(self) -> datetime | None:
        """The largest high watermark (the job's, in the seed's words); None when empty."""
        highest = self.spans.highest
        return None if highest is None else from_millis(highest)

    def high_watermark(self, window: TimeWindow) -> datetime | None:
        """The high watermark of ``window`` (one of the pipeline's windows): ``min(end, end of
        the span holding its start)``; None when it has no history."""
        covered = self.spans.end_of_span_at(to_millis(window.start))
        if covered is None:
            return None
        return min(window.end, from_millis(covered))

    def high_watermarks(self, windows: Iterable[TimeWindow]) -> dict[datetime, datetime]:
        """Window start -> high watermark of those of ``windows`` with history, in their order
        (each window costs a binary search; meant for a few windows, or tests)."""
        highs: dict[datetime, datetime] = {}
        for window in windows:
            high = self.high_watermark(window)
            if high is not None:
                highs[window.start] = high
        return highs

    def count_with_history(self, windows: TimeWindows) -> int:
        """How many of ``windows`` have a high watermark: all but those starting in a gap
        (``O(gaps)``, no window built)."""
        at = windows.first_starting_at_or_after
        without = 0
        for lo, hi in self.spans.gaps():
            first = 0 if lo is None else at(lo)
            without += (len(windows) if hi is None else at(hi)) - first
        return len(windows) - without

    def covered(self) -> tuple[TimeWindow, ...]:
        """The spans as ``[start, end)`` windows, in order (what :meth:`to_json` writes)."""
        return tuple(TimeWindow(from_millis(s), from_millis(e)) for s, e in self.spans)

    def advance(self, observed: Observed) -> TimeWatermark:
        """The watermark after the windows in ``observed`` were committed: each window's range
        ``[start, end)`` (``to`` as the end of a partial window) is covered from now on.

        The only way forward: no high watermark goes down. A window that failed is simply not
        passed; it keeps the high watermark it had, or stays without history (then it runs
        again).
        """
        committed = [observed] if isinstance(observed, TimeWindow) else observed
        added = Spans((to_millis(w.start), to_millis(w.end)) for w in committed)
        return self.merge(TimeWatermark(added)) if added else self

    def merge(self, other: TimeWatermark) -> TimeWatermark:
        """The union of the two: commutative, associative, idempotent, and per window the
        larger high watermark."""
        merged = self.spans.union(other.spans)
        if merged is self.spans:
            return self
        return other if merged is other.spans else TimeWatermark(merged)

    def to_json(self) -> str:
        """``{"spans":[["<start, ISO>","<end, ISO>"], ...]}`` in order (module docstring)."""
        spans = [[format_millis(s), format_millis(e)] for s, e in self.spans]
        return json.dumps({SPANS_KEY: spans}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> TimeWatermark:
        """Read :meth:`to_json`'s text, or the earlier per-window form (module docstring);
        ``{}`` and ``null`` are the empty watermark."""
        try:
            value: Any = json.loads(text)
        except (TypeError, ValueError) as error:
            raise WatermarkJSONError(text, f"not JSON ({error})") from None
        if value is None:
            return cls()
        if not isinstance(value, dict):
            raise WatermarkJSONError(text, "a time watermark is a JSON object or null")
        if SPANS_KEY in value:
            return cls(_read_spans(text, value))
        return cls(_read_per_window(text, value))

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

    def due(
        self, windows: TimeWindows, cut_off: CutOff, *, opening: Opening | None = None
    ) -> DueWindows:
        """The windows that run: those ending after the cut-off, and those without history.

        Windows end in increasing order, so the first kind is a suffix of ``windows`` found by
        index. Before it, a window without history is one starting in a gap between spans, and
        each gap's windows are an index range: the time grows with the gaps and the windows that
        run, not with the windows that already succeeded.
        """
        boundary = windows.first_ending_after(cut_off.at)
        new: list[TimeWindow] = []
        at = windows.first_starting_at_or_after
        for lo, hi in self.spans.gaps() if boundary else ():
            first = 0 if lo is None else at(lo)
            if first >= boundary:
                break
            last = boundary if hi is None else min(boundary, at(hi))
            new.extend(windows[first:last])
        rerun: list[TimeWindow] = []
        if not self.spans:  # a first run: every window is new, none is looked up
            new.extend(windows[boundary:])
        for window in windows[boundary:] if self.spans else ():
            covered = self.spans.end_of_span_at(to_millis(window.start)) is not None
            (rerun if covered else new).append(window)
        return DueWindows(cut_off, tuple(rerun), tuple(new), windows, opening)

    def due_at(self, spec: TimeSpec, now: datetime) -> DueWindows:
        """One tick's decision: :meth:`due` over ``windows(spec, now)`` with
        :meth:`cut_off` ``(spec, now)``; without any window, when the first one comes."""
        tiles = windows(spec, now)
        return self.due(tiles, self.cut_off(spec, now), opening=Opening.of(spec, tiles, now))

    def __str__(self) -> str:
        if self.is_empty:
            return "(empty: every window runs)"
        count = len(self.spans)
        return (
            f"{count} covered span{'' if count == 1 else 's'}, highest watermark "
            f"{'none' if self.highest is None else time_text(self.highest)}"
        )


def _read_spans(text: str, value: dict[str, Any]) -> Spans:
    """The spans of the JSON form ``{"spans": [[start, end], ...]}``."""
    spans = value[SPANS_KEY]
    if len(value) != 1 or not isinstance(spans, list):
        raise WatermarkJSONError(text, 'expected {"spans": [[start, end], ...]} and nothing else')
    read: list[tuple[int, int]] = []
    for span in spans:
        bounds = (
            [parse_millis(b) if isinstance(b, str) else None for b in span]
            if isinstance(span, list)
            else []
        )
        if len(bounds) != 2 or bounds[0] is None or bounds[1] is None or bounds[0] >= bounds[1]:
            raise WatermarkJSONError(
                text,
                f"span {span!r} is not [start, end) as two ISO instants like "
                '"2020-02-20T00:00:00.000Z", the start first',
            )
        read.append((bounds[0], bounds[1]))
    return Spans(read)


def _read_per_window(text: str, value: dict[str, Any]) -> Spans:
    """The earlier form: ``{"<window start, ISO>": <high watermark, epoch ms>, ...}``."""
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
    return Spans(entries.items())


if TYPE_CHECKING:
    # Static proof that the time kind satisfies the contract (mypy checks this assignment).
    def _conforms(w: TimeWatermark) -> Watermark[Observed]:
        return w
