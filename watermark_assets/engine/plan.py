"""A run's plan, whatever the kind: what to read, how to write, what to record.

Every planner of the column engine (a column run above its watermark
``runs.column.plan_column_batch``, a replay chunk ``kinds.column.replay.plan_chunk``, a unit
``kinds.unit.run.plan_unit``, a time window ``kinds.time.run.plan_window``, a time x unit cell
``kinds.unit.grid_run.plan_cell``) returns one :class:`RunPlan` of four parts:

- :class:`ReadSlice`, what to read: where the read starts (``bound``: the watermark and ``>``
  or ``>=``), an exclusive ``upper`` bound on the leading column (a chunk's, a window's end),
  equalities on other columns (``within``: a cell's unit), and the rows already committed at the
  watermark's leading value (``boundary``: the read takes that value again and drops them); the
  predicate pushed to the source is built from it (:attr:`ReadSlice.predicate`);
- the :data:`~watermark_assets.engine.write.WriteMode`, how the ONE commit writes the rows;
- :class:`RecordPlan`, what the commit records beside the rows: its txns (the optimistic locks:
  the run's own first), the kind's own commitInfo entries (a replay's, a unit's record), what it
  does with the pipeline's column watermark (:class:`PipelineWatermark`: leaves it, advances it,
  or advances it with the boundary rows of a run above it) and whether a read of no row still
  commits (``records_completion``); it becomes the commit's
  :class:`~watermark_assets.engine.write.RunRecord`;
- :class:`PlannedOn`, what the run reports about where it started: the watermark it planned on,
  the provider that keeps it, and whether that provider's copy was repaired from the Delta log.

The plan says which kind of run it is only through these parts: a run above its watermark is the
one whose record advances the watermark with its boundary (:attr:`RecordPlan.records_boundary`),
nothing is inferred from the read's bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from watermark_assets.core.column.boundary import Boundary
from watermark_assets.core.column.lookback import ReadBound
from watermark_assets.core.column.predicate import (
    Predicate,
    SqlDialect,
    below,
    predicate,
    to_sql,
    within,
)
from watermark_assets.core.column.watermark import ColumnValue, ColumnWatermark, WatermarkOperator
from watermark_assets.core.text import value_text
from watermark_assets.delta.committer import TxnVersion
from watermark_assets.engine.write import WriteMode, mode_text

__all__ = ["PipelineWatermark", "PlannedOn", "PlannedRun", "ReadSlice", "RecordPlan", "RunPlan"]


@dataclass(frozen=True)
class ReadSlice:
    """What a run reads: the rows its predicate admits (module docstring)."""

    #: where the read starts: the watermark (or a look-back's start) and ``>`` or ``>=``
    bound: ReadBound
    #: an exclusive upper bound on the leading column (a replay chunk's, a window's end): the
    #: read takes ``< upper``; None: no upper bound (a run above its watermark, a unit)
    upper: ColumnWatermark | None = None
    #: equalities on other columns every row read meets (a time x unit cell's unit), added to
    #: the predicate (:func:`~watermark_assets.core.column.predicate.within`)
    within: tuple[tuple[str, ColumnValue], ...] = ()
    #: the rows committed at the watermark's leading value, when the read includes that value
    #: and deduplicates them; None: the read is strictly above it, or behind it (a look-back)
    boundary: Boundary | None = None

    @property
    def predicate(self) -> Predicate:
        read = predicate(self.bound.watermark, self.bound.operator)
        if self.upper is not None:
            read = below(read, self.upper.columns[0], self.upper.values[0])  # type: ignore[arg-type]
        for column, value in self.within:
            read = within(read, column, value)
        return read

    @property
    def operator(self) -> WatermarkOperator:
        return self.bound.operator

    @property
    def predicate_text(self) -> str:
        """The predicate as Spark SQL (``TRUE``: no watermark yet, everything is read)."""
        return to_sql(self.predicate, SqlDialect.SPARK)


class PipelineWatermark(Enum):
    """What a run's commit does with the pipeline's column watermark."""

    #: the commit carries none and the provider saves nothing (time, unit and cell runs: their
    #: state travels in their own entries; a replay that must not touch production)
    UNTOUCHED = "untouched"
    #: the commit carries the watermark after the run, the provider saves it after the commit
    #: (a ``save_watermark: true`` replay chunk into the pipeline's own table)
    ADVANCED = "advanced"
    #: :attr:`ADVANCED`, with the rows the run staged at its leading value (the boundary the
    #: next run deduplicates by): a run above its watermark; the NULL watermark rows of its
    #: source are handled as configured, and a read of no new row commits nothing
    ADVANCED_ABOVE = "advanced_above"


@dataclass(frozen=True)
class RecordPlan:
    """What the run's commit records beside its rows (:class:`~watermark_assets.engine.write.
    RunRecord` once the rows are staged: the watermark entry and the lineage are known then)."""

    #: one per app id, each the version the planner read (the optimistic locks); the run's own
    #: first, then e.g. the pipeline's txn a replay into the pipeline's own table carries too
    txns: tuple[TxnVersion, ...]
    #: the kind's own commitInfo entries (a replay chunk's record and saved bound, a unit's
    #: watermark and record, a window's or cell's state entry)
    entries: Mapping[str, str] = field(default_factory=dict)
    watermark: PipelineWatermark = PipelineWatermark.UNTOUCHED
    #: True: a read of no row still commits its txns and entries (a window, a unit, a
    #: ``save_watermark: true`` replay chunk records its completion in the log)
    records_completion: bool = False

    @property
    def txn(self) -> TxnVersion:
        """The run's own txn (its optimistic lock)."""
        return self.txns[0]

    @property
    def saves_watermark(self) -> bool:
        """Whether the commit carries the pipeline's watermark (and its provider saves it)."""
        return self.watermark is not PipelineWatermark.UNTOUCHED

    @property
    def records_boundary(self) -> bool:
        """Whether the commit records the rows at its watermark's leading value: a run above
        its watermark (not a replay chunk, a unit or a window)."""
        return self.watermark is PipelineWatermark.ADVANCED_ABOVE


@dataclass(frozen=True)
class PlannedOn:
    """Where the run started, as it reports it: the pipeline's column watermark it planned on
    (empty for a run that keeps none: a window, a unit, a replay chunk), the provider keeping
    it, and whether the provider's copy was behind the Delta log (a run killed before its save)
    and repaired."""

    watermark: ColumnWatermark
    provider: str
    repaired_from_log: bool = False


@dataclass(frozen=True)
class RunPlan:
    """One run's plan (module docstring): what to read, how to write, what to record, and where
    it started."""

    read: ReadSlice
    mode: WriteMode
    record: RecordPlan
    planned_on: PlannedOn

    def planned(self, partition: str | None, watermark: str, *notes: str) -> PlannedRun:
        """This plan as ``watermark-assets plan`` shows it: ``watermark``, the kind's watermark
        the run starts from, in words (a window's or unit's plan keeps no column watermark)."""
        boundary = self.read.boundary
        if boundary is not None and boundary.hashes is not None:
            notes = (
                f"the {len(boundary.hashes)} rows committed at {boundary.column}="
                f"{value_text(boundary.value)} are read again and left out",
                *notes,
            )
        return PlannedRun(
            partition=partition,
            watermark=watermark,
            reads=f"the rows where {self.read.predicate_text}",
            writes=mode_text(self.mode),
            notes=notes,
        )


@dataclass(frozen=True)
class PlannedRun:
    """What one run would do, planned on the state as it is now, every kind alike
    (``watermark-assets plan``, the contract's ``plan``): planning reads the watermark, the
    Delta log and (for files) the listing above the watermark; it reads no row, starts no Spark
    and writes nothing."""

    #: the partition the run covers (None: the asset has no partitions, or the run covers the
    #: whole selection at once)
    partition: str | None
    #: the watermark the run starts from, in words
    watermark: str
    #: what it would read: a predicate, files, or upstream versions
    reads: str
    #: how its ONE commit would write
    writes: str
    #: more to say (files listed, what a run would skip or repair), one sentence each
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "partition": self.partition,
            "watermark": self.watermark,
            "reads": self.reads,
            "writes": self.writes,
            "notes": list(self.notes),
        }

    def lines(self) -> list[str]:
        """The plan as indented lines under its partition."""
        head = "(whole asset)" if self.partition is None else f"partition {self.partition}"
        return [
            f"{head}:",
            f"  watermark: {self.watermark}",
            f"  reads:     {self.reads}",
            f"  writes:    {self.writes}",
            *(f"  note:      {note}" for note in self.notes),
        ]
