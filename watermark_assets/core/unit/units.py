"""Unit ids: which strings may be one, and how a list of them is read (seed 003, "Unit" watermark).

A unit watermark is a list of string values (ids), given explicitly (``units: "id1,id2,id3"``,
:func:`parse_units`) or read from a secondary input (``fields: ["id"]``, screened row by row with
:func:`screen_units`). Each id becomes three things, and an id that would break one of them is
refused, never altered:

- a **Dagster partition key**, alone (static or dynamic partitions) and as one dimension of a
  multi-partition key (time x unit, ``"2020-02-21|id1"``). Dagster 1.13 refuses, in
  ``dagster/_core/definitions/partitions/utils/base.py`` (``INVALID_PARTITION_SUBSTRINGS``, checked
  by ``StaticPartitionsDefinition``), the substring ``...`` (the UI's range syntax
  ``a...b``) and the control characters ``\\a \\b \\f \\n \\r \\t \\v \\0`` (the UI cannot show
  them); and in ``utils/multi.py`` (``INVALID_STATIC_PARTITIONS_KEY_CHARACTERS``, checked by
  ``MultiPartitionsDefinition``) the characters ``| , [ ]`` in a dimension's keys (``|`` is its
  ``MULTIPARTITION_KEY_DELIMITER``). Dynamic partitions are not checked by Dagster at all
  (``add_dynamic_partitions`` stores any text), so the same rules are applied here to every id;
  otherwise a dynamic id could break the multi-partition key of a time x unit asset later.
- a **Delta txn app id** ``watermark_assets/{pipeline}/{id}``: any text works, but ``/`` would make
  ``a/b`` of pipeline ``p`` the same app id as unit ``b`` of pipeline ``p/a``.
- a **path segment**: no ``/`` nor ``\\`` (Windows' separator, and the escape of Spark's path
  globs), no ``..`` and not ``.``, at most :data:`MAX_UNIT_ID_BYTES` bytes, and not ``:`` together
  with a glob character ``* ? { }`` (Spark cannot read such a path literally, see
  ``watermark_assets/spark/paths.py``).

Leading or trailing whitespace and the empty id are refused too: trimming would make the id
differ from the value in the source, so a predicate on the unit column would miss its rows. Every
other control character (Unicode category Cc) is refused like Dagster's eight, and so is text that
is not valid Unicode (bytes that are not UTF-8, read as lone surrogates).

Ids are text; an integer read from a typed input (Parquet, JSON, PostgreSQL) or a UUID becomes its
decimal or canonical text. Other types (floats, booleans, dates, nulls) are refused: a float id
has no exact text form (``1e21``, ``0.1``).

**Rows.** Every refusal names the input row (1-based) the id came from, so a bad id never hides
the good ones: :func:`screen_units` keeps the valid ids (first-seen order, without duplicates) and
reports the refused rows, and the caller decides whether to raise (:func:`parse_units` does: a
configuration must be fixed) or to go on with the valid ones (a secondary input).

Standard library only.
"""

from __future__ import annotations

import unicodedata
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from watermark_assets.core.errors import UnitIdError

#: The longest id in UTF-8 bytes: leaves room in a 255-byte file name (ext4, APFS, NTFS) for a
#: prefix such as ``unit=`` or a suffix.
MAX_UNIT_ID_BYTES = 200

#: Joins the values of several ``fields`` into one id (``("eu", "42")`` -> ``"eu~42"``). A value
#: holding it is refused, so the parts can always be split back. ``~`` is allowed by every rule
#: above and rare in ids.
FIELD_SEPARATOR = "~"

#: What the characters Dagster refuses in a multi-partition dimension would break.
_DAGSTER_CHARACTERS = {
    "|": "the separator of Dagster's multi-partition keys ('2020-02-21|id1')",
    ",": "which Dagster refuses in multi-partition keys, and which separates the ids of 'units'",
    "[": "which Dagster refuses in multi-partition keys (partition selection syntax)",
    "]": "which Dagster refuses in multi-partition keys (partition selection syntax)",
}
_PATH_CHARACTERS = {
    "/": "a path separator (and the separator of Delta txn app ids)",
    "\\": "the path separator on Windows, and the escape character of Spark's path globs",
}
_GLOB_CHARACTERS = "*?{}"


def unit_id_problems(unit_id: str) -> tuple[str, ...]:
    """Every rule ``unit_id`` breaks (module docstring), in words; empty when it is valid."""
    if unit_id == "":
        return ("it is empty",)
    problems: list[str] = []
    if unit_id != unit_id.strip():
        problems.append(
            "it has leading or trailing whitespace (refused, not trimmed: a predicate on the "
            "unit column would miss the rows holding the untrimmed value)"
        )
    for character, why in (*_DAGSTER_CHARACTERS.items(), *_PATH_CHARACTERS.items()):
        if character in unit_id:
            problems.append(f"it contains {character!r}, {why}")
    if ".." in unit_id:
        problems.append(
            "it contains '..', a parent directory in a path ('...' is also Dagster's "
            "partition-range syntax)"
        )
    elif unit_id == ".":
        problems.append("it is '.', the current directory in a path")
    controls = sorted({c for c in unit_id if unicodedata.category(c) == "Cc"})
    if controls:
        shown = " ".join(repr(c) for c in controls)
        problems.append(
            f"it contains the control character(s) {shown} (Dagster refuses \\a \\b \\f \\n \\r "
            "\\t \\v \\0 in partition keys: its UI cannot show them; the others alike)"
        )
    if any(unicodedata.category(c) == "Cs" for c in unit_id):
        problems.append(
            "it is not valid Unicode text (a lone surrogate: bytes that are not UTF-8 in the "
            "input); Dagster stores partition keys as UTF-8"
        )
    if ":" in unit_id and any(c in unit_id for c in _GLOB_CHARACTERS):
        problems.append(
            "it contains ':' together with a glob character (* ? { }): Spark cannot read a path "
            "holding both literally"
        )
    size = len(unit_id.encode("utf-8", "surrogatepass"))
    if size > MAX_UNIT_ID_BYTES:
        problems.append(
            f"it is {size} bytes long in UTF-8, more than {MAX_UNIT_ID_BYTES} (a path segment)"
        )
    return tuple(problems)


def check_unit_id(unit_id: object, *, row: int | None = None, source: str | None = None) -> str:
    """``unit_id`` as an id (an int or UUID as its text), or :class:`UnitIdError` naming the
    value, the row and every rule it breaks."""
    text, problems = _as_unit_id((unit_id,), ("unit",))
    if problems:
        raise UnitIdError(unit_id, "; ".join(problems), row=row, source=source)
    assert text is not None
    return text


@dataclass(frozen=True)
class UnreadableRow:
    """An input row that holds no value to check (a malformed JSON line): refused as it is."""

    text: str
    reason: str


@dataclass(frozen=True)
class RefusedUnit:
    """An input row whose id was refused: its 1-based ``row``, the ``value`` as read (a tuple
    for several fields, the raw text of an unreadable row) and ``reason`` (every rule broken)."""

    row: int
    value: object
    reason: str

    def error(self, source: str | None = None) -> UnitIdError:
        """The refusal as the exception :func:`check_unit_id` would raise."""
        return UnitIdError(self.value, self.reason, row=self.row, source=source)


@dataclass(frozen=True, kw_only=True)
class ScreenedUnits:
    """The ids of an input and the rows it refused; nothing of the input is left out:
    ``rows == len(units) + duplicates + len(refused)``."""

    #: where the rows came from, in words ("units", "CSV file /jobs/surveys.csv")
    source: str
    #: the valid ids, in first-seen order, each once
    units: tuple[str, ...]
    #: the refused rows, in input order
    refused: tuple[RefusedUnit, ...] = ()
    #: how many rows were read
    rows: int = 0
    #: how many rows repeated an id seen before (kept once in ``units``)
    duplicates: int = 0

    def errors(self) -> tuple[UnitIdError, ...]:
        """One :class:`UnitIdError` per refused row, each naming the source and the row."""
        return tuple(r.error(self.source) for r in self.refused)

    def describe(self) -> str:
        """One sentence for logs and sensor ticks."""
        text = f"{len(self.units)} unit id(s) from {self.source} ({self.rows} row(s)"
        if self.duplicates:
            text += f", {self.duplicates} duplicate(s)"
        if self.refused:
            shown = "; ".join(f"row {r.row} {r.value!r}: {r.reason}" for r in self.refused[:5])
            more = f"; and {len(self.refused) - 5} more" if len(self.refused) > 5 else ""
            text += f", {len(self.refused)} refused: {shown}{more}"
        return text + ")"


def screen_units(
    rows: Iterable[tuple[int, Sequence[object] | UnreadableRow]],
    *,
    source: str,
    fields: Sequence[str] = ("unit",),
) -> ScreenedUnits:
    """The valid ids of ``rows`` and the refused ones (never raises for a bad id).

    Each row is ``(row number, values)``: the values of ``fields`` in that row (one value per
    field; several are joined with :data:`FIELD_SEPARATOR`), or an :class:`UnreadableRow`.
    """
    fields = tuple(fields)
    units: dict[str, None] = {}
    refused: list[RefusedUnit] = []
    count = duplicates = 0
    for row, values in rows:
        count += 1
        if isinstance(values, UnreadableRow):
            refused.append(RefusedUnit(row, values.text, values.reason))
            continue
        text, problems = _as_unit_id(values, fields)
        if problems:
            value = values[0] if len(values) == 1 else tuple(values)
            refused.append(RefusedUnit(row, value, "; ".join(problems)))
        elif text in units:
            duplicates += 1
        else:
            assert text is not None
            units[text] = None
    return ScreenedUnits(
        source=source,
        units=tuple(units),
        refused=tuple(refused),
        rows=count,
        duplicates=duplicates,
    )


def parse_units(text: str, *, source: str = "'units'") -> tuple[str, ...]:
    """The ids of an explicit unit watermark: ``"id1,id2,id3"`` -> ``("id1", "id2", "id3")``.

    Ids are separated by commas, and each is checked exactly as a secondary input's value is
    (:func:`screen_units`): a space around a comma belongs to the id next to it, so
    ``"id1, id2"`` is refused (``' id2'``: leading whitespace), never trimmed. Trimming here only
    would let the same text pass as ``units`` and be refused from a file, and would run the
    unit ``id2`` for a source whose column holds ``' id2'``. A repeated id is kept once, in
    first-seen order. A refused id (an empty one from ``"id1,,id2"`` too) raises
    :class:`UnitIdError` naming it and its position (``row``), since a configuration is fixed
    rather than half used.
    """
    if not isinstance(text, str):
        raise UnitIdError(text, "'units' is a comma-separated string of ids", source=source)
    items = ((n, (item,)) for n, item in enumerate(text.split(","), start=1))
    screened = screen_units(items, source=source)
    if screened.refused:
        first = screened.refused[0]
        reason = first.reason
        if any(isinstance(r.value, str) and r.value != r.value.strip() for r in screened.refused):
            fixed = ",".join(v.strip() for v in text.split(",") if v.strip())
            reason += f"; write the ids without spaces around the commas, e.g. {fixed!r}"
        if len(screened.refused) > 1:
            others = ", ".join(f"{r.value!r} (row {r.row})" for r in screened.refused[1:])
            reason += f" (also refused: {others})"
        raise UnitIdError(first.value, reason, row=first.row, source=source)
    return screened.units


def _as_unit_id(
    values: Sequence[object], fields: Sequence[str]
) -> tuple[str | None, tuple[str, ...]]:
    """The id of one row's field values, or the reasons it has none."""
    if len(values) != len(fields):
        return None, (f"the row has {len(values)} value(s) for the fields {list(fields)}",)
    parts: list[str] = []
    problems: list[str] = []
    several = len(fields) > 1
    for field, value in zip(fields, values):
        name = f"field {field!r} " if several else ""
        if value is None:
            problems.append(f"{name}it is null")
        elif isinstance(value, str):
            parts.append(value)
        elif isinstance(value, (int, uuid.UUID)) and not isinstance(value, bool):
            parts.append(str(value))
        else:
            problems.append(
                f"{name}it is a {type(value).__name__}, not a string or an integer (give the "
                "column a text type at the source)"
            )
    if problems:
        return None, tuple(problems)
    if several:
        for field, part in zip(fields, parts):
            if FIELD_SEPARATOR in part:
                problems.append(
                    f"field {field!r} contains {FIELD_SEPARATOR!r}, the separator that joins "
                    "several fields into one id"
                )
            elif part == "":
                problems.append(f"field {field!r} is empty")
        if problems:
            return None, tuple(problems)
    text = FIELD_SEPARATOR.join(parts)
    problems.extend(unit_id_problems(text))
    return (None, tuple(problems)) if problems else (text, ())
