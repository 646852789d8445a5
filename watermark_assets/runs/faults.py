"""Fault injection for the exactly-once and concurrency tests (never set in production).

The helpers live in :mod:`watermark_assets.faults` (below staging and storage, which have crash
points too); the runs import them from here as before.
"""

from watermark_assets.faults import (
    CRASH_ENV_VAR as CRASH_ENV_VAR,
)
from watermark_assets.faults import (
    PAUSE_DIR_ENV_VAR as PAUSE_DIR_ENV_VAR,
)
from watermark_assets.faults import (
    PAUSE_ENV_VAR as PAUSE_ENV_VAR,
)
from watermark_assets.faults import (
    crash_point as crash_point,
)
from watermark_assets.faults import (
    pause_point as pause_point,
)
