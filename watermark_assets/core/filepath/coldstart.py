"""Cold start: which partitions a first run lists (the seed's "Filtered Scan").

With a ``partition_filter`` (a :class:`~.timeparts.PartitionTemplate` and ``lookback`` days) a
pipeline without a watermark lists only recent partitions instead of every file ever landed.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from watermark_assets.core.clock import ensure_utc
from watermark_assets.core.filepath.timeparts import Grain, PartitionTemplate

_STEP: dict[Grain, timedelta] = {
    "minute": timedelta(minutes=1),
    "hour": timedelta(hours=1),
    # A month or a year has no fixed length: step by day and drop repeated prefixes.
    "day": timedelta(days=1),
    "month": timedelta(days=1),
    "year": timedelta(days=1),
}


def _truncate(dt: datetime, grain: Grain) -> datetime:
    if grain == "minute":
        return dt.replace(second=0, microsecond=0)
    if grain == "hour":
        return dt.replace(minute=0, second=0, microsecond=0)
    # Month and year grains step by day; the prefixes of any day of the month are the same.
    return dt.replace(hour=0, minute=0, second=0, microsecond=0)


def lookback_prefixes(template: PartitionTemplate, lookback_days: int, now: datetime) -> list[str]:
    """The distinct partition prefixes from ``now - lookback_days`` days (truncated to the
    template's grain) up to and including the partition of ``now``, ascending.

    The window is the closed interval [now - lookback_days days, now], widened to whole partitions:
    with a day grain, ``lookback: 7`` scans today and the 7 days before it (8 prefixes); with an
    hour grain, the current hour and the 7 x 24 hours before it. ``lookback_days`` 0 is the current
    partition alone; a negative one raises ValueError. ``now`` must be aware (converted to UTC).
    """
    if lookback_days < 0:
        raise ValueError(
            f"lookback is {lookback_days} days; expected 0 or more (0 lists the current partition)"
        )
    now = ensure_utc(now)
    grain = template.grain
    step = _STEP[grain]
    moment = _truncate(now - timedelta(days=lookback_days), grain)
    prefixes: list[str] = []
    while moment <= now:
        prefix = template.format(moment)
        if not prefixes or prefixes[-1] != prefix:
            prefixes.append(prefix)
        moment += step
    return prefixes


def lookback_horizon(template: PartitionTemplate, lookback_days: int, now: datetime) -> str:
    """The first (oldest) prefix of :func:`lookback_prefixes`: the cold start's listing floor."""
    return lookback_prefixes(template, lookback_days, now)[0]
