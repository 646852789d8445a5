"""What the column engine (:mod:`watermark_assets.runs.column`) needs of a pipeline: a plain value.

The column, replay, time, unit and time x unit runs all read through the one column engine
(plan, stage, ONE commit). Each kind's run module builds a :class:`ColumnSpec` from its own
configuration, as written: nothing builds or rewrites a configuration at run time (issue 23 §3).
What differs per unit (an HTTP API's ``{unit}`` URL, its unit parameter) is the source
strategy's answer to :meth:`~watermark_assets.sources.column.ReadsUnits.for_unit`; where a
``file_download`` source writes its downloads is the time pipeline's ``source.staging_uri``,
filled in when the configuration is loaded. A replay into another ``target_table`` writes a
:class:`ReplayTable` (:meth:`ColumnSpec.replaying`): the pipeline's configuration is left as it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from watermark_assets import names
from watermark_assets.config import (
    ColumnPipelineConfig,
    ColumnSourceConfig,
    ColumnTableConfig,
    ColumnWatermarkConfig,
    TimePipelineConfig,
    UnitPipelineConfig,
)
from watermark_assets.config.schema import SchemaPolicy
from watermark_assets.core.column.replay import ReplayRange
from watermark_assets.sources.column import ColumnSource, ReadsUnits, UnitRead

#: ``watermark.null_watermark`` of a run without a column watermark of its own (time and unit
#: runs read windows and units, whose NULL rows go where a column pipeline's default sends them)
_DEFAULT_NULL_WATERMARK = ColumnWatermarkConfig.model_fields["null_watermark"].default


@dataclass(frozen=True)
class ReplayTable:
    """The table a replay with another ``replay.target_table`` writes: that URI, partitioned as
    the pipeline's own table, its quarantine next to it."""

    uri: str
    partition_by: tuple[str, ...]

    @property
    def quarantine(self) -> str:
        """The replay table's quarantine: its URI + ``_quarantine``."""
        return names.quarantine_table(self.uri)


@dataclass(frozen=True, kw_only=True)
class ColumnSpec:
    """One pipeline as the column engine reads and writes it."""

    #: the pipeline's name: its txn app ids, its commitInfo keys, the watermark's dataflow id
    name: str
    #: the source as configured
    source: ColumnSourceConfig
    #: the columns the read orders and filters on: a column pipeline's watermark columns, a time
    #: pipeline's time column, a unit pipeline's unit column
    columns: tuple[str, ...]
    #: the target table as configured; a replay into another table writes that one instead
    table: ColumnTableConfig | ReplayTable
    #: what a read does when the rows' schema changes (``schema:``)
    schema_policy: SchemaPolicy
    #: a column pipeline's ``table.merge_keys`` (a run upserts on them); windowed runs leave them
    #: to their windows' commit (``runs/window_commit``) and replace here
    merge_keys: tuple[str, ...] = ()
    #: ``destination.replace_by_watermark``: the range read is replaced in the one commit
    replace_by_watermark: bool = False
    #: a column pipeline's watermark settings (provider, look-back, lag, NULL rows); None for
    #: time and unit runs, which keep their own state and never look back
    watermark: ColumnWatermarkConfig | None = None
    #: the unit a unit or time x unit run reads (None: no unit)
    unit: UnitRead | None = None

    @classmethod
    def of(cls, pipeline: ColumnPipelineConfig) -> ColumnSpec:
        """A column pipeline's spec: its configuration, field by field."""
        return cls(
            name=pipeline.name,
            source=pipeline.source,
            columns=tuple(pipeline.watermark.columns),
            table=pipeline.table,
            schema_policy=pipeline.schema_policy,
            merge_keys=tuple(pipeline.table.merge_keys),
            replace_by_watermark=pipeline.destination.replace_by_watermark,
            watermark=pipeline.watermark,
        )

    @classmethod
    def replaying(cls, pipeline: ColumnPipelineConfig, replay: ReplayRange) -> ColumnSpec:
        """A replay's spec: the column pipeline's (:meth:`of`), writing ``replay.target_table``
        when that is another table than the pipeline's own."""
        spec = cls.of(pipeline)
        if replay.target_table is None or pipeline.replays_own_table(replay):
            return spec
        table = ReplayTable(replay.target_table, tuple(pipeline.table.partition_by))
        return dataclasses.replace(spec, table=table)

    @classmethod
    def replacing(
        cls,
        pipeline: TimePipelineConfig | UnitPipelineConfig,
        columns: Sequence[str],
        unit: UnitRead | None = None,
    ) -> ColumnSpec:
        """The spec of a time, unit or cell run: ``columns`` read, each window, unit or cell
        replaced; the pipeline's ``table.merge_keys`` are its windows' commit's own
        (``runs/window_commit``), not the engine's."""
        return cls(
            name=pipeline.name,
            source=pipeline.source,
            columns=tuple(columns),
            table=pipeline.table,
            schema_policy=pipeline.schema_policy,
            replace_by_watermark=True,
            unit=unit,
        )

    @property
    def dataflow_id(self) -> str:
        """The watermark's key in its provider: the pipeline name."""
        return self.name

    @property
    def null_watermark(self) -> str:
        """``watermark.null_watermark``: what a run does with rows whose column is NULL."""
        return _DEFAULT_NULL_WATERMARK if self.watermark is None else self.watermark.null_watermark

    @property
    def reads_behind(self) -> bool:
        """Whether the read starts below the watermark (a look-back or lag)."""
        return self.watermark is not None and self.watermark.reads_behind

    @property
    def column_watermark(self) -> ColumnWatermarkConfig:
        """The column pipeline's watermark settings; a time or unit run has none (its plan
        never asks: it reads a window or a unit, not above a stored column watermark)."""
        if self.watermark is None:
            raise TypeError(f"{self.name!r} is no column pipeline: it has no column watermark")
        return self.watermark

    def build_source(self) -> ColumnSource:
        """The source strategy over :attr:`columns`, told the run's unit when it reads one."""
        source: ColumnSource = self.source.build(self.name, self.columns)
        if self.unit is not None and isinstance(source, ReadsUnits):
            return source.for_unit(self.unit)
        return source
