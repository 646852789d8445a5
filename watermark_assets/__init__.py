"""watermark_assets: watermark-based incremental ingestion on Spark into Delta Lake, for Dagster.

``watermark_assets.WatermarkPipelines`` is the Dagster Component (``component.py``), imported on
first use: the configuration and a run worker's Spark start before Dagster is imported
(``definitions.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watermark_assets.component import WatermarkPipelines

__version__ = "0.1.0"
__all__ = ["WatermarkPipelines"]


def __getattr__(name: str) -> Any:
    if name == "WatermarkPipelines":
        from watermark_assets.component import WatermarkPipelines

        return WatermarkPipelines
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
