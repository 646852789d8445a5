"""Kind ``"time"``: time watermarks over windows of ``[from, to)`` (seed 003).

Standard library only. Modules: ``spec`` (``from``/``to`` parsing, :class:`TimeSpec`),
``partitioning`` (windows derived from ``from``), ``instant`` (UTC milliseconds).
"""

from watermark_assets.core.time.instant import format_instant, from_millis, to_millis
from watermark_assets.core.time.partitioning import (
    Partitioning,
    TimeWindows,
    add_months,
    windows,
)
from watermark_assets.core.time.spec import (
    BeforeNow,
    FixedTime,
    Now,
    TimeBound,
    TimeSpec,
    parse_bound,
)

__all__ = [
    "BeforeNow",
    "FixedTime",
    "Now",
    "Partitioning",
    "TimeBound",
    "TimeSpec",
    "TimeWindows",
    "add_months",
    "format_instant",
    "from_millis",
    "parse_bound",
    "to_millis",
    "windows",
]
