"""Kind ``"event_time"`` (seeds 002, 004): max event time - delay per input, combined by a policy.

Standard library only. Modules: ``windows`` (tumbling windows; closed and late), ``watermark``
(:class:`EventTimeWatermark`, the committed value), ``tracker`` (:class:`WatermarkTracker`: the
next watermark from a run's event-time statistics, min/max policy, idle inputs), ``operators``
(seed 002: rescaling takes the max, the merger emits the min once every input reported, the sort
buffer drains in order up to the watermark).
"""

from watermark_assets.core.event_time.duration import format_duration_ms, parse_duration_ms
from watermark_assets.core.event_time.operators import LocalWatermarks, SortBuffer, WatermarkMerger
from watermark_assets.core.event_time.tracker import (
    NO_ROWS,
    EventTimeStats,
    WatermarkPolicy,
    WatermarkTracker,
)
from watermark_assets.core.event_time.watermark import EventTimeWatermark, InputMark, InputMarks
from watermark_assets.core.event_time.windows import (
    EventWindow,
    TumblingWindows,
    is_late_record,
)

__all__ = [
    "NO_ROWS",
    "EventTimeStats",
    "EventTimeWatermark",
    "EventWindow",
    "InputMark",
    "InputMarks",
    "LocalWatermarks",
    "SortBuffer",
    "TumblingWindows",
    "WatermarkMerger",
    "WatermarkPolicy",
    "WatermarkTracker",
    "format_duration_ms",
    "is_late_record",
    "parse_duration_ms",
]
