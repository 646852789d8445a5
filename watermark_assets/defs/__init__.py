"""Dagster glue: the only package of watermark_assets that imports dagster.

``build_definitions`` is imported on first use, so that ``watermark_assets.definitions`` can
start a run worker's Spark (``defs/run_worker.py``, light) before the rest of this package loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watermark_assets.defs.build import build_definitions

__all__ = ["build_definitions"]


def __getattr__(name: str) -> Any:
    if name == "build_definitions":
        from watermark_assets.defs.build import build_definitions

        return build_definitions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
