"""Which partitions a run covers, as a plain value: Dagster's context turned once, at the edge.

Like Dagster's own ``TableSlice``/``TablePartitionDimension``, one value object holds any
partitioning: a time window (daily or hourly partitions, or a range of them), a list of static
or dynamic keys (seed 003's units), or several named dimensions (time x unit). Ingestion reads
this object; it never sees a partitions definition.

Time windows are closed at the start and open at the end, ``[start, end)``, in aware UTC.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from watermark_assets.core.clock import ensure_utc


@dataclass(frozen=True)
class TimeWindow:
    """``[start, end)`` in aware UTC (a naive datetime is refused)."""

    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "start", ensure_utc(self.start))
        object.__setattr__(self, "end", ensure_utc(self.end))
        if not self.start < self.end:
            raise ValueError(f"time window [{self.start}, {self.end}) is empty; start < end")

    def contains(self, moment: datetime) -> bool:
        return self.start <= ensure_utc(moment) < self.end


@dataclass(frozen=True)
class PartitionDimension:
    """One dimension of a selection: its keys, and its time window when it is a time dimension."""

    name: str
    keys: tuple[str, ...]
    time_window: TimeWindow | None = None


@dataclass(frozen=True)
class PartitionSelection:
    """The partitions one run covers (see the module docstring).

    ``keys`` are Dagster's partition keys of the run, in order (for several dimensions, Dagster's
    joined multi-partition keys); ``dimensions`` holds each dimension on its own (one, named
    ``""``, for a one-dimensional partitioning).
    """

    keys: tuple[str, ...]
    dimensions: tuple[PartitionDimension, ...] = field(default=())
    #: each key's own key in each dimension, in ``dimensions``' order (several dimensions only;
    #: with one dimension a key is its own)
    parts: tuple[tuple[str, ...], ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.keys:
            raise ValueError("a partition selection holds at least one partition key")
        if self.parts and len(self.parts) != len(self.keys):
            raise ValueError(
                f"a partition selection of {len(self.keys)} keys got {len(self.parts)} keys' "
                "parts; give each key its key in every dimension"
            )

    @classmethod
    def of_time_window(cls, keys: Sequence[str], window: TimeWindow) -> PartitionSelection:
        """Time partitions: the run's keys and the window they cover."""
        return cls(tuple(keys), (PartitionDimension("", tuple(keys), window),))

    @classmethod
    def of_keys(cls, keys: Sequence[str]) -> PartitionSelection:
        """Static or dynamic partitions: keys only."""
        return cls(tuple(keys), (PartitionDimension("", tuple(keys)),))

    @classmethod
    def of_dimensions(
        cls,
        keys: Sequence[str],
        dimensions: Mapping[str, PartitionDimension],
        parts: Sequence[Mapping[str, str]] = (),
    ) -> PartitionSelection:
        """Several named dimensions (Dagster's multi-partitions); ``parts``: each key of
        ``keys`` as its key in each dimension (``{"date": "2024-01-28", "unit": "us"}``)."""
        names = sorted(dimensions)
        return cls(
            tuple(keys),
            tuple(dimensions[name] for name in names),
            tuple(tuple(part[name] for name in names) for part in parts),
        )

    @property
    def time_window(self) -> TimeWindow | None:
        """The window of the (one) time dimension, None when there is none."""
        windows = [d.time_window for d in self.dimensions if d.time_window is not None]
        return windows[0] if windows else None

    def key_parts(self) -> list[dict[str, str]]:
        """Each key of ``keys``, in order, as its key in each dimension (one dimension: the key
        itself under the dimension's name); ValueError for several dimensions built without
        their ``parts``."""
        names = [d.name for d in self.dimensions] or [""]
        if self.parts:
            return [dict(zip(names, part, strict=True)) for part in self.parts]
        if len(names) > 1:
            raise ValueError(
                f"this selection of the dimensions {names} does not say which key of each "
                "dimension its keys are; build it with of_dimensions(keys, dimensions, parts)"
            )
        return [{names[0]: key} for key in self.keys]

    def dimension(self, name: str) -> PartitionDimension:
        for dimension in self.dimensions:
            if dimension.name == name:
                return dimension
        known = [d.name for d in self.dimensions]
        raise KeyError(f"no partition dimension {name!r} in this selection; it has {known}")
