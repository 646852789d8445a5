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
