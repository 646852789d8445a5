"""How far back a file-path pipeline looks: the listing horizon (``late_arrival_days``) and the
retention horizon below which per-partition watermarks are pruned (bounded state)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from watermark_assets.config import Pipeline
from watermark_assets.core.filepath.coldstart import lookback_horizon
from watermark_assets.core.filepath.path import prefix_components, split_path
from watermark_assets.core.filepath.watermark import FileWatermark, components_below


def listing_horizon(
    pipeline: Pipeline, watermark: FileWatermark, now: datetime, *, extra_days: int = 0
) -> str | None:
    """The oldest landing partition a listing still looks at (None: no lower bound).

    Cold start (no watermark yet): the ``cold_start.lookback_days`` window before ``now`` (None is
    a full scan). Afterwards: ``late_arrival_days`` before the newest partition processed, so
    late files and late new partitions in that window are found, and older per-partition
    watermarks are only kept for the sweep (see :func:`retention_horizon`). Relative to the
    watermark, not to ``now``, so a historical load keeps watching the partitions around its
    progress. ``extra_days`` moves the horizon that many days further back.
    """
    template = pipeline.watermark.template
    if watermark.value is None:
        days = pipeline.watermark.cold_start.lookback_days
        return None if days is None else lookback_horizon(template, days + extra_days, now)
    days = pipeline.watermark.late_arrival_days
    newest = template.try_parse(split_path(watermark.value)[0])
    if days is None or newest is None:
        return None
    return lookback_horizon(template, days + extra_days, newest)


def retention_horizon(pipeline: Pipeline, watermark: FileWatermark, now: datetime) -> str | None:
    """The oldest landing partition whose watermark is kept: ``sweep.days`` below the listing
    horizon. Between the two, the sweep tells files that landed after their partition's
    late-arrival window closed from files that were committed; older entries are pruned."""
    days = pipeline.watermark.sweep.days
    return listing_horizon(pipeline, watermark, now, extra_days=days)


def pruned_watermark(pipeline: Pipeline, watermark: FileWatermark, now: datetime) -> FileWatermark:
    horizon = retention_horizon(pipeline, watermark, now)
    return watermark if horizon is None or watermark.value is None else watermark.prune(horizon)


def retained_files(
    pipeline: Pipeline, watermark: FileWatermark, now: datetime, paths: Iterable[str]
) -> frozenset[str]:
    """The ``paths`` whose folder is not below the retention horizon (compared by components,
    as :meth:`FileWatermark.prune` does): what the state keeps of a record of files, in any
    folder, landing partition or not."""
    horizon = retention_horizon(pipeline, watermark, now)
    if horizon is None or watermark.value is None:
        return frozenset(paths)
    bound = prefix_components(horizon)
    return frozenset(
        path
        for path in paths
        if not components_below(prefix_components(split_path(path)[0]), bound)
    )
