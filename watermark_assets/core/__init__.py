"""The pure watermark core: standard library only, testable in milliseconds."""

from watermark_assets.core.checkpoint import Checkpoint, CheckpointPolicy
from watermark_assets.core.clock import Clock, ensure_utc, system_clock
from watermark_assets.core.column import ColumnWatermark
from watermark_assets.core.event_time import EventTimeWatermark
from watermark_assets.core.filepath.coldstart import lookback_horizon, lookback_prefixes
from watermark_assets.core.filepath.listing import ListingPlan, plan_listing, select_files_above
from watermark_assets.core.filepath.path import (
    NameOrdering,
    check_sortable,
    detect_name_ordering,
    name_time,
    prefix_components,
    split_path,
)
from watermark_assets.core.filepath.timeparts import PartitionTemplate
from watermark_assets.core.filepath.watermark import (
    FileWatermark,
    PartitionWatermarks,
    WatermarkState,
)
from watermark_assets.core.time import TimeSpec, TimeWatermark
from watermark_assets.core.unit import DoneAt, UnitWatermark
from watermark_assets.core.watermark import Watermark, register, registered_kinds, watermark_kind

__all__ = [
    "Checkpoint",
    "CheckpointPolicy",
    "Clock",
    "ColumnWatermark",
    "DoneAt",
    "EventTimeWatermark",
    "FileWatermark",
    "ListingPlan",
    "NameOrdering",
    "PartitionTemplate",
    "PartitionWatermarks",
    "TimeSpec",
    "TimeWatermark",
    "UnitWatermark",
    "Watermark",
    "WatermarkState",
    "check_sortable",
    "detect_name_ordering",
    "ensure_utc",
    "lookback_horizon",
    "lookback_prefixes",
    "name_time",
    "plan_listing",
    "prefix_components",
    "register",
    "registered_kinds",
    "select_files_above",
    "split_path",
    "system_clock",
    "watermark_kind",
]
