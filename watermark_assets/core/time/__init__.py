"""Kind ``"time"``: time watermarks over windows of ``[from, to)`` (seed 003).

Standard library only. Modules: ``spec`` (``from``/``to`` parsing, :class:`TimeSpec`),
``partitioning`` (windows derived from ``from``), ``watermark`` (:class:`TimeWatermark`, the
cut-off and the windows due on a tick), ``spans`` (its value: the disjoint spans the committed
windows covered), ``tick`` (:class:`CutOff`, :class:`DueWindows`: one tick's decision and its
reason in words), ``instant`` (UTC milliseconds).

A tick, from the Dagster edge (``now`` read once from the injected clock)::

    spec = TimeSpec("2020-01-01", "P0D", "daily", grace_days=3)
    decision = watermark.due_at(spec, now)      # or due(windows(spec, now), cut_off(spec, now))
    decision.windows                            # the windows to run, [start, end) in UTC
    decision.explain()                          # "3 partitions: ... end after the cut-off ..."
    watermark = watermark.advance(succeeded)    # after each committed window
"""

from watermark_assets.core.time.instant import format_instant, from_millis, to_millis
from watermark_assets.core.time.partitioning import (
    Partitioning,
    TimeWindows,
    add_months,
    windows,
)
from watermark_assets.core.time.spans import Spans
from watermark_assets.core.time.spec import (
    BeforeNow,
    FixedTime,
    Now,
    TimeBound,
    TimeSpec,
    parse_bound,
)
from watermark_assets.core.time.tick import CutOff, DueWindows
from watermark_assets.core.time.watermark import TimeWatermark

__all__ = [
    "BeforeNow",
    "CutOff",
    "DueWindows",
    "FixedTime",
    "Now",
    "Partitioning",
    "Spans",
    "TimeBound",
    "TimeSpec",
    "TimeWatermark",
    "TimeWindows",
    "add_months",
    "format_instant",
    "from_millis",
    "parse_bound",
    "to_millis",
    "windows",
]
