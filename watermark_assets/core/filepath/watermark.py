"""The file-path watermark: a global value plus one value per partition, and its activity state.

A watermark is the greatest file path processed. Because a slow partition can still receive files
while a newer one is active, each partition prefix also keeps the greatest file *name* processed in
it (the seed's per-partition watermarks). Every comparison is plain string comparison.

State machine (the seed's)::

    Initial --advance--> Active --mark_idle--> Idle --advance--> Active

Initial means "nothing processed yet": it has no value and no partition entries. Idle means "files
exist but none is above the watermark", which is different from "no files at all".
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar

from watermark_assets.core.errors import WatermarkRegressionError
from watermark_assets.core.filepath.path import prefix_components, split_path
from watermark_assets.core.frozen_map import FrozenMap
from watermark_assets.core.watermark import register


class WatermarkState(str, Enum):
    """Activity of a watermark; the values are the checkpoint's spelling."""

    INITIAL = "Initial"
    ACTIVE = "Active"
    IDLE = "Idle"


# merge() takes the greater state in this order: a lattice, hence commutative and associative.
_STATE_RANK = {WatermarkState.INITIAL: 0, WatermarkState.IDLE: 1, WatermarkState.ACTIVE: 2}


class PartitionWatermarks(FrozenMap[str, str]):
    """An immutable, hashable mapping partition prefix -> greatest file name processed in it.

    Iterates in sorted key order. Equal to any mapping with the same items (a plain dict too).
    Picklable and copyable, unlike ``types.MappingProxyType``.
    """

    __slots__ = ("_keys",)

    def _prepare(self, items: dict[str, str]) -> dict[str, str]:
        self._keys: list[str] = list(items)
        return items

    def has_partition_in(self, directory: str) -> bool:
        """Whether ``directory`` is a partition with an entry or holds one below it.

        O(log n): the keys are sorted, and all keys starting with ``directory + "/"`` are
        contiguous from the first key at or after that string.
        """
        keys = self._keys
        index = bisect_left(keys, directory)
        if index < len(keys) and keys[index] == directory:
            return True
        inside = directory + "/"
        index = bisect_left(keys, inside, lo=index)
        return index < len(keys) and keys[index].startswith(inside)


@register
@dataclass(frozen=True)
class FileWatermark:
    """Global watermark, per-partition watermarks and state; immutable, normalised at construction.

    ``value`` is the greatest full path processed (None only in the Initial state).
    ``partition_watermarks`` maps a partition prefix ('' for root-level files) to the greatest
    file name processed in it; it is stored as a :class:`PartitionWatermarks`.

    Invariants (ValueError otherwise, TypeError for a non-string): Initial has no value and no
    entries; Active and Idle have a value; every path, prefix and name is well formed (see
    :func:`~.filepath.split_path`).
    """

    #: the watermark contract's kind name (core/watermark.py)
    kind: ClassVar[str] = "file_path"

    state: WatermarkState
    value: str | None = None
    partition_watermarks: Mapping[str, str] = field(default_factory=PartitionWatermarks)

    def has_partition_in(self, directory: str) -> bool:
        """Whether ``directory`` is, or holds, a partition with a watermark (O(log n))."""
        entries = self.partition_watermarks
        assert isinstance(entries, PartitionWatermarks)  # normalised in __post_init__
        return entries.has_partition_in(directory)

    def __post_init__(self) -> None:
        state = WatermarkState(self.state)
        object.__setattr__(self, "state", state)
        if not isinstance(self.partition_watermarks, PartitionWatermarks):
            object.__setattr__(
                self, "partition_watermarks", PartitionWatermarks(self.partition_watermarks)
            )
        for prefix, name in self.partition_watermarks.items():
            if not isinstance(prefix, str) or not isinstance(name, str):
                raise TypeError(
                    f"partition watermark {prefix!r}: {name!r} is not a string pair; expected "
                    "'date=2024-01-28': '1706450400-uuid.ndjson.gz'"
                )
            prefix_components(prefix)
            if not name or "/" in name:
                raise ValueError(
                    f"partition watermark of {prefix!r} is {name!r}; expected a file name "
                    "(non-empty, without '/')"
                )
        if self.value is not None:
            if not isinstance(self.value, str):
                raise TypeError(f"watermark value {self.value!r} is not a string path")
            split_path(self.value)
        has_progress = self.value is not None or bool(self.partition_watermarks)
        if state is WatermarkState.INITIAL and has_progress:
            raise ValueError(
                f"an Initial watermark has no value and no partition watermarks, got value "
                f"{self.value!r} and {len(self.partition_watermarks)} partition entries; "
                "use state Active or Idle"
            )
        if state is not WatermarkState.INITIAL and self.value is None:
            raise ValueError(
                f"a watermark in state {state.value} needs a value (the greatest path processed); "
                "use state Initial for a watermark that has processed nothing"
            )

    @property
    def is_empty(self) -> bool:
        """Nothing processed yet (the Initial state): a source lists everything."""
        return self.value is None and not self.partition_watermarks

    def to_json(self) -> str:
        """The :meth:`to_dict` shapes as JSON text; ``from_json(w.to_json()) == w``."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FileWatermark:
        """The watermark :meth:`to_json` wrote (ValueError/TypeError name a malformed part)."""
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise TypeError(f"file-path watermark JSON {text!r} is not an object")
        return cls.from_dict(raw.get("watermark", {}), raw.get("partition_watermarks", {}))

    @classmethod
    def initial(cls) -> FileWatermark:
        """The cold-start watermark: nothing processed."""
        return cls(WatermarkState.INITIAL)

    def is_above(self, path: str) -> bool:
        """Whether ``path`` has not been processed yet, by its partition's watermark alone.

        A partition with an entry includes only names strictly greater than the entry (``>``, plain
        string comparison). A partition without an entry includes all its files: the global
        watermark is never used as a fallback, since that would skip a late partition's files.
        """
        prefix, name = split_path(path)
        current = self.partition_watermarks.get(prefix)
        return current is None or name > current

    def advance(self, paths: Iterable[str]) -> FileWatermark:
        """The watermark after ``paths`` were processed; the only way a watermark moves forward.

        Each partition's entry becomes the greatest name among its entry and the new names; the
        global value the greatest path; the state Active. A path at or below its partition's
        current entry raises :class:`~watermark_assets.exceptions.WatermarkRegressionError`
        (such files are already processed and must be dropped from the batch). Repeating a new
        path within ``paths`` is harmless. No paths: ``self`` unchanged.
        """
        entries = dict(self.partition_watermarks)
        greatest = self.value
        seen_any = False
        for path in paths:
            prefix, name = split_path(path)
            current = self.partition_watermarks.get(prefix)
            if current is not None and name <= current:
                raise WatermarkRegressionError(prefix, current, name)
            seen_any = True
            if name > entries.get(prefix, ""):
                entries[prefix] = name
            if greatest is None or path > greatest:
                greatest = path
        if not seen_any:
            return self
        return FileWatermark(WatermarkState.ACTIVE, greatest, entries)

    def mark_idle(self) -> FileWatermark:
        """The watermark after a poll found files, none above it: Active -> Idle.

        Idle stays Idle. Initial stays Initial: with no watermark there is nothing to be idle at.
        """
        if self.state is WatermarkState.ACTIVE:
            return FileWatermark(WatermarkState.IDLE, self.value, self.partition_watermarks)
        return self

    def merge(self, other: FileWatermark) -> FileWatermark:
        """The least watermark at or above both: per-partition maximum, global maximum.

        State: Active if either is Active, else Idle if either is Idle, else Initial. Commutative,
        associative and idempotent, so concurrent runs can combine their progress in any order.
        """
        entries = dict(self.partition_watermarks)
        for prefix, name in other.partition_watermarks.items():
            if name > entries.get(prefix, ""):
                entries[prefix] = name
        values = [v for v in (self.value, other.value) if v is not None]
        state = max(self.state, other.state, key=_STATE_RANK.__getitem__)
        return FileWatermark(state, max(values) if values else None, entries)

    def prune(self, horizon_prefix: str) -> FileWatermark:
        """Drop the entries of partitions that are below both ``horizon_prefix`` and the global
        watermark's partition; this keeps the state bounded as partitions age.

        Prefixes are compared by components, truncated to the shorter of the two
        (``date=2024-01-21/hour=13`` is below ``date=2024-01-22``; ``date=2024-01-22/hour=00``
        is not). The global watermark's partition and anything at or above it are always kept, so
        a pruned partition is below the floor of every :class:`~.listing.ListingPlan` whose horizon
        is not earlier than ``horizon_prefix``: it is skipped, never re-listed from scratch. Use the
        listing's own lookback horizon (or an earlier one).
        """
        bound = prefix_components(horizon_prefix)
        if self.value is not None:
            bound = min(bound, prefix_components(split_path(self.value)[0]))
        kept = {
            prefix: name
            for prefix, name in self.partition_watermarks.items()
            if not components_below(prefix_components(prefix), bound)
        }
        if len(kept) == len(self.partition_watermarks):
            return self
        return FileWatermark(self.state, self.value, kept)

    def to_dict(self) -> dict[str, dict[str, str | None]]:
        """The seed's checkpoint shapes: ``{"watermark": {"state", "value"},
        "partition_watermarks": {prefix: name}}``; ``from_dict(**w.to_dict()) == w``."""
        return {
            "watermark": {"state": self.state.value, "value": self.value},
            "partition_watermarks": dict(self.partition_watermarks),
        }

    @classmethod
    def from_dict(
        cls, watermark: Mapping[str, object], partition_watermarks: Mapping[str, object]
    ) -> FileWatermark:
        """Read the seed's checkpoint shapes.

        A part of the wrong type raises TypeError, a malformed value ValueError; both say which.
        The global value need not be the greatest path of the entries (the seed's own example has
        an entry for date=2024-01-29 while its value is in date=2024-01-28): each entry alone
        decides for its partition, and :meth:`advance` and :meth:`merge` take maxima from there.
        """
        if not isinstance(watermark, Mapping):
            raise TypeError(f"'watermark' is {watermark!r}; expected an object with state, value")
        if not isinstance(partition_watermarks, Mapping):
            raise TypeError(
                f"'partition_watermarks' is {partition_watermarks!r}; expected an object "
                "partition prefix -> file name"
            )
        if "state" not in watermark:
            raise ValueError("'watermark' has no 'state'; expected Initial, Active or Idle")
        state = watermark["state"]
        if state not in tuple(s.value for s in WatermarkState):
            raise ValueError(f"watermark state {state!r} is not one of Initial, Active, Idle")
        value = watermark.get("value")
        if value is not None and not isinstance(value, str):
            raise TypeError(f"watermark value {value!r} is not a string path or null")
        entries: dict[str, str] = {}
        for prefix, name in partition_watermarks.items():
            if not isinstance(prefix, str) or not isinstance(name, str):
                raise TypeError(
                    f"partition watermark {prefix!r}: {name!r} is not a string pair; expected "
                    "'date=2024-01-28': '1706450400-uuid.ndjson.gz'"
                )
            entries[prefix] = name
        return cls(WatermarkState(state), value, entries)


def components_below(components: tuple[str, ...], bound: tuple[str, ...]) -> bool:
    """Whether a prefix is strictly below ``bound`` on their common depth.

    ``('date=2024-01-21', 'hour=13')`` is below ``('date=2024-01-22',)``; a prefix that equals
    the bound on the common depth (either one extending the other) is not below it.
    """
    depth = min(len(components), len(bound))
    return components[:depth] < bound[:depth]
