"""Where a column watermark is kept: Delta commit metadata (default), a file, PostgreSQL.

The PostgreSQL provider is imported from ``watermark_assets.providers.postgres`` (it needs psycopg).
The providers' models are declarative (``config/providers.py``); this package registers how each
``type`` is built (``config/registry.py``).
"""

from __future__ import annotations

from typing import Any

from watermark_assets.config.registry import register
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


def _postgres(config: Any, table_uri: str, pipeline: str | None = None) -> WatermarkProvider:
    # imported here: psycopg is needed by this provider only
    from watermark_assets.providers.postgres import PostgresWatermarkProvider

    return PostgresWatermarkProvider(config.conninfo, table=config.table, schema=config.db_schema)


# (model, the pipeline's table URI, the pipeline's name)
register(
    "provider",
    "delta_metadata",
    lambda config, table_uri, pipeline=None: DeltaMetadataProvider(table_uri, pipeline=pipeline),
)
register(
    "provider", "file", lambda config, table_uri, pipeline=None: FileWatermarkProvider(config.uri)
)
register("provider", "postgres", _postgres)

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
