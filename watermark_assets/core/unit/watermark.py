"""The unit watermark (kind ``"unit"``): one inner watermark per unit id (seed 003).

Each unit keeps its own watermark, of ONE inner kind fixed per pipeline:

- a unit-only pipeline (one partition per survey id) holds :class:`~.done.DoneAt` per unit, the
  instant its last run committed;
- a time x unit pipeline holds the time watermark per unit (kind ``"time"``: each window's high
  watermark), so each (window, unit) cell has its own high watermark.

**Why an inner watermark kind, not opaque text with a caller's merge function, nor an int.** The
inner value is any registered kind (``core/watermark.py``), merged by that kind's own ``merge``:

- ``from_json`` must rebuild a watermark from the Delta commit alone; a merge function supplied
  by the caller is not in the JSON, so opaque text would need the caller at every read, and two
  callers could merge one watermark differently. The registry names the inner kind in the JSON
  (``inner_kind``) and finds its class, as it does for every stored watermark;
- the merge laws carry over unit by unit: if the inner merge is commutative, associative and
  idempotent (every kind's is property-tested), so is this one, with no new proof;
- a plain int per unit (milliseconds) would do for unit-only pipelines, but time x unit needs the
  time kind's covered spans per unit, which would then be a second structure.

**Known, not read yet.** A unit maps to ``None`` when it is known (listed by a secondary input,
added as a Dagster partition) but has no successful run. ``None`` is below every watermark, so
merging never loses a known unit. Units are never removed: there is no method that drops one, and
:meth:`UnitWatermark.new_units` reports the known ids that disappeared from an input instead.

**JSON**, units sorted by id, each inner watermark embedded as the JSON its kind writes (key order
kept, so a column watermark's comparison order survives)::

    {"inner_kind": "done_at", "units": {"id1": {"ms": 1579046400000}, "id2": null}}

Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from watermark_assets.core.errors import UnitIdError, UnitInnerKindError, WatermarkJSONError
from watermark_assets.core.frozen_map import FrozenMap
from watermark_assets.core.unit.units import check_unit_id
from watermark_assets.core.watermark import Watermark, register, watermark_kind

InnerT = TypeVar("InnerT", bound=Watermark[Any])

_STORED = "the unit watermark"


class UnitEntries(FrozenMap[str, InnerT | None]):
    """An immutable, hashable mapping unit id -> inner watermark (None: known, not read yet).

    Iterates in sorted id order; equal to any mapping with the same items.
    """

    __slots__ = ()


@dataclass(frozen=True)
class UnitListing:
    """How a listing of ids compares with the known units (:meth:`UnitWatermark.new_units`)."""

    #: listed ids not known yet, in listed order, each once: to add (as dynamic partitions)
    new: tuple[str, ...]
    #: known ids the listing no longer holds, sorted: reported, never dropped
    missing: tuple[str, ...]

    def describe(self) -> str:
        """One sentence for a sensor tick: which ids are added, which disappeared."""
        if not self.new and not self.missing:
            return "no new unit ids"
        parts = []
        if self.new:
            parts.append(f"{len(self.new)} new unit id(s): {some_ids(self.new)}")
        if self.missing:
            parts.append(
                f"{len(self.missing)} known unit id(s) no longer listed (kept, with their "
                f"history): {some_ids(self.missing)}"
            )
        return "; ".join(parts)


def some_ids(ids: Sequence[str], shown: int = 10) -> str:
    """The first ``shown`` ids (a tick with 10,000 new ids stays one readable line)."""
    more = f", ... ({len(ids) - shown} more)" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more


@register
@dataclass(frozen=True)
class UnitWatermark(Generic[InnerT]):
    """One inner watermark per unit id, all of kind ``inner_kind`` (module docstring).

    ``units`` maps each known id to its inner watermark, or None when it has no run yet; it is
    stored as a :class:`UnitEntries`. Ids are checked (:func:`~.units.check_unit_id`); an inner
    watermark of another kind raises :class:`~watermark_assets.core.errors.UnitInnerKindError`; an
    unregistered ``inner_kind`` raises UnknownWatermarkKindError.
    """

    kind: ClassVar[str] = "unit"

    inner_kind: str
    units: Mapping[str, InnerT | None] = field(default_factory=lambda: UnitEntries())

    def __post_init__(self) -> None:
        if self.inner_kind == self.kind:
            raise ValueError("a unit watermark cannot hold unit watermarks; use one level")
        watermark_kind(self.inner_kind)  # UnknownWatermarkKindError names the registered kinds
        for unit, inner in self.units.items():
            if not isinstance(unit, str):  # an int would be checked as its text, then mismatch
                raise UnitIdError(unit, "a unit watermark's ids are strings", source=_STORED)
            check_unit_id(unit, source=_STORED)
            if inner is not None and type(inner).kind != self.inner_kind:
                raise UnitInnerKindError(self.inner_kind, type(inner).kind, unit=unit)
        if not isinstance(self.units, UnitEntries):
            object.__setattr__(self, "units", UnitEntries(self.units))

    @classmethod
    def of_units(cls, inner_kind: str, ids: Iterable[str]) -> UnitWatermark[Any]:
        """Known ``ids`` with no run yet (the units of a static list or of Dagster's dynamic
        partitions)."""
        return cls(inner_kind, dict.fromkeys(ids))

    @property
    def is_empty(self) -> bool:
        """No unit has a run yet (units may be known): every unit reads everything."""
        return all(inner is None for inner in self.units.values())

    def add_units(self, ids: Iterable[str]) -> UnitWatermark[InnerT]:
        """The watermark that also knows ``ids`` (with no run yet); known ids keep theirs."""
        added = [unit for unit in ids if unit not in self.units]
        if not added:
            return self
        return UnitWatermark(self.inner_kind, {**dict.fromkeys(added), **self.units})

    def advance(self, observed: Mapping[str, InnerT]) -> UnitWatermark[InnerT]:
        """The watermark after the units of ``observed`` committed; the only way forward.

        ``observed`` maps each unit a run committed to its inner watermark after that run (for
        ``done_at``: ``{"id1": DoneAt.at(now)}``; advance the inner one with its kind's own
        ``advance`` first where that kind checks more than merge does). Each unit's watermark
        becomes the merge of the two, so it never moves backwards; an unknown unit is added.
        """
        return self.merge(UnitWatermark(self.inner_kind, observed))

    def merge(self, other: UnitWatermark[InnerT]) -> UnitWatermark[InnerT]:
        """Unit by unit, the inner kind's merge (None below everything); every unit of either is
        kept. Commutative, associative and idempotent because the inner merge is."""
        if other.inner_kind != self.inner_kind:
            raise UnitInnerKindError(self.inner_kind, other.inner_kind)
        if other is self or not other.units:
            return self
        merged: dict[str, InnerT | None] = dict(self.units)
        for unit, theirs in other.units.items():
            mine = merged.get(unit)
            if mine is None:
                merged[unit] = theirs
            elif theirs is not None:
                merged[unit] = mine.merge(theirs)
        result = UnitWatermark(self.inner_kind, merged)
        return self if result == self else result

    def new_units(self, listed: Iterable[str]) -> UnitListing:
        """Which ``listed`` ids are not known yet, and which known ids are no longer listed.

        Nothing is removed: the missing ids keep their watermark (an input that lost a row, or a
        temporary outage of the listing, must not reset a unit's history). Listed ids are checked
        like stored ones (:class:`~watermark_assets.core.errors.UnitIdError`); screen an input
        with :func:`~.units.screen_units` first.
        """
        listed_ids = dict.fromkeys(check_unit_id(unit, source="the listing") for unit in listed)
        return UnitListing(
            new=tuple(unit for unit in listed_ids if unit not in self.units),
            missing=tuple(unit for unit in self.units if unit not in listed_ids),
        )

    def to_json(self) -> str:
        """The module docstring's JSON; ``from_json(w.to_json()) == w``."""
        units = {
            unit: None if inner is None else json.loads(inner.to_json())
            for unit, inner in self.units.items()
        }
        return json.dumps({"inner_kind": self.inner_kind, "units": units})

    @classmethod
    def from_json(cls, text: str) -> UnitWatermark[Any]:
        """Read :meth:`to_json`'s text; the inner kind's class comes from the registry."""
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise WatermarkJSONError(text, f"not JSON ({exc})") from None
        if (
            not isinstance(raw, dict)
            or not isinstance(raw.get("inner_kind"), str)
            or not isinstance(raw.get("units", {}), dict)
        ):
            raise WatermarkJSONError(
                text, 'a unit watermark is {"inner_kind": "<kind>", "units": {"<id>": ...}}'
            )
        inner_cls = watermark_kind(raw["inner_kind"])
        units: dict[str, Any] = {
            unit: None if value is None else inner_cls.from_json(json.dumps(value))
            for unit, value in raw.get("units", {}).items()
        }
        return cls(raw["inner_kind"], units)

    def __str__(self) -> str:
        if not self.units:
            return f"(no units; inner kind {self.inner_kind})"
        return ", ".join(
            f"{unit}: {'not read yet' if inner is None else inner}"
            for unit, inner in self.units.items()
        )


if TYPE_CHECKING:
    # Static proof that the unit kind satisfies the contract (mypy checks this assignment).
    def _conforms(w: UnitWatermark[Any]) -> Watermark[Mapping[str, Any]]:
        return w
