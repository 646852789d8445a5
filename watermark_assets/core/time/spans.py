"""Disjoint half-open spans ``[start, end)`` of epoch milliseconds: the time watermark's value.

A :class:`Spans` is a finite union of half-open intervals kept in its one canonical form: sorted,
empty spans dropped, overlapping *and touching* spans joined (``[1, 3)`` and ``[3, 5)`` are
``[1, 5)``). So two unions of the same instants are equal, and the size is the number of gaps
plus one, whatever the number of intervals that were joined. :meth:`Spans.union` is set union
(commutative, associative, idempotent); :meth:`Spans.end_of_span_at` and :meth:`Spans.gaps`
answer in ``O(log n)`` and ``O(n)`` for ``n`` spans.

Standard library only.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator

Span = tuple[int, int]


class Spans:
    """Immutable, hashable union of half-open spans of epoch milliseconds, in canonical form."""

    __slots__ = ("_ends", "_starts")

    def __init__(self, spans: Iterable[Span] = ()) -> None:
        starts: list[int] = []
        ends: list[int] = []
        for start, end in sorted(_checked(spans)):
            if end <= start:
                continue  # empty: covers nothing
            if ends and start <= ends[-1]:  # overlaps or touches the previous one: join
                ends[-1] = max(ends[-1], end)
            else:
                starts.append(start)
                ends.append(end)
        self._starts: tuple[int, ...] = tuple(starts)
        self._ends: tuple[int, ...] = tuple(ends)

    def union(self, other: Spans) -> Spans:
        """The instants in either (set union)."""
        if not other._starts or other == self:
            return self
        if not self._starts:
            return other
        return Spans([*self, *other])

    def end_of_span_at(self, point: int) -> int | None:
        """The end of the span holding ``point`` (``start <= point < end``); None outside all."""
        i = bisect_right(self._starts, point) - 1
        if i >= 0 and point < self._ends[i]:
            return self._ends[i]
        return None

    def gaps(self) -> Iterator[tuple[int | None, int | None]]:
        """The complement as half-open ``[lo, hi)`` pairs, in order; ``None`` is unbounded (the
        one gap of an empty :class:`Spans` is ``(None, None)``)."""
        lo: int | None = None
        for start, end in self:
            yield lo, start
            lo = end
        yield lo, None

    @property
    def highest(self) -> int | None:
        """The largest end; None when empty."""
        return self._ends[-1] if self._ends else None

    def __iter__(self) -> Iterator[Span]:
        return zip(self._starts, self._ends, strict=True)

    def __len__(self) -> int:
        return len(self._starts)

    def __bool__(self) -> bool:
        return bool(self._starts)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Spans):
            return self._starts == other._starts and self._ends == other._ends
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self._starts, self._ends))

    def __repr__(self) -> str:
        return f"Spans({list(self)!r})"

    def __getstate__(self) -> list[Span]:
        return list(self)

    def __setstate__(self, state: list[Span]) -> None:
        self.__init__(state)  # type: ignore[misc]


def _checked(spans: Iterable[Span]) -> Iterator[Span]:
    for start, end in spans:
        for value in (start, end):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(
                    f"time watermark span ({start!r}, {end!r}) must be epoch milliseconds (int)"
                )
        yield start, end
