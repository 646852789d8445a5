"""How a batch's files differ from the declared schema, told from their layouts alone (pure: no
Spark, no I/O).

A file's *layout* is what it says about its columns before a row is read
(:func:`~watermark_assets.sources.file_columns.file_layouts`): the names in file order, each with
its Spark type where the file states one (a Parquet footer) or None (a CSV header, JSON keys).
Types are Spark's canonical spelling (``int``, ``bigint``, ``decimal(10,2)``...), names are
matched case-insensitively, as Spark matches columns.

A :class:`ColumnChange` is either a column the schema lacks (``declared`` None) or a column whose
type the declared one cannot hold: a stated type it cannot hold without loss (:func:`holds`), or,
for a CSV or JSON column, values of another type (a :class:`ValueSample` of the file's first
records, :func:`~watermark_assets.sources.value_types.type_change`: at least a few values and
none that Spark parses into the declared type). A CSV or JSON file whose column has SOME values
that do not fit is malformed input, not a change: Spark finds those records while it reads
(``spark/layouts.py``) and they are quarantined, as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from watermark_assets.sources.value_types import type_change

#: A file's columns in file order: (name, Spark type, or None when the file does not state one).
Layout = tuple[tuple[str, str | None], ...]

_INTEGERS = ("tinyint", "smallint", "int", "bigint")
_TIMESTAMPS = ("timestamp", "timestamp_ntz")
_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")


@dataclass(frozen=True)
class ColumnChange:
    """One way a file differs from the schema: a column it brings (``declared`` None), or a
    column whose type ``found`` the ``declared`` one cannot hold."""

    file: str
    column: str
    declared: str | None
    found: str | None
    #: what ``file`` names: a landing ``file``, or a column ``source`` (its location)
    kind: str = "file"
    #: the values ``found`` was told from (a CSV/JSON file's sampled values); 0: a stated type
    sampled: int = 0

    @property
    def is_new(self) -> bool:
        return self.declared is None

    def __str__(self) -> str:
        if self.is_new:
            typed = f" ({self.found})" if self.found else ""
            return f"{self.kind} {self.file!r} has a column {self.column!r}{typed} the schema lacks"
        if self.sampled:
            return (
                f"{self.kind} {self.file!r} column {self.column!r} holds {self.found} values (all "
                f"{self.sampled} in its first records), the schema says {self.declared}"
            )
        return (
            f"{self.kind} {self.file!r} column {self.column!r} is {self.found}, the schema says "
            f"{self.declared}"
        )


def holds(declared: str, found: str) -> bool:
    """Whether every value of type ``found`` is a value of type ``declared`` (a lossless widening:
    tinyint < smallint < int < bigint, an integer below bigint or a float into double, a date
    into a timestamp, a decimal into a wider one). TIMESTAMP and TIMESTAMP_NTZ hold each other
    (Spark reads either into either)."""
    if declared == found:
        return True
    if declared in _INTEGERS and found in _INTEGERS:
        return _INTEGERS.index(found) <= _INTEGERS.index(declared)
    if declared == "double":
        return found in ("float", *_INTEGERS[:3])
    if declared in _TIMESTAMPS:
        return found in (*_TIMESTAMPS, "date")
    wide, narrow = _DECIMAL.match(declared), _DECIMAL.match(found)
    if wide and narrow:
        (p2, s2), (p1, s1) = (int(x) for x in wide.groups()), (int(x) for x in narrow.groups())
        return s2 >= s1 and p2 - s2 >= p1 - s1
    return False


@dataclass(frozen=True)
class ValueSample:
    """A CSV or JSON file's values per column, from its first records
    (:func:`~watermark_assets.sources.file_columns.sampled_layouts`): only records that are well
    formed apart from their values' types (a JSON object; a CSV row with the header's number of
    fields), empty and null values left out."""

    #: column (as the file spells it) -> its sampled values: CSV text, or JSON values
    values: Mapping[str, tuple[object, ...]]
    #: CSV (values are text) or JSON
    text: bool
    #: more CSV texts the reader takes as a float or double (its nanValue/positiveInf/negativeInf)
    float_words: frozenset[str] = field(default_factory=frozenset)

    def type_change(self, column: str, declared: str) -> str | None:
        """The type ``column``'s values are when it is not ``declared`` (None: they fit, some of
        them do, or too few to tell: :func:`~watermark_assets.sources.value_types.type_change`)."""
        return type_change(
            declared, self.values.get(column, ()), text=self.text, float_words=self.float_words
        )


def changes(
    declared: Sequence[tuple[str, str]],
    layouts: Mapping[str, Layout | None],
    *,
    what: str = "file",
    samples: Mapping[str, ValueSample | None] | None = None,
) -> list[ColumnChange]:
    """Every way the files of ``layouts`` (file -> its layout; None: it says nothing) differ from
    the ``declared`` columns (name, type), file by file in the given order (``what``: what a
    layout's key names, :attr:`ColumnChange.kind`). A column whose layout states no type is
    judged by its file's ``samples`` (file -> its sampled values; none: not judged)."""
    types = {name.lower(): kind for name, kind in declared}
    found: list[ColumnChange] = []
    for file, layout in layouts.items():
        sample = (samples or {}).get(file)
        for name, kind in layout or ():
            want = types.get(name.lower())
            if want is None:
                found.append(ColumnChange(file, name, None, kind, what))
            elif kind is not None and not holds(want, kind):
                found.append(ColumnChange(file, name, want, kind, what))
            elif kind is None and sample is not None:
                observed = sample.type_change(name, want)
                if observed is not None:
                    count = len(sample.values.get(name, ()))
                    found.append(ColumnChange(file, name, want, observed, what, count))
    return found


def new_columns(found: Sequence[ColumnChange], hint: Callable[[str], str | None]) -> dict[str, str]:
    """The columns the files bring (``add_columns``), each once (first seen first, the first
    spelling) with its type: the ``hint`` for it, else the type its first file states, else
    STRING."""
    added: dict[str, tuple[str, str]] = {}
    for change in found:
        if change.is_new and change.column.lower() not in added:
            kind = hint(change.column) or change.found or "string"
            added[change.column.lower()] = (change.column, kind)
    return dict(added.values())


def new_column_names(found: Sequence[ColumnChange]) -> tuple[str, ...]:
    """The columns ``found`` names as new (the schema lacks them), each once (case-insensitive,
    first seen first, its first spelling)."""
    names: dict[str, str] = {}
    for change in found:
        if change.is_new:
            names.setdefault(change.column.lower(), change.column)
    return tuple(names.values())


def type_changes(found: Sequence[ColumnChange]) -> list[ColumnChange]:
    """The changes that are a column's type, not a new column."""
    return [c for c in found if not c.is_new]


def merged_layout(layouts: Sequence[Layout | None]) -> list[tuple[str, str]]:
    """Every column of ``layouts`` (a folder's files, oldest first; None: a file that says
    nothing), each once (first seen first, its first spelling), in a type that holds every
    file's (:func:`holds`: int and bigint -> bigint, int and double -> double), STRING when none
    does (int and string) or no file states one (a CSV header): the columns a folder is read in
    before ``schema.mode`` compares them with the declared ones."""
    merged: dict[str, tuple[str, str | None]] = {}
    for layout in layouts:
        for name, kind in layout or ():
            seen = merged.get(name.lower())
            if seen is None:
                merged[name.lower()] = (name, kind)
            elif seen[1] is not None and kind is not None and not holds(seen[1], kind):
                wider = kind if holds(kind, seen[1]) else "string"
                merged[name.lower()] = (seen[0], wider)
            elif kind is None:
                merged[name.lower()] = (seen[0], None)
    return [(name, kind or "string") for name, kind in merged.values()]
