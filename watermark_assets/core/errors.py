"""Errors of the pure core (and of the watermark providers): standard library only.

``watermark_assets/exceptions.py`` also holds Java, Spark and Delta failures, so the core must not
import it (docs/design.md, "Next: one spine"). This module is the core's error home.

:class:`WatermarkAssetsError` here is the package's ONE base class; ``exceptions`` re-exports it,
so every error of the package derives from it.

Each exception carries the offending values as attributes; its message names the value, what was
expected, and the fix.
"""

from __future__ import annotations

from collections.abc import Sequence


class WatermarkAssetsError(Exception):
    """Base class of all errors raised by watermark_assets (see the module docstring)."""


class UnknownWatermarkKindError(WatermarkAssetsError, LookupError):
    """A watermark kind name that no class registered."""

    def __init__(self, kind: str, known: Sequence[str]) -> None:
        super().__init__(
            f"watermark kind {kind!r} is not registered; known kinds: {sorted(known)}. Import the "
            "module that defines it (its class is registered with @register), or fix the name"
        )
        self.kind = kind
        self.known = tuple(sorted(known))


class WatermarkKindConflictError(WatermarkAssetsError, ValueError):
    """Two different classes claim one watermark kind name."""

    def __init__(self, kind: str, existing: str, new: str) -> None:
        super().__init__(
            f"watermark kind {kind!r} is already registered by {existing}; {new} cannot take it. "
            "Give each watermark class its own kind name"
        )
        self.kind = kind
        self.existing = existing
        self.new = new


class WatermarkJSONError(WatermarkAssetsError, ValueError):
    """Watermark JSON text that cannot be read, or a value that cannot be written losslessly."""

    def __init__(self, value: object, reason: str) -> None:
        super().__init__(f"watermark JSON {value!r}: {reason}")
        self.value = value
        self.reason = reason


class ColumnMismatchError(WatermarkAssetsError, ValueError):
    """Two column watermarks (or a watermark and observed values) over different columns."""

    def __init__(self, expected: Sequence[str], got: Sequence[str]) -> None:
        super().__init__(
            f"watermark columns {list(got)} do not match {list(expected)} (same names, same "
            "order). The columns of a watermark are fixed; if the configuration changed them, "
            "reset the stored watermark of this dataflow (or use a new dataflow id)"
        )
        self.expected = tuple(expected)
        self.got = tuple(got)


class ColumnValueTypeError(WatermarkAssetsError, TypeError):
    """A column watermark value of a type that cannot be ordered, or mixed with another type."""

    def __init__(self, column: str, value: object, expected: str) -> None:
        super().__init__(
            f"watermark column {column!r} has value {value!r} ({type(value).__name__}); expected "
            f"{expected}"
        )
        self.column = column
        self.value = value
        self.expected = expected


class PartialWatermarkError(WatermarkAssetsError, ValueError):
    """A column watermark where some values are None and others are not."""

    def __init__(self, values: dict[str, object]) -> None:
        missing = [c for c, v in values.items() if v is None]
        super().__init__(
            f"watermark {values!r} has no value for {missing}; a column watermark is either "
            "empty (every value null: read everything) or complete. Store every column's value "
            "of the greatest row read, or reset the watermark"
        )
        self.values = values
        self.missing = tuple(missing)


class LookbackError(WatermarkAssetsError, ValueError):
    """A backward look-back that cannot be applied (bad offsets, or a non-temporal column)."""

    def __init__(self, message: str, *, value: object) -> None:
        super().__init__(message)
        self.value = value


class WatermarkHistoryLostError(WatermarkAssetsError):
    """The Delta commit that carried a dataflow's watermark was cleaned up from the log."""

    def __init__(self, table_uri: str, dataflow_id: str, oldest_version: int) -> None:
        super().__init__(
            f"no commit of dataflow {dataflow_id!r} is left in the log of {table_uri!r} (commits "
            f"before version {oldest_version} were cleaned up after a checkpoint), so its "
            "watermark is unknown. It was not reset to 'read everything', which would duplicate "
            "rows: raise delta.logRetentionDuration, or restore the watermark with a file or "
            "postgres provider"
        )
        self.table_uri = table_uri
        self.dataflow_id = dataflow_id
        self.oldest_version = oldest_version


class WatermarkProviderError(WatermarkAssetsError):
    """A watermark provider cannot read or store a watermark (unreachable, or misused)."""

    def __init__(self, message: str, *, provider: str, dataflow_id: str | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.dataflow_id = dataflow_id


# --- errors of the file-path kind, the checkpoint and windows (re-exported by exceptions) ---


class NaiveDatetimeError(WatermarkAssetsError, ValueError):
    """A datetime without a time zone reached code that only accepts UTC-aware datetimes."""

    def __init__(self, value: object) -> None:
        super().__init__(
            f"datetime {value!r} has no time zone; pass an aware datetime, "
            "for example datetime(..., tzinfo=timezone.utc)"
        )
        self.value = value


class UnsortableFileNameError(WatermarkAssetsError):
    """A file name does not sort chronologically, so a path watermark would mis-order it."""

    def __init__(self, path: str, ordering: str) -> None:
        super().__init__(
            f"file {path!r} does not start with a sortable identifier ({ordering}); "
            "a path watermark "
            "would silently mis-order it. Name files with a Unix-timestamp prefix "
            "(1706450400-uuid.ndjson.gz), a UUIDv7 or an ISO 8601 timestamp, or set "
            "'file_name_ordering: lexicographic' if the names already sort chronologically"
        )
        self.path = path
        self.ordering = ordering


class WatermarkRegressionError(WatermarkAssetsError):
    """Something tried to move a watermark backwards."""

    def __init__(self, partition: str, current: str, proposed: str) -> None:
        super().__init__(
            f"watermark of partition {partition!r} would move backwards from {current!r} to "
            f"{proposed!r}; a watermark only moves forward. Files at or below the watermark are "
            "already committed: drop them from the batch"
        )
        self.partition = partition
        self.current = current
        self.proposed = proposed


class PartitionTemplateError(WatermarkAssetsError):
    """A strftime partition template is unusable, or a path does not match it."""

    def __init__(self, message: str, *, template: str, value: str | None = None) -> None:
        super().__init__(message)
        self.template = template
        self.value = value


class CheckpointError(WatermarkAssetsError):
    """A checkpoint file cannot be used; never silently reset."""

    def __init__(self, message: str, *, location: str) -> None:
        super().__init__(message)
        self.location = location


class CorruptCheckpointError(CheckpointError):
    """The checkpoint file is not valid checkpoint JSON."""

    def __init__(self, location: str, reason: str) -> None:
        super().__init__(
            f"checkpoint {location!r} is corrupt ({reason}). It was not reset: inspect it, then "
            "delete it to rebuild the state from the Delta log",
            location=location,
        )
        self.reason = reason


class UnknownCheckpointSchemaError(CheckpointError):
    """The checkpoint was written by an unknown schema version."""

    def __init__(self, location: str, schema_version: object) -> None:
        super().__init__(
            f"checkpoint {location!r} has schema_version {schema_version!r}; this version of "
            "watermark_assets reads schema_version 1. Upgrade watermark_assets, or delete the file "
            "to rebuild the state from the Delta log",
            location=location,
        )
        self.schema_version = schema_version


class ReplaceWindowError(WatermarkAssetsError, ValueError):
    """A range-replace window is invalid, or does not fit the table; nothing was committed."""

    def __init__(self, window: str, problem: str, fix: str) -> None:
        super().__init__(
            f"replace window {window} is refused: {problem}. Nothing was committed; {fix}"
        )
        self.window = window
        self.problem = problem


# --- errors of the unit kind (core/unit) ---


class UnitIdError(WatermarkAssetsError, ValueError):
    """A unit id that would break a Dagster partition key, a Delta txn app id or a path segment.

    ``unit_id`` is the offending value as read (not always a string: a null, a float); ``row`` the
    input row it came from (1-based; None when it has no row, e.g. a stored watermark's key);
    ``source`` the input it came from; ``reason`` every rule it breaks.
    """

    def __init__(
        self, unit_id: object, reason: str, *, row: int | None = None, source: str | None = None
    ) -> None:
        if row is not None:
            where = f" (row {row} of {source})" if source else f" (row {row})"
        else:
            where = f" (from {source})" if source else ""
        super().__init__(
            f"unit id {unit_id!r}{where} is refused: {reason}. A unit "
            "id becomes a Dagster partition key, a Delta txn app id and a path segment. Fix the "
            f"id in {source or 'its input'}, or leave that row out"
        )
        self.unit_id = unit_id
        self.reason = reason
        self.row = row
        self.source = source


class UnitInnerKindError(WatermarkAssetsError, ValueError):
    """A unit watermark holding, or merged with, watermarks of another inner kind."""

    def __init__(self, expected: str, got: str, *, unit: str | None = None) -> None:
        what = f"the watermark of unit {unit!r}" if unit is not None else "the other watermark"
        super().__init__(
            f"{what} is of kind {got!r}; this unit watermark holds {expected!r} watermarks. The "
            "inner kind of a unit watermark is fixed (time x unit holds 'time', a unit-only "
            "pipeline 'done_at'); if the configuration changed it, reset the stored watermark"
        )
        self.expected = expected
        self.got = got
        self.unit = unit


# --- errors of the time kind (core/time/) ---

TIME_BOUND_FORMS = (
    "an ISO date: 2020-01-01",
    "an ISO datetime: 2020-02-21 10:00:00 or 2020-02-21T10:00:00, optionally with a fraction of "
    "1 to 6 digits (.123456) and a zone (Z, UTC, GMT, +02:00, +0200); without a zone it is UTC",
    "an ISO-8601 duration back from now: P<n>D (P0D, P1D) or P<n>DT<m>H with m 0..23 (P0DT7H)",
    "'-' for now (P0DT0H0M)",
)
"""The forms a time watermark's ``from`` and ``to`` accept (quoted by :class:`TimeBoundError`)."""


class TimeBoundError(WatermarkAssetsError, ValueError):
    """A time watermark's ``from`` or ``to`` in none of the accepted forms (or out of range)."""

    def __init__(self, value: object, reason: str, *, bound: str = "from/to") -> None:
        forms = "; ".join(TIME_BOUND_FORMS)
        super().__init__(
            f"time watermark {bound!r} value {value!r} is refused: {reason}. Accepted forms: "
            f"{forms}"
        )
        self.value = value
        self.reason = reason
        self.bound = bound
        self.accepted = TIME_BOUND_FORMS


class TimeSpecError(WatermarkAssetsError, ValueError):
    """A time watermark setting (partitioning, grace or abstinent days) that cannot be used."""

    def __init__(self, setting: str, value: object, expected: str) -> None:
        super().__init__(f"time watermark {setting} {value!r} is refused; expected {expected}")
        self.setting = setting
        self.value = value
        self.expected = expected


class TimeRangeError(WatermarkAssetsError, ValueError):
    """A time watermark whose ``[from, to)`` holds no window at any time: ``to`` at or before
    ``from`` (both fixed, or both counted back from now by the same amount or ``to`` by more), or
    two fixed bounds too close for one complete window when partial windows are off. Every tick
    would report 0 partitions, so the configuration is refused instead."""

    def __init__(
        self, from_: str, to: str, reason: str, *, keys: tuple[str, str] = ("from", "to")
    ) -> None:
        super().__init__(
            f"time watermark {keys[0]} {from_!r} and {keys[1]} {to!r} are refused: {reason}, so "
            "no window "
            "would ever be due. Give a to after from (e.g. to: P0D, up to now), or an earlier "
            "from"
        )
        self.keys = keys
        self.from_ = from_
        self.to = to
        self.reason = reason


class FileTemplateError(WatermarkAssetsError, ValueError):
    """A dated file-name template (``file{date:%Y%m%d}.csv``) that cannot name one file per
    period, or whose files do not fit the time watermark's windows."""

    def __init__(self, template: str, problem: str, fix: str) -> None:
        super().__init__(f"file name template {template!r} is refused: {problem}; {fix}")
        self.template = template
        self.problem = problem
        self.fix = fix
