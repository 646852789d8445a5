"""The watermark contract every kind implements, and the registry of kinds by name.

A watermark is how far a pipeline has read. Every kind (file path, column, later time/unit and
event time) is a frozen value with the same small surface, so the checkpoint, the Delta commit
metadata, the checks and the metadata builder can hold *a* watermark without knowing its kind:

- ``kind``: the kind's name, also the registry key and the ``"kind"`` of a stored watermark;
- ``is_empty``: nothing read yet (a source then reads everything);
- ``advance(observed)``: the watermark after ``observed`` was read and committed. Monotone: the
  result is never lower than ``self``. This is the one place a kind moves forward;
- ``merge(other)``: the least watermark at or above both. Commutative, associative and
  idempotent, so concurrent runs of different partitions never lose each other's progress;
- ``to_json()`` / ``from_json(text)``: ``type(w).from_json(w.to_json()) == w``.

Standard library only. Stored watermarks are read back with
``watermark_kind(stored["kind"]).from_json(stored["value"])``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, runtime_checkable

from watermark_assets.core.errors import UnknownWatermarkKindError, WatermarkKindConflictError

if TYPE_CHECKING:
    from typing import Self

ObservedT_contra = TypeVar("ObservedT_contra", contravariant=True)


@runtime_checkable
class Watermark(Protocol[ObservedT_contra]):
    """The contract of a watermark kind (module docstring); ``ObservedT`` is what a read observes
    (file paths for the file-path kind, the greatest row's column values for the column kind)."""

    kind: ClassVar[str]

    @property
    def is_empty(self) -> bool:
        """Nothing read yet: a source reads everything."""
        ...

    def advance(self, observed: ObservedT_contra) -> Self:
        """The watermark after ``observed`` was committed; never lower than ``self``."""
        ...

    def merge(self, other: Self) -> Self:
        """The least watermark at or above both (commutative, associative, idempotent)."""
        ...

    def to_json(self) -> str:
        """JSON text that :meth:`from_json` reads back to an equal watermark."""
        ...

    @classmethod
    def from_json(cls, text: str) -> Self:
        """The watermark :meth:`to_json` wrote."""
        ...


_KINDS: dict[str, type[Watermark[Any]]] = {}

W = TypeVar("W", bound=type[Watermark[Any]])


def register(cls: W) -> W:
    """Class decorator: make ``cls`` findable by :func:`watermark_kind` under ``cls.kind``.

    Registering the same class twice is harmless (module reloads); another class under a taken
    name raises :class:`~watermark_assets.core.errors.WatermarkKindConflictError`.
    """
    kind = cls.kind
    existing = _KINDS.get(kind)
    if existing is not None and _name(existing) != _name(cls):
        raise WatermarkKindConflictError(kind, _name(existing), _name(cls))
    _KINDS[kind] = cls
    return cls


def watermark_kind(name: str) -> type[Watermark[Any]]:
    """The class registered under ``name``; UnknownWatermarkKindError names the known ones."""
    try:
        return _KINDS[name]
    except KeyError:
        raise UnknownWatermarkKindError(name, list(_KINDS)) from None


def registered_kinds() -> tuple[str, ...]:
    """The registered kind names, sorted."""
    return tuple(sorted(_KINDS))


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
