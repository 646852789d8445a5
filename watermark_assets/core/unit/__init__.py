"""Kind ``"unit"``: unit watermarks, one inner watermark per id (seed 003).

Standard library only. Modules: ``units`` (which strings may be ids; ``parse_units`` for the
explicit ``"id1,id2,id3"``; ``screen_units`` for the rows of a secondary input), ``watermark``
(:class:`UnitWatermark`, kind ``"unit"``), ``done`` (:class:`DoneAt`, kind ``"done_at"``, the inner
watermark of a unit-only pipeline), ``grid`` (time x unit: :func:`due_cells`, the cells due on a
tick, each unit with its own time watermark). Reading ids from files and tables is an adapter:
``watermark_assets.sources.secondary_input``.
"""

from watermark_assets.core.unit.done import DoneAt
from watermark_assets.core.unit.grid import Cell, CellRange, DueCells, due_cells, empty_grid
from watermark_assets.core.unit.units import (
    FIELD_SEPARATOR,
    MAX_UNIT_ID_BYTES,
    RefusedUnit,
    ScreenedUnits,
    UnreadableRow,
    check_unit_id,
    parse_units,
    screen_units,
    unit_id_problems,
)
from watermark_assets.core.unit.watermark import UnitEntries, UnitListing, UnitWatermark, some_ids

__all__ = [
    "FIELD_SEPARATOR",
    "MAX_UNIT_ID_BYTES",
    "Cell",
    "CellRange",
    "DoneAt",
    "DueCells",
    "RefusedUnit",
    "ScreenedUnits",
    "UnitEntries",
    "UnitListing",
    "UnitWatermark",
    "UnreadableRow",
    "check_unit_id",
    "due_cells",
    "empty_grid",
    "parse_units",
    "screen_units",
    "some_ids",
    "unit_id_problems",
]
