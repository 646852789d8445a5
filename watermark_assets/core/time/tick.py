"""One tick's decision for a time watermark: the effective cut-off, the windows due, and why.

Built by :meth:`~watermark_assets.core.time.watermark.TimeWatermark.cut_off` and
:meth:`~watermark_assets.core.time.watermark.TimeWatermark.due`; the Dagster edge turns
:attr:`DueWindows.windows` into run requests and :meth:`DueWindows.explain` into the tick's
reason, e.g.::

    3 partitions: 2020-02-18, 2020-02-19, 2020-02-20 end after the cut-off 2020-02-18T00:00:00Z
    (highest watermark 2020-02-21T00:00:00Z + abstinent 0d - grace 3d)

Windows are labelled by their start, as Dagster labels time partitions.

Standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.text import shortened, time_text
from watermark_assets.core.time.partitioning import TimeWindows

if TYPE_CHECKING:
    from watermark_assets.core.time.spec import TimeSpec


@dataclass(frozen=True)
class CutOff:
    """The effective cut-off of one tick and what it was computed from.

    ``at`` is the cut-off; ``highest`` the largest high watermark (None on a first run, when
    ``at`` is ``from_``).
    """

    at: datetime
    highest: datetime | None
    grace_days: int
    abstinent_days: int
    from_: datetime

    @property
    def first_run(self) -> bool:
        """No window has succeeded yet: the cut-off is ``from``."""
        return self.highest is None

    def __str__(self) -> str:
        at = time_text(self.at)
        if self.highest is None:
            return f"{at} (first run: from)"
        formula = (
            f"highest watermark {time_text(self.highest)} + abstinent {self.abstinent_days}d - "
            f"grace {self.grace_days}d"
        )
        formula_at = self.highest + timedelta(days=self.abstinent_days - self.grace_days)
        if formula_at < self.at:
            return f"{at} (from, since {formula} is before it)"
        return f"{at} ({formula})"


@dataclass(frozen=True)
class Opening:
    """A tick without any window (a ``from`` in the future): when the first window comes,
    :meth:`~watermark_assets.core.time.spec.TimeSpec.first_window_at`; ``at`` None: never."""

    at: datetime | None

    @classmethod
    def of(cls, spec: TimeSpec, windows: TimeWindows, now: datetime) -> Opening | None:
        """None when ``windows`` (the tick's, at ``now``) hold a window; else when one comes."""
        return None if windows else cls(spec.first_window_at(now))

    def __str__(self) -> str:
        if self.at is None:
            return "no window will ever be due (to is fixed and from moves past it with now)"
        return f"the first window becomes due at {time_text(self.at)}"


@dataclass(frozen=True)
class DueWindows:
    """One tick's decision: which windows run, and why (:meth:`explain`).

    ``rerun`` have history and end after the cut-off (grace re-runs, a grown partial window);
    ``new`` have no history (never run, or their first run failed). ``of`` is every window of the
    tick.
    """

    cut_off: CutOff
    rerun: tuple[TimeWindow, ...]
    new: tuple[TimeWindow, ...]
    of: TimeWindows
    #: ``of`` empty: when its first window comes (None: not worked out)
    opening: Opening | None = None

    @property
    def windows(self) -> tuple[TimeWindow, ...]:
        """Every window that runs, in start order."""
        return tuple(sorted((*self.rerun, *self.new), key=lambda w: w.start))

    @property
    def effective_range(self) -> TimeWindow | None:
        """``[cut-off, to)`` (never before ``from``): what an unpartitioned watermark reads, where
        the one window ``[from, to)`` would re-read everything; None when empty."""
        return self.of.effective_range(self.cut_off.at)

    def __len__(self) -> int:
        return len(self.rerun) + len(self.new)

    def explain(self) -> str:
        """The tick's reason in words, e.g. ``3 partitions: 2020-02-18, 2020-02-19, 2020-02-20
        end after the cut-off 2020-02-18T00:00:00Z (highest watermark 2020-02-21T00:00:00Z +
        abstinent 0d - grace 3d)``."""
        count = len(self)
        head = f"{count} partition{'' if count == 1 else 's'}"
        if not self.of:
            start, end = time_text(self.of.start), time_text(self.of.end)
            opening = f"; {self.opening}" if self.opening is not None else ""
            return f"{head}: no window between from {start} and to {end}{opening}"
        if not count:
            return f"{head}: all {len(self.of)} end at or before the cut-off {self.cut_off}"
        parts: list[str] = []
        if self.rerun:
            verb = "ends" if len(self.rerun) == 1 else "end"
            parts.append(f"{self._labels(self.rerun)} {verb} after the cut-off {self.cut_off}")
        if self.new:
            has = "has" if len(self.new) == 1 else "have"
            parts.append(f"{self._labels(self.new)} {has} no history")
        if not self.rerun:
            if self.cut_off.first_run:
                at = time_text(self.cut_off.at)
                parts[-1] += f" (first run: the cut-off is watermark.from, {at})"
            elif len(self.of) > count:
                parts.append(f"the others end at or before the cut-off {self.cut_off}")
        return f"{head}: " + "; ".join(parts)

    def _labels(self, chosen: Sequence[TimeWindow]) -> str:
        return shortened(chosen, self._label)

    def _label(self, window: TimeWindow) -> str:
        label = short_instant(window.start)
        if self.of.is_partial(-1) and window.start == self.of[-1].start:
            label += f" (partial, to {short_instant(window.end)})"
        return label


def short_instant(moment: datetime | None) -> str:
    """A window's label: ``2020-02-21`` at midnight (as Dagster keys a daily partition), else
    :func:`~watermark_assets.core.text.time_text`."""
    if moment is None:
        return "none"
    text = time_text(moment)
    return text[:10] if text.endswith("T00:00:00Z") else text
