"""Sources as strategies: where rows come from and how a watermark's predicate reaches them.

Each column source (``table``: Delta, Parquet, CSV, JSON; ``jdbc``; ``http_api``;
``file_download``) implements :class:`watermark_assets.sources.column.ColumnSource`; the file-path
sources (landing files through Spark, another writer's Parquet files committed in place)
implement :class:`watermark_assets.sources.files.FileSource`.

Their models are declarative (``config/sources.py``); this package registers, for each ``type``,
how the strategy is built from its model (``config/registry.py``): one line per type below.
"""

from __future__ import annotations

from typing import Any

from watermark_assets.config.registry import register
from watermark_assets.exceptions import SecondaryInputError
from watermark_assets.sources.file_download import file_download_source
from watermark_assets.sources.http_api import http_api_source
from watermark_assets.sources.jdbc import jdbc_source
from watermark_assets.sources.landing_files import LandingFilesSource
from watermark_assets.sources.parquet_commit import ParquetCommitSource
from watermark_assets.sources.secondary_input import DeltaTableInput, FileInput, PostgresInput
from watermark_assets.sources.table import CsvJsonSource, DeltaTableSource, ParquetFilesSource


def _postgres_input(config: Any) -> PostgresInput:
    try:
        return PostgresInput(
            conninfo=config.conninfo,
            fields=tuple(config.fields),
            table=config.table,
            schema=config.db_schema,
            query=config.query,
        )
    except SecondaryInputError as error:
        raise ValueError(str(error)) from None


# file-path pipelines: (model, pipeline)
register("file_source", "files", lambda config, pipeline: LandingFilesSource(pipeline, config))
register("file_source", "parquet_commit", lambda config, pipeline: ParquetCommitSource(pipeline))
# column, time and unit pipelines: (model, pipeline name, watermark columns)
register(
    "column_source",
    "delta_table",
    lambda config, name, columns: DeltaTableSource(name, config.uri, config.storage_options),
)
register(
    "column_source", "parquet", lambda config, name, columns: ParquetFilesSource(name, config.uri)
)
register(
    "column_source",
    "csv",
    lambda config, name, columns: CsvJsonSource(
        name, config.uri, "csv", config.schema_ddl, config.options
    ),
)
register(
    "column_source",
    "json",
    lambda config, name, columns: CsvJsonSource(
        name, config.uri, "json", config.schema_ddl, config.options
    ),
)
register("column_source", "jdbc", jdbc_source)
register("column_source", "http_api", http_api_source)
register("column_source", "file_download", file_download_source)
# unit pipelines' id listings: (model,)
register(
    "secondary_input",
    "file",
    lambda config: FileInput(path=config.path, fields=tuple(config.fields), format=config.format),
)
register(
    "secondary_input",
    "delta_table",
    lambda config: DeltaTableInput(uri=config.uri, fields=tuple(config.fields)),
)
register("secondary_input", "postgres", _postgres_input)
