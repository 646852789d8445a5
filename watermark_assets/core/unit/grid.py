"""Time x unit (seed 003): each (window, unit) cell has its own high watermark.

The watermark of a time x unit pipeline is a :class:`~.watermark.UnitWatermark` of inner kind
``"time"``: unit id -> :class:`~watermark_assets.core.time.TimeWatermark` (window start -> high
watermark). A cell ``(window, unit)`` has history when the unit's time watermark has the window.

**A tick** (:func:`due_cells`): the windows of the spec are cut once, then each unit decides on
its own with the time kind's rule (:meth:`TimeWatermark.cut_off`, :meth:`TimeWatermark.due`):
its cut-off is ITS highest high watermark + abstinent - grace, so a unit that is behind (or new)
never moves another unit's cut-off, and a grace re-run of one unit never re-runs another. A unit
with no history (new id, or every first run failed) has every window due: ``from`` bounds that,
and the edge asks for them as one ranged run (:meth:`DueCells.ranges`).

Cells are ordered unit by unit (in the order the units are given), windows in start order.

Standard library only.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from watermark_assets.core.errors import UnitInnerKindError
from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.text import shortened
from watermark_assets.core.time import TimeSpec, TimeWatermark, to_millis, windows
from watermark_assets.core.time.tick import DueWindows, Opening
from watermark_assets.core.unit.watermark import UnitWatermark

#: The inner kind of a time x unit watermark.
INNER_KIND = TimeWatermark.kind


def empty_grid() -> UnitWatermark[TimeWatermark]:
    """The watermark of a time x unit pipeline that has no run yet."""
    return UnitWatermark(INNER_KIND)


@dataclass(frozen=True)
class Cell:
    """One (window, unit) cell: a Dagster multi-partition key, one commit."""

    window: TimeWindow
    unit: str


@dataclass(frozen=True)
class CellRange:
    """Windows ``first``..``last`` (consecutive windows of the tick) of one unit: one ranged run."""

    unit: str
    first: TimeWindow
    last: TimeWindow
    cells: int


@dataclass(frozen=True)
class DueCells:
    """One tick's decision for every unit: the unit's :class:`DueWindows`, in the units' order."""

    by_unit: Mapping[str, DueWindows]

    @property
    def cells(self) -> tuple[Cell, ...]:
        """Every cell that runs: unit by unit, windows in start order."""
        return tuple(Cell(w, unit) for unit, due in self.by_unit.items() for w in due.windows)

    def __len__(self) -> int:
        return sum(len(due) for due in self.by_unit.values())

    def ranges(self, *, exclude: Collection[Cell] = ()) -> tuple[CellRange, ...]:
        """The due cells (but ``exclude``, e.g. cells with a run in flight) as runs of
        consecutive windows per unit: a new unit is one range, a grace re-run another."""
        found: list[CellRange] = []
        for unit, due in self.by_unit.items():
            starts = due.of.starts_ms()
            index = {start: i for i, start in enumerate(starts)}
            chosen = [w for w in due.windows if Cell(w, unit) not in exclude]
            run: list[TimeWindow] = []
            for window in chosen:
                if run and index[_ms(window)] != index[_ms(run[-1])] + 1:
                    found.append(CellRange(unit, run[0], run[-1], len(run)))
                    run = []
                run.append(window)
            if run:
                found.append(CellRange(unit, run[0], run[-1], len(run)))
        return tuple(found)

    def explain(self, *, groups: int = 5) -> str:
        """The tick's reason in words: units with the same reason are said once, e.g.
        ``3 cells of 2 units (of 2): a, b: 1 partition: 2024-01-03 has no history ...``."""
        count = len(self)
        due_units = [unit for unit, due in self.by_unit.items() if due]
        head = (
            f"{count} cell{'' if count == 1 else 's'} of {len(due_units)} "
            f"unit{'' if len(due_units) == 1 else 's'} (of {len(self.by_unit)})"
        )
        if not self.by_unit:
            return f"{head}: no unit id known yet"
        said: dict[str, list[str]] = {}
        for unit, due in self.by_unit.items():
            said.setdefault(due.explain(), []).append(unit)
        parts = [
            f"{shortened(units)}: {reason}"
            for reason, units in sorted(said.items(), key=lambda item: -len(item[1]))
        ]
        more = f"; and {len(parts) - groups} more reasons" if len(parts) > groups else ""
        return f"{head}: " + "; ".join(parts[:groups]) + more


def _ms(window: TimeWindow) -> int:
    return to_millis(window.start)


def unit_time_watermark(watermark: UnitWatermark[Any], unit: str) -> TimeWatermark:
    """The time watermark of ``unit`` (empty: no history); a watermark of another inner kind
    raises :class:`UnitInnerKindError`."""
    if watermark.inner_kind != INNER_KIND:
        raise UnitInnerKindError(INNER_KIND, watermark.inner_kind, unit=unit)
    inner = watermark.units.get(unit)
    return TimeWatermark.empty() if inner is None else inner


def due_cells(
    watermark: UnitWatermark[Any], units: Iterable[str], spec: TimeSpec, now: datetime
) -> DueCells:
    """The cells due at ``now`` (module docstring): ``windows(spec, now)`` cut once, then per
    unit its own cut-off and due windows."""
    tiles = windows(spec, now)
    opening = Opening.of(spec, tiles, now)
    by_unit: dict[str, DueWindows] = {}
    for unit in dict.fromkeys(units):
        inner = unit_time_watermark(watermark, unit)
        by_unit[unit] = inner.due(tiles, inner.cut_off(spec, now), opening=opening)
    return DueCells(by_unit)
