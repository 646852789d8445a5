"""A pipeline's ``FreshnessPolicy``: when Dagster calls its asset late.

Derived from two durations of the pipeline (``defs/build.py`` reads them from its kind):

- the **cadence**, how often a run is expected to bring new data: a time pipeline's schedule
  interval (one window, or ``schedule.cron``'s longest interval), a file-path or event-time
  pipeline's partition (an hour, a day, a week; a month counts 31 days); pipelines run by hand
  (column, unit) have none;
- the **grace**, how long the pipeline itself waits for late data before a window counts: a
  time pipeline's ``grace_days``, an event-time pipeline's ``delay`` + ``allowed_lateness``.

The asset warns when its newest materialization is older than one cadence + grace, and fails
at two cadences + grace (a whole cadence missed). ``freshness: {fail_after, warn_after}``
replaces that; ``freshness: false`` gives no policy.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from functools import cache
from itertools import islice, pairwise

from dagster import FreshnessPolicy
from dagster._utils.schedules import cron_string_iterator

from watermark_assets.config.shared import FreshnessConfig

#: The cadence of a partition granularity (a month: its longest, 31 days).
GRANULARITY_CADENCE = {
    "hourly": timedelta(hours=1),
    "daily": timedelta(days=1),
    "weekly": timedelta(days=7),
    "monthly": timedelta(days=31),
}


#: Ticks looked at for a cron's longest interval (from 2000-01-01 UTC): hourly crons over 16
#: days, daily ones over a year, monthly ones over decades; enough for every weekly pattern.
_TICKS = 400
_REFERENCE = datetime(2000, 1, 1, tzinfo=timezone.utc).timestamp()


@cache
def cron_cadence(cron: str) -> timedelta:
    """The longest interval between two ticks of ``cron`` (UTC): a schedule's cadence (a
    monthly cron's is 31 days, a weekdays-only cron's spans the weekend)."""
    ticks = list(islice(cron_string_iterator(_REFERENCE, cron, "UTC"), _TICKS))
    return max(later - earlier for earlier, later in pairwise(ticks))


def derived_windows(cadence: timedelta, grace: timedelta) -> tuple[timedelta, timedelta]:
    """``(warn, fail)``: one cadence + grace, two cadences + grace."""
    return cadence + grace, 2 * cadence + grace


def freshness_policy(
    setting: FreshnessConfig | None,
    cadence: timedelta | None,
    grace: timedelta = timedelta(0),
) -> FreshnessPolicy | None:
    """The asset's policy: ``setting`` as written, none for ``false``, else derived from
    ``cadence`` and ``grace`` (none without a cadence)."""
    if setting is not None and not setting.enabled:
        return None
    if setting is not None and setting.fail_ms is not None:
        warn = setting.warn_ms
        return FreshnessPolicy.time_window(
            fail_window=timedelta(milliseconds=setting.fail_ms),
            warn_window=None if warn is None else timedelta(milliseconds=warn),
        )
    if cadence is None:
        return None
    warn_window, fail_window = derived_windows(cadence, grace)
    return FreshnessPolicy.time_window(fail_window=fail_window, warn_window=warn_window)
