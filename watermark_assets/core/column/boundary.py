"""The rows committed AT the watermark's leading value (its boundary), by whole-row hash.

A run with ``>`` never sees a row inserted later at exactly the committed value (``updated_at``
of 5 new rows equal to the watermark's), and a tuple ``(updated_at, id)`` never sees one at the
watermark's ``updated_at`` with a smaller id, or an update at the same timestamp. So a run reads
the boundary value inclusively (``updated_at >= value``) and drops the rows it already committed
there: each saving commit keeps, with its watermark (the same commit: exactly once), a
:class:`Boundary`, the hashes of every committed row whose leading column holds the value.

Bounded: at most :data:`MAX_BOUNDARY_ROWS` hashes. With more rows at one value the boundary is
*overflowed* (``hashes`` None) and the next run reads as before, strictly above the watermark
(``>``, the tuple's comparison): rows arriving later at that value are not read.

A row identical in every column to one committed at the boundary value is taken for it (a whole
row hash cannot tell two equal rows apart). Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from watermark_assets.core.column import serialization
from watermark_assets.core.column.watermark import ColumnValue, ColumnWatermark
from watermark_assets.core.errors import WatermarkJSONError

#: The most row hashes one boundary keeps (about 20 bytes each in the commit's metadata).
MAX_BOUNDARY_ROWS = 1000


@dataclass(frozen=True)
class Boundary:
    """The committed rows at ``column = value``: their hashes, or None when there were more
    than :data:`MAX_BOUNDARY_ROWS` (overflowed: the next read is strict)."""

    column: str
    value: ColumnValue
    hashes: frozenset[int] | None

    @classmethod
    def of(cls, column: str, value: ColumnValue, hashes: Iterable[int] | None) -> Boundary:
        """A boundary, overflowed when ``hashes`` holds more than :data:`MAX_BOUNDARY_ROWS`."""
        kept = None if hashes is None else frozenset(hashes)
        if kept is not None and len(kept) > MAX_BOUNDARY_ROWS:
            kept = None
        # normalised like a watermark value (aware datetimes in UTC)
        normal = ColumnWatermark((column,), (value,)).values[0]
        assert normal is not None
        return cls(column, normal, kept)

    @property
    def overflowed(self) -> bool:
        return self.hashes is None

    def belongs_to(self, watermark: ColumnWatermark) -> bool:
        """Whether this is the boundary of ``watermark``: its leading column and value."""
        if watermark.is_empty:
            return False
        leading = watermark.values[0]
        return (
            watermark.columns[0] == self.column
            and type(leading) is type(self.value)
            and (leading == self.value)
        )

    def with_rows(self, hashes: Iterable[int] | None) -> Boundary:
        """This boundary with more committed rows at its value (overflowing past the bound)."""
        if self.hashes is None or hashes is None:
            return Boundary(self.column, self.value, None)
        return Boundary.of(self.column, self.value, self.hashes | frozenset(hashes))

    def to_json(self) -> str:
        """``{"column", "value" (sentinels for temporal values), "hashes": [...] | null}``."""
        hashes = None if self.hashes is None else sorted(self.hashes)
        return serialization.dumps({"column": self.column, "value": self.value, "hashes": hashes})

    @classmethod
    def from_json(cls, text: str) -> Boundary:
        raw = serialization.loads(text)
        try:
            hashes = raw["hashes"]
            if hashes is not None and not all(
                isinstance(h, int) and not isinstance(h, bool) for h in hashes
            ):
                raise TypeError(f"hashes {hashes!r} are not integers")
            return cls.of(str(raw["column"]), raw["value"], hashes)
        except (KeyError, TypeError, ValueError) as exc:
            raise WatermarkJSONError(
                text, f"a watermark boundary is {{column, value, hashes}} ({exc})"
            ) from exc

    def __str__(self) -> str:
        rows = "more than the bound" if self.hashes is None else str(len(self.hashes))
        return f"{self.column}={self.value!r}: {rows} row(s) committed"
