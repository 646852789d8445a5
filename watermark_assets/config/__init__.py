"""The one configuration file: pipelines declared in YAML, validated with pydantic.

A package, one module per concern (docs/design.md, "One pipeline model"):

- ``loader.py``: reading the file (``${VAR}``, relative paths, legacy spellings, accepted types)
  and ``problems.py``: pydantic's errors as one block per problem;
- ``base.py``: what every model is (strict, frozen), pipeline names;
- ``shared.py``: the shapes every kind shares, one model each (table, partitions, sensor,
  checkpoint, backfill, ``freshness``, ``automation_condition``) and "a naive instant is UTC";
- ``storage.py``: the ``storage:`` block; ``spark.py``: the ``spark:`` block;
- one module per watermark kind: ``file_path.py``, ``column.py``, ``time.py``, ``unit.py``,
  ``event_time.py``; ``project.py``: the whole file and the union over the kinds;
- ``sources.py`` and ``providers.py``: the sources' and watermark providers' models, declarative;
  what they do is in ``sources/`` and ``providers/``, which register their builders in
  ``registry.py``.

Everything is re-exported here: ``from watermark_assets.config import X`` is the import to use.
"""

from __future__ import annotations

from watermark_assets.config.base import (
    Model,
    pipeline_name,
)
from watermark_assets.config.column import (
    BackwardConfig,
    ColumnPipelineConfig,
    ColumnWatermarkConfig,
    DestinationConfig,
    ReplayChunkConfig,
    ReplayConfig,
)
from watermark_assets.config.event_time import (
    EVENT_TIME_SOURCE_TYPES,
    EventTimePartitionsConfig,
    EventTimePipelineConfig,
)
from watermark_assets.config.file_path import (
    ColdStartConfig,
    FilePathWatermarkConfig,
    FilePipelineConfig,
    SweepConfig,
)
from watermark_assets.config.loader import (
    CONFIG_ENV_VAR,
    DEFAULT_CONFIG_PATH,
    ConfigDeprecationWarning,
    interpolate_env,
    load_config,
    parse_config,
)
from watermark_assets.config.problems import (
    did_you_mean,
    problems_of,
)
from watermark_assets.config.project import (
    WATERMARK_KINDS,
    AnyPipeline,
    Pipeline,
    PipelineConfig,
    ProjectConfig,
    source_folder,
)
from watermark_assets.config.providers import (
    DeltaMetadataProviderConfig,
    FileProviderConfig,
    PostgresProviderConfig,
    ProviderConfig,
)
from watermark_assets.config.shared import (
    AutomationSetting,
    BackfillConfig,
    CheckpointConfig,
    ColumnTableConfig,
    DeltaTableConfig,
    Freshness,
    FreshnessConfig,
    Granularity,
    OnCronConfig,
    PartitionsConfig,
    SensorConfig,
    TableConfig,
    iso_instant_text,
    utc_instant,
    yaml_instant_text,
)
from watermark_assets.config.sources import (
    COLUMN_SOURCE_TYPES,
    FILE_SOURCE_TYPES,
    FOLDER_SOURCES,
    TIME_SOURCE_TYPES,
    ColumnSourceConfig,
    CsvSourceConfig,
    DeltaTableSecondaryInputConfig,
    DeltaTableSourceConfig,
    FileDownloadSourceConfig,
    FileSecondaryInputConfig,
    FileSourceConfig,
    HttpApiSourceConfig,
    JdbcSourceConfig,
    JsonSourceConfig,
    LandingFilesSourceConfig,
    NextLinkPaginationConfig,
    PageNumberPaginationConfig,
    PaginationConfig,
    ParquetCommitSourceConfig,
    ParquetSourceConfig,
    PostgresSecondaryInputConfig,
    SecondaryInputConfig,
    SourceFormat,
)
from watermark_assets.config.spark import (
    SparkConfig,
)
from watermark_assets.config.storage import (
    StorageConfig,
)
from watermark_assets.config.time import (
    TimePipelineConfig,
    TimeScheduleConfig,
    TimeWatermarkConfig,
)
from watermark_assets.config.unit import (
    UNIT_PLACEHOLDER,
    UnitPipelineConfig,
    UnitSensorConfig,
    UnitWatermarkConfig,
)
from watermark_assets.core.column.lookback import (
    Backward,
)
from watermark_assets.core.errors import (
    LookbackError,
    UnitIdError,
)
from watermark_assets.core.filepath.path import (
    NameOrdering,
)
from watermark_assets.core.filepath.timeparts import (
    PartitionTemplate,
)
from watermark_assets.exceptions import (
    ConfigError,
    PartitionTemplateError,
)
from watermark_assets.spark.ddl import (
    parse_read_schema,
)

__all__ = [
    "COLUMN_SOURCE_TYPES",
    "CONFIG_ENV_VAR",
    "DEFAULT_CONFIG_PATH",
    "EVENT_TIME_SOURCE_TYPES",
    "FILE_SOURCE_TYPES",
    "FOLDER_SOURCES",
    "TIME_SOURCE_TYPES",
    "UNIT_PLACEHOLDER",
    "WATERMARK_KINDS",
    "AnyPipeline",
    "AutomationSetting",
    "BackfillConfig",
    "Backward",
    "BackwardConfig",
    "CheckpointConfig",
    "ColdStartConfig",
    "ColumnPipelineConfig",
    "ColumnSourceConfig",
    "ColumnTableConfig",
    "ColumnWatermarkConfig",
    "ConfigDeprecationWarning",
    "ConfigError",
    "CsvSourceConfig",
    "DeltaMetadataProviderConfig",
    "DeltaTableConfig",
    "DeltaTableSecondaryInputConfig",
    "DeltaTableSourceConfig",
    "DestinationConfig",
    "EventTimePartitionsConfig",
    "EventTimePipelineConfig",
    "FileDownloadSourceConfig",
    "FilePathWatermarkConfig",
    "FilePipelineConfig",
    "FileProviderConfig",
    "FileSecondaryInputConfig",
    "FileSourceConfig",
    "Freshness",
    "FreshnessConfig",
    "Granularity",
    "HttpApiSourceConfig",
    "JdbcSourceConfig",
    "JsonSourceConfig",
    "LandingFilesSourceConfig",
    "LookbackError",
    "Model",
    "NameOrdering",
    "NextLinkPaginationConfig",
    "OnCronConfig",
    "PageNumberPaginationConfig",
    "PaginationConfig",
    "ParquetCommitSourceConfig",
    "ParquetSourceConfig",
    "PartitionTemplate",
    "PartitionTemplateError",
    "PartitionsConfig",
    "Pipeline",
    "PipelineConfig",
    "PostgresProviderConfig",
    "PostgresSecondaryInputConfig",
    "ProjectConfig",
    "ProviderConfig",
    "ReplayChunkConfig",
    "ReplayConfig",
    "SecondaryInputConfig",
    "SensorConfig",
    "SourceFormat",
    "SparkConfig",
    "StorageConfig",
    "SweepConfig",
    "TableConfig",
    "TimePipelineConfig",
    "TimeScheduleConfig",
    "TimeWatermarkConfig",
    "UnitIdError",
    "UnitPipelineConfig",
    "UnitSensorConfig",
    "UnitWatermarkConfig",
    "did_you_mean",
    "interpolate_env",
    "iso_instant_text",
    "load_config",
    "parse_config",
    "parse_read_schema",
    "pipeline_name",
    "problems_of",
    "source_folder",
    "utc_instant",
    "yaml_instant_text",
]
