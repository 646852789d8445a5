"""Which directories a listing descends into and which files it returns (the seed's "Efficient
Partition Scanning"). Pure: the storage layer walks the directories and asks this plan.

A listing has a *floor*, a partition prefix: partitions below it that have no per-partition
watermark are skipped without being listed. Prefixes are compared component by component (each
component as a plain string), truncated to the shallower of the two, so a directory is compared
with the floor at its own depth.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from watermark_assets.core.file_watermark import FileWatermark, components_below
from watermark_assets.core.filepath import prefix_components, split_path


@dataclass(frozen=True)
class ListingPlan:
    """A watermark plus the floor below which partitions without an entry are skipped.

    ``floor`` None means a full recursive scan (cold start without a lookback).
    """

    watermark: FileWatermark
    floor: str | None

    def should_descend(self, dir_prefix: str) -> bool:
        """Whether to list the directory ``dir_prefix`` (relative to the root, no trailing '/',
        e.g. ``date=2024-01-27`` or ``date=2024-01-28/hour=13``).

        True when there is no floor, when the directory is not below the floor at its depth
        (``date=2024-01-28`` and ``date=2024-01-29`` for the floor ``date=2024-01-28``), or when a
        partition with an entry lies in it (a late file in an older partition is still found).
        """
        if self.floor is None:
            return True
        components = prefix_components(dir_prefix, what="directory")
        if not components_below(components, prefix_components(self.floor)):
            return True
        return self.watermark.has_partition_in(dir_prefix)

    def accepts(self, path: str) -> bool:
        """Whether ``path`` is returned: its partition is not pruned (below the floor without an
        entry) and the watermark has it above (see :meth:`FileWatermark.is_above`)."""
        prefix, _ = split_path(path)
        if (
            self.floor is not None
            and prefix not in self.watermark.partition_watermarks
            and components_below(prefix_components(prefix), prefix_components(self.floor))
        ):
            return False
        return self.watermark.is_above(path)


def plan_listing(watermark: FileWatermark, horizon: str | None) -> ListingPlan:
    """The listing plan of ``watermark``.

    The floor is the global watermark's partition. A ``horizon`` (the lookback's first partition
    prefix) lowers it to the smaller of the two, so a new partition that appears late within the
    lookback is still found. An Initial watermark has the horizon as floor: None is the seed's cold
    start "Full Scan", a horizon its "Filtered Scan".
    """
    if watermark.value is None:
        return ListingPlan(watermark, horizon)
    partition, _ = split_path(watermark.value)
    if horizon is None:
        return ListingPlan(watermark, partition)
    floor = min(horizon, partition, key=lambda prefix: prefix_components(prefix))
    return ListingPlan(watermark, floor)


def select_files_above(plan: ListingPlan, paths: Iterable[str]) -> list[str]:
    """The paths ``plan`` accepts, sorted (plain string order)."""
    return sorted(path for path in paths if plan.accepts(path))
