"""An immutable, hashable mapping in sorted key order: the value type of every kind's per-key
watermarks (landing prefixes, time windows, units). Standard library only."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class FrozenMap(Mapping[K, V]):
    """Iterates in sorted key order; equal to any mapping with the same items (a plain dict
    too); hashable, picklable and copyable, unlike ``types.MappingProxyType``. Subclasses check
    or derive in :meth:`_prepare` (called with the sorted items)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[K, V] | None = None) -> None:
        self._items: dict[K, V] = self._prepare(dict(sorted((items or {}).items())))  # type: ignore[type-var]

    def _prepare(self, items: dict[K, V]) -> dict[K, V]:
        return items

    def __getitem__(self, key: K) -> V:
        return self._items[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._items == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._items!r})"

    def __getstate__(self) -> dict[K, V]:
        return self._items

    def __setstate__(self, state: Any) -> None:
        self.__init__(state)  # type: ignore[misc]
