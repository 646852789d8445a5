"""How each kind of pipeline summarises itself: one row of ``watermark-assets summary``.

File-path pipelines have a table of their own (:class:`SummaryRow`, :data:`SUMMARY_HEADERS`);
every other kind shares one (:class:`PartitionedRow`, :data:`PARTITIONED_HEADERS`). The registry
(``kinds/__init__.py``) names the function of each kind; ``cli.py`` prints the rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watermark_assets.config import (
    ColumnPipelineConfig,
    EventTimePipelineConfig,
    Pipeline,
    ProjectConfig,
    TimePipelineConfig,
    UnitPipelineConfig,
)
from watermark_assets.core.clock import system_clock
from watermark_assets.delta.schema_summary import SchemaSummary, schema_summary


@dataclass(frozen=True)
class SummaryRow:
    pipeline: str
    partitions: int
    files: int
    rows: int
    quarantined: int
    watermark: str
    state: str
    delta_version: str
    #: what is wrong with the pipeline (its landing folder does not exist), else None
    problem: str | None = None
    #: its schema: mode, columns, last evolution (``schema`` column, ``explain``'s schema line)
    schema: SchemaSummary | None = None


def summarize(pipeline: Pipeline) -> SummaryRow:
    """One summary row, read from the state (checkpoint + the commits after it: its running
    totals survive Delta's log cleanup) and the tables' statistics (rows now); a pipeline whose
    landing folder does not exist is in state ``ERROR``, its ``problem`` says why and how to fix
    it."""
    from watermark_assets.delta.log import table_row_count
    from watermark_assets.sources.locations import missing_source
    from watermark_assets.state.load import load_state

    missing = missing_source(pipeline)
    state = load_state(pipeline, now=system_clock())
    quarantined = table_row_count(pipeline.table.quarantine) or 0
    return SummaryRow(
        pipeline=pipeline.name,
        partitions=state.totals.partitions,
        files=state.totals.files,
        rows=table_row_count(pipeline.table.uri) or 0,
        quarantined=quarantined,
        watermark=state.watermark.value or "-",
        state="ERROR: no landing folder" if missing else state.watermark.state.value,
        delta_version="-" if state.delta_version is None else str(state.delta_version),
        problem=None if missing is None else str(missing),
        schema=_schema(pipeline),
    )


#: The columns of the file pipelines' summary (the docs' sample outputs are checked against them).
SUMMARY_HEADERS = (
    "pipeline",
    "partitions",
    "files",
    "rows",
    "quarantined",
    "watermark",
    "state",
    "delta version",
    "schema",
)


@dataclass(frozen=True)
class PartitionedRow:
    """One summary row of a time or unit pipeline, read from its table's Delta log."""

    pipeline: str
    kind: str
    #: partitions with a committed run / all partitions (a dynamic unit list: the ones done)
    partitions: str
    rows: int
    #: time: the highest high watermark; unit: the latest done-at
    watermark: str
    #: time: the effective cut-off and how it was computed; unit: "-"
    cut_off: str
    delta_version: str
    #: its schema: mode, columns, last evolution (``schema`` column, ``explain``'s schema line)
    schema: SchemaSummary | None = None

    def cells(self) -> list[str]:
        return [
            self.pipeline,
            self.kind,
            self.partitions,
            str(self.rows),
            self.watermark,
            self.cut_off,
            self.delta_version,
            schema_cell(self.schema),
        ]


PARTITIONED_HEADERS = (
    "pipeline",
    "kind",
    "partitions done",
    "rows",
    "high watermark / done at",
    "cut-off",
    "delta version",
    "schema",
)


def _schema(pipeline: Any) -> SchemaSummary:
    """Any kind's pipeline's schema summary: its table's, under its ``schema.mode``."""
    return schema_summary(pipeline.table.uri, pipeline.schema_policy.mode.value)


def schema_cell(schema: SchemaSummary | None) -> str:
    """The ``schema`` column of a summary row (``-``: not known)."""
    return "-" if schema is None else schema.cell()


def summarize_time(pipeline: TimePipelineConfig) -> PartitionedRow:
    """Windows with a high watermark, the highest one and the cut-off it gives now."""
    from watermark_assets.core.text import time_text
    from watermark_assets.core.time import windows
    from watermark_assets.delta.log import table_row_count
    from watermark_assets.runs.time import load_time_watermark

    now = system_clock()
    spec = pipeline.watermark.spec
    watermark, version = load_time_watermark(pipeline)
    highest = watermark.highest
    every = windows(spec, now)
    return PartitionedRow(
        pipeline=pipeline.name,
        kind=f"time ({spec.partitioning.value})",
        partitions=f"{watermark.count_with_history(every)}/{len(every)}",
        rows=table_row_count(pipeline.table.uri) or 0,
        watermark="-" if highest is None else time_text(highest),
        cut_off=str(watermark.cut_off(spec, now)),
        delta_version="-" if version is None or version < 0 else str(version),
        schema=_schema(pipeline),
    )


def summarize_unit(pipeline: UnitPipelineConfig) -> PartitionedRow:
    """Units with a committed run (of the explicit ones) and the latest done-at."""
    from watermark_assets.core.text import time_text
    from watermark_assets.delta.committer import committer_for
    from watermark_assets.delta.log import table_row_count
    from watermark_assets.runs.unit import load_unit_watermark

    version = committer_for(pipeline.table).current_version()
    done: dict[str, Any] = {}
    if version is not None:
        units = load_unit_watermark(pipeline.table.uri, pipeline.name).units
        done = {u: d for u, d in units.items() if d is not None}
    explicit = pipeline.watermark.explicit_units
    latest = max((d.when for d in done.values()), default=None)
    return PartitionedRow(
        pipeline=pipeline.name,
        kind="unit (explicit)" if explicit is not None else "unit (secondary input)",
        partitions=f"{len(done)}/{len(explicit)}" if explicit is not None else str(len(done)),
        rows=table_row_count(pipeline.table.uri) or 0,
        watermark="-" if latest is None else time_text(latest),
        cut_off="-",
        delta_version="-" if version is None else str(version),
        schema=_schema(pipeline),
    )


def summarize_grid(pipeline: UnitPipelineConfig) -> PartitionedRow:
    """Time x unit: cells with a high watermark out of the known units' cells, the highest high
    watermark, and each unit's cut-off when they agree (else how many differ)."""
    from watermark_assets.core.text import time_text
    from watermark_assets.core.time import windows
    from watermark_assets.delta.committer import committer_for
    from watermark_assets.delta.log import table_row_count
    from watermark_assets.runs.time_unit import load_grid_watermark

    assert pipeline.watermark.time is not None, "a time x unit pipeline"
    now = system_clock()
    spec = pipeline.watermark.time.spec
    version = committer_for(pipeline.table).current_version()
    grid = load_grid_watermark(pipeline)
    known = pipeline.watermark.explicit_units or tuple(grid.units)
    cut = windows(spec, now)
    inner = {u: grid.units.get(u) for u in known}
    done = sum(w.count_with_history(cut) for w in inner.values() if w is not None)
    highest = max((h for w in inner.values() if w and (h := w.highest)), default=None)
    cut_offs = {str(w.cut_off(spec, now)) for w in inner.values() if w is not None}
    return PartitionedRow(
        pipeline=pipeline.name,
        kind=f"time ({spec.partitioning.value}) x unit",
        partitions=f"{done}/{len(cut) * len(known)} cells",
        rows=table_row_count(pipeline.table.uri) or 0,
        watermark="-" if highest is None else time_text(highest),
        cut_off=cut_offs.pop() if len(cut_offs) == 1 else f"{len(cut_offs)} per unit",
        delta_version="-" if version is None else str(version),
        schema=_schema(pipeline),
    )


def summarize_event_time(
    config: ProjectConfig, pipeline: EventTimePipelineConfig
) -> PartitionedRow:
    """An event-time pipeline's row: the partitions its watermark closed, the windows emitted,
    the watermark, and the late records kept."""
    from watermark_assets.core.text import millis_text
    from watermark_assets.core.time.instant import to_millis
    from watermark_assets.defs.event_time import (
        closed_through,
        event_time_partitions,
        window_engine,
    )
    from watermark_assets.delta.committer import committer_for
    from watermark_assets.delta.log import table_row_count

    engine = window_engine(pipeline, config)
    spec = engine.spec
    watermark = engine.committed()
    partitions = event_time_partitions(pipeline)
    keys = partitions.get_partition_keys(current_time=system_clock())
    closed_by = closed_through(spec, watermark.watermark_ms)
    closed = sum(
        1 for k in keys if to_millis(partitions.time_window_for_partition_key(k).end) <= closed_by
    )
    late = f"{table_row_count(spec.late_uri) or 0} late records kept in {Path(spec.late_uri).name}"
    version = committer_for(spec.output_uri).current_version()
    return PartitionedRow(
        pipeline=pipeline.name,
        kind=f"event time ({pipeline.partitions.granularity}, {engine.name})",
        partitions=f"{closed}/{len(keys)} closed",
        rows=table_row_count(spec.output_uri) or 0,
        watermark="-" if not watermark.watermark_ms else millis_text(watermark.watermark_ms),
        cut_off=late,
        delta_version="-" if version is None else str(version),
        schema=_schema(pipeline),
    )


def summarize_column(pipeline: ColumnPipelineConfig) -> PartitionedRow:
    """A column pipeline's row: the watermark its provider keeps (``delta_metadata``: the state
    store of its table)."""
    import watermark_assets.providers  # noqa: F401  (registers the providers' builders)
    from watermark_assets.delta.committer import committer_for
    from watermark_assets.delta.log import table_row_count

    provider = pipeline.watermark.provider
    record = provider.build(pipeline.table.uri, pipeline.name).get_record(pipeline.dataflow_id)
    version = committer_for(pipeline.table).current_version()
    return PartitionedRow(
        pipeline=pipeline.name,
        kind=f"column ({provider.type})",
        partitions="-",
        rows=table_row_count(pipeline.table.uri) or 0,
        watermark="-" if record is None or not record.watermark else _column_text(record.watermark),
        cut_off="-",
        delta_version="-" if version is None else str(version),
        schema=_schema(pipeline),
    )


def _column_text(stored: str) -> str:
    """A column watermark as the provider stores it (JSON with the state's sentinels), said as a
    person reads it: ``updated_at=2024-01-31T00:59:49Z, id=8973``; text that is no column
    watermark as it is."""
    from watermark_assets.core.column.watermark import ColumnWatermark
    from watermark_assets.core.errors import WatermarkJSONError

    try:
        return str(ColumnWatermark.from_json(stored))
    except WatermarkJSONError:
        return stored
