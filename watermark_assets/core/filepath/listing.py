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

from watermark_assets.core.filepath.path import prefix_components, split_path
from watermark_assets.core.filepath.watermark import FileWatermark, components_below


@dataclass(frozen=True)
class ListingPlan:
    """A watermark plus the floor below which partitions without an entry are skipped.

    ``floor`` None means a full recursive scan (cold start without a lookback). ``stop_below``
    and ``stop_at`` bound the listing to the window [stop_below, stop_at) of partition prefixes,
    entries or not: below ``stop_below`` lie the partitions whose late-arrival window has closed
    (their entries are kept only for the sweep), and the sweep itself stops at the listing
    horizon, ``stop_at``, where the regular listing takes over.
    """

    watermark: FileWatermark
    floor: str | None
    stop_below: str | None = None
    stop_at: str | None = None

    def _outside(self, components: tuple[str, ...]) -> bool:
        if self.stop_below is not None and components_below(
            components, prefix_components(self.stop_below)
        ):
            return True
        if self.stop_at is None:
            return False
        bound = prefix_components(self.stop_at)
        depth = min(len(components), len(bound))
        head, limit = components[:depth], bound[:depth]
        # a directory on the bound's path but shallower may still hold partitions below it
        return head > limit or (head == limit and len(components) >= len(bound))

    def should_descend(self, dir_prefix: str) -> bool:
        """Whether to list the directory ``dir_prefix`` (relative to the root, no trailing '/',
        e.g. ``date=2024-01-27`` or ``date=2024-01-28/hour=13``).

        True when there is no floor, when the directory is not below the floor at its depth
        (``date=2024-01-28`` and ``date=2024-01-29`` for the floor ``date=2024-01-28``), or when a
        partition with an entry lies in it (a late file in an older partition is still found).
        """
        components = prefix_components(dir_prefix, what="directory")
        if self._outside(components):
            return False
        if self.floor is None:
            return True
        if not components_below(components, prefix_components(self.floor)):
            return True
        return self.watermark.has_partition_in(dir_prefix)

    def lowest_child(self, dir_prefix: str) -> str | None:
        """The smallest name of a child of ``dir_prefix`` (relative, ``''`` for the root) this
        plan may descend into or accept, or None when any may be: the ``stop_below`` bound's
        component at that depth when the directory lies on the bound's path. Children named
        below it lie below ``stop_below`` (:meth:`should_descend` and :meth:`accepts` refuse
        them), so a listing may start at it: on S3 the root of a ``date=...`` layout is then
        listed from the listing horizon on, not across every day ever landed."""
        if self.stop_below is None:
            return None
        bound = prefix_components(self.stop_below)
        here = prefix_components(dir_prefix, what="directory")
        if len(here) >= len(bound) or here != bound[: len(here)]:
            return None
        return bound[len(here)]

    def accepts(self, path: str) -> bool:
        """Whether ``path`` is returned: its partition is not pruned (below the floor without an
        entry) and the watermark has it above (see :meth:`FileWatermark.is_above`)."""
        prefix, _ = split_path(path)
        if self._outside(prefix_components(prefix)):
            return False
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
        return ListingPlan(watermark, horizon, stop_below=horizon)
    partition, _ = split_path(watermark.value)
    if horizon is None:
        return ListingPlan(watermark, partition)
    floor = min(horizon, partition, key=lambda prefix: prefix_components(prefix))
    return ListingPlan(watermark, floor, stop_below=horizon)


def plan_sweep(watermark: FileWatermark, retained: str | None, horizon: str) -> ListingPlan:
    """The listing of the partitions a regular listing no longer looks at: from ``retained``
    (the oldest partition whose watermark is still kept; None: all) up to ``horizon``."""
    return ListingPlan(watermark, retained, stop_below=retained, stop_at=horizon)


def select_files_above(plan: ListingPlan, paths: Iterable[str]) -> list[str]:
    """The paths ``plan`` accepts, sorted (plain string order)."""
    return sorted(path for path in paths if plan.accepts(path))
