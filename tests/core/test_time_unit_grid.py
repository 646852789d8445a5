"""Time x unit in the core (``core/unit/grid.py``): each (window, unit) cell its own high watermark.

The watermark is a UnitWatermark of inner kind ``time``; a tick decides unit by unit with the time
kind's own rule, so units never influence each other. Laws, property-tested: the merge is per cell
(commutative, associative, idempotent; a cell's high watermark is the max of both); advancing one
unit never changes another unit's decision; each unit's cut-off never moves backwards across
successful runs; the cells due are the cells of the windows that are due per unit.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watermark_assets.core.errors import UnitInnerKindError
from watermark_assets.core.time import TimeSpec, TimeWatermark, windows
from watermark_assets.core.unit import Cell, CellRange, DoneAt, UnitWatermark, due_cells, empty_grid

UTC = timezone.utc
SPEC = TimeSpec("2024-01-01", "-", "daily", grace_days=1)
NOW = datetime(2024, 1, 11, 6, tzinfo=UTC)  # ten whole days and the partial 2024-01-11
TILES = windows(SPEC, NOW)
UNITS = ["a", "b", "c"]


def day(n: int) -> datetime:
    return datetime(2024, 1, n, tzinfo=UTC)


def grid(**days: list[int]) -> UnitWatermark[TimeWatermark]:
    """Units whose windows starting on these January days succeeded."""
    return empty_grid().advance(
        {u: TimeWatermark.empty().advance([TILES[d - 1] for d in ds]) for u, ds in days.items()}
    )


CASES = {
    "first tick: every cell of every unit": (
        grid(),
        {"a": list(range(1, 12)), "b": list(range(1, 12))},
    ),
    "a up to date with grace 1, b new: b runs everything, a its grace window and the partial": (
        grid(a=list(range(1, 11))),
        {"a": [10, 11], "b": list(range(1, 12))},
    ),
    "a failed on day 3: only a re-runs it": (
        grid(a=[1, 2, *range(4, 12)], b=list(range(1, 12))),
        {"a": [3, 10, 11], "b": [10, 11]},
    ),
}


@pytest.mark.parametrize(("watermark", "expected"), CASES.values(), ids=CASES)
def test_each_unit_decides_on_its_own_watermark(
    watermark: UnitWatermark[TimeWatermark], expected: dict[str, list[int]]
) -> None:
    due = due_cells(watermark, ["a", "b"], SPEC, NOW)
    got = {u: [w.start.day for w in d.windows] for u, d in due.by_unit.items()}
    assert got == expected
    assert [c.unit for c in due.cells] == [u for u, ds in expected.items() for _ in ds]


def test_ranges_are_runs_of_consecutive_windows_per_unit() -> None:
    due = due_cells(grid(a=[1, 2, *range(4, 12)]), ["a", "b"], SPEC, NOW)
    ranges = due.ranges()
    assert [(r.unit, r.first.start.day, r.last.start.day, r.cells) for r in ranges] == [
        ("a", 3, 3, 1),
        ("a", 10, 11, 2),
        ("b", 1, 11, 11),
    ]
    busy = {Cell(TILES[4], "b")}
    assert [(r.unit, r.first.start.day, r.cells) for r in due.ranges(exclude=busy)][2:] == [
        ("b", 1, 4),
        ("b", 6, 6),
    ]
    assert isinstance(ranges[0], CellRange)


def test_the_tick_text_says_each_reason_once_most_shared_first() -> None:
    due = due_cells(grid(a=list(range(1, 12)), c=list(range(1, 12))), UNITS, SPEC, NOW)
    assert due.explain() == (
        "15 cells of 3 units (of 3): a, c: 2 partitions: 2024-01-10, 2024-01-11 (partial, to "
        "2024-01-11T06:00:00Z) end after the cut-off 2024-01-10T06:00:00Z (highest watermark "
        "2024-01-11T06:00:00Z + abstinent 0d - grace 1d); b: 11 partitions: 2024-01-01, "
        "2024-01-02, 2024-01-03, ... (5 more), 2024-01-09, 2024-01-10, 2024-01-11 (partial, to "
        "2024-01-11T06:00:00Z) have no history (first run: the cut-off is watermark.from, "
        "2024-01-01T00:00:00Z)"
    )
    assert due_cells(empty_grid(), [], SPEC, NOW).explain() == (
        "0 cells of 0 units (of 0): no unit id known yet"
    )


def test_a_grid_of_another_inner_kind_is_refused() -> None:
    with pytest.raises(UnitInnerKindError, match="'done_at'"):
        due_cells(UnitWatermark("done_at", {"a": DoneAt(1)}), ["a"], SPEC, NOW)


# --- properties ---

days = st.lists(st.integers(1, 11), max_size=11)
grids = st.builds(lambda a, b, c: grid(a=a, b=b, c=c), days, days, days)


@given(grids, grids, grids)
def test_merge_is_per_cell_and_lawful(
    x: UnitWatermark[Any], y: UnitWatermark[Any], z: UnitWatermark[Any]
) -> None:
    assert x.merge(y) == y.merge(x)
    assert x.merge(y).merge(z) == x.merge(y.merge(z))
    assert x.merge(x) == x
    merged = x.merge(y)
    for unit in UNITS:
        for tile in TILES:
            highs = [w.units[unit].high_watermark(tile) for w in (x, y) if w.units.get(unit)]
            known = [h for h in highs if h is not None]
            assert merged.units[unit].high_watermark(tile) == (max(known) if known else None)  # type: ignore[union-attr]


@given(grids, st.sampled_from(UNITS), days)
def test_advancing_one_unit_never_changes_another_units_decision(
    watermark: UnitWatermark[Any], unit: str, ran: list[int]
) -> None:
    before = due_cells(watermark, UNITS, SPEC, NOW)
    inner = watermark.units.get(unit) or TimeWatermark.empty()
    advanced = watermark.advance({unit: inner.advance([TILES[d - 1] for d in ran])})
    after = due_cells(advanced, UNITS, SPEC, NOW)
    for other in UNITS:
        if other != unit:
            assert after.by_unit[other] == before.by_unit[other]


@given(grids, st.lists(days, max_size=4), st.integers(0, 5))
def test_each_units_cut_off_never_moves_backwards_across_runs(
    watermark: UnitWatermark[Any], runs: list[list[int]], later: int
) -> None:
    now = NOW
    cut = {u: due_cells(watermark, UNITS, SPEC, now).by_unit[u].cut_off.at for u in UNITS}
    for ran in runs:
        now += timedelta(hours=later)
        due = due_cells(watermark, UNITS, SPEC, now)
        # every unit runs the due cells among ``ran`` (a partial success)
        watermark = watermark.advance(
            {
                u: (watermark.units.get(u) or TimeWatermark.empty()).advance(
                    [w for w in d.windows if w.start.day in ran]
                )
                for u, d in due.by_unit.items()
            }
        )
        for unit in UNITS:
            at = due_cells(watermark, UNITS, SPEC, now).by_unit[unit].cut_off.at
            assert at >= cut[unit]
            cut[unit] = at
