"""Merge on keys, the pure part: which key columns, and whether a file's bounds can hold a key.

A merge on ``merge_keys`` upserts a run's rows: every row of the table whose key equals the key of
a row read is replaced by that row (the Delta side is :mod:`watermark_assets.delta.merge`).
Standard library only.

- :func:`merge_key_names`: the configured key columns, checked (at least one, names not blank,
  no name twice).
- :class:`KeyValues`: the run's distinct values of one key column, sorted; ``any_within(low,
  high)`` says whether one of them lies in a file's ``[low, high]`` (``None``: unbounded on that
  side). A file whose bounds hold none of the run's values of ONE key column cannot hold any of
  the run's keys, whatever the other columns hold: that is the only proof used to skip a file.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["KeyValues", "merge_key_names"]


def merge_key_names(keys: Iterable[str]) -> tuple[str, ...]:
    """The key columns in their order; ValueError naming the problem and the fix."""
    names = tuple(keys)
    if not names:
        raise ValueError("merge_keys is empty: name the column(s) that identify a row, e.g. [id]")
    blank = [n for n in names if not n or not n.strip()]
    if blank:
        raise ValueError(f"merge_keys {list(names)!r} holds a blank name: name real columns")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(
            f"merge_keys {list(names)!r} names {repeated} more than once: name each key column once"
        )
    return names


@dataclass(frozen=True)
class KeyValues:
    """The distinct values one key column takes in a run's rows, sorted (all of one kind)."""

    column: str
    sorted_values: tuple[Any, ...]

    @classmethod
    def of(cls, column: str, values: Iterable[Any]) -> KeyValues:
        """From the run's values (nulls left out: a null key never matches)."""
        return cls(column, tuple(sorted({v for v in values if v is not None})))

    def any_within(self, low: Any, high: Any) -> bool:
        """Whether some value ``v`` has ``low <= v <= high``; a None bound is no bound."""
        values = self.sorted_values
        start = 0 if low is None else bisect_left(values, low)
        if start >= len(values):
            return False
        return high is None or values[start] <= high

    def __len__(self) -> int:
        return len(self.sorted_values)
