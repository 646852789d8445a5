"""Where a column watermark is kept: Delta commit metadata (default), a file, PostgreSQL.

The PostgreSQL provider is imported from ``watermark_assets.providers.postgres`` (it needs psycopg).
"""

from watermark_assets.providers.base import (
    CommitCarriedProvider,
    Keep,
    WatermarkProvider,
    WatermarkReader,
    WatermarkRecord,
)
from watermark_assets.providers.delta_metadata import (
    DeltaMetadataProvider,
    commit_metadata_entry,
    metadata_key,
)
from watermark_assets.providers.file import FileWatermarkProvider
from watermark_assets.providers.manager import WatermarkManager

__all__ = [
    "CommitCarriedProvider",
    "DeltaMetadataProvider",
    "FileWatermarkProvider",
    "Keep",
    "WatermarkManager",
    "WatermarkProvider",
    "WatermarkReader",
    "WatermarkRecord",
    "commit_metadata_entry",
    "metadata_key",
]
