"""One run of a column pipeline, from the stored watermark to ONE Delta commit (no Dagster).

- :func:`plan_column_batch`: read the pipeline's txn version (the optimistic lock), then the
  watermark through the :class:`~watermark_assets.providers.WatermarkManager` (empty: read
  everything), then where the read starts (:func:`read_bound`: the watermark with ``>``, or a
  look-back/lag start with ``>=`` on the leading column).
- :func:`stage_column_batch`: the source reads the rows the predicate admits (pushed down where the
  source can), :func:`~watermark_assets.sources.column.stage_rows` writes them as Parquet under
  ``{table}/_staging/{token}`` and observes the next watermark during that one write.
- :func:`commit_column_batch`: the staged files are moved into the table and committed with a txn
  ``watermark_assets/{pipeline}/column`` (the version read when planning: a concurrent run of the
  same pipeline makes the outcome stale, and the run plans and reads again, at most
  ``MAX_COMMIT_ATTEMPTS`` times: :func:`~watermark_assets.engine.execute.execute`, whose
  :func:`~watermark_assets.engine.execute.commit_reads` builds the commit). Append, or with
  ``destination.replace_by_watermark`` a replace of the window read
  (:mod:`watermark_assets.delta.replace`), or with ``table.merge_keys`` an upsert
  on the keys (:mod:`watermark_assets.delta.merge`; staging kept one row per key), all ONE commit.

Where the watermark is saved: the ``delta_metadata`` provider puts it in that same commit (data and
progress atomic). ``file`` and ``postgres`` save it after the commit succeeded
(``WatermarkManager.commit_then_save``): a failing commit saves nothing. Every commit also carries
the watermark in its commit metadata (``providers.delta_metadata.commit_metadata_entry``), so a run
killed between the commit and the provider's save is repaired by the next plan: the log's
watermark wins over an older stored one, and is saved to the provider then. Consequence: lowering a
file/postgres watermark by hand does not re-read rows that a commit already holds (the log is the
truth); replay is the way to re-read.

Crash points (``runs.faults.crash_point``, for the exactly-once tests): ``after_data_written``
once the staged files exist, ``after_commit`` right after the Delta commit, before a provider save.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from watermark_assets import names, storage
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.core.column.boundary import MAX_BOUNDARY_ROWS, Boundary
from watermark_assets.core.column.lookback import ReadBound, effective_lower_bound
from watermark_assets.core.column.predicate import (
    Predicate,
)
from watermark_assets.core.column.watermark import ColumnWatermark, WatermarkOperator
from watermark_assets.core.replace_window import Interval, ReplaceWindow
from watermark_assets.delta.committer import CommitOutcome, TxnVersion, committer_for
from watermark_assets.delta.merge import MergePlan
from watermark_assets.delta.rewrite import RewritePlan
from watermark_assets.delta.schema_change import SchemaEvolution
from watermark_assets.engine.execute import (
    StagedRead,
    Stale,
    commit_reads,
    execute,
)
from watermark_assets.engine.plan import (
    PipelineWatermark,
    PlannedOn,
    ReadSlice,
    RecordPlan,
    RunPlan,
)
from watermark_assets.engine.write import (
    Append,
    Merge,
    Region,
    Replace,
    WriteMode,
    Written,
    region_json,
)
from watermark_assets.exceptions import MergeKeyError
from watermark_assets.providers.base import WatermarkRecord
from watermark_assets.providers.delta_metadata import (
    DeltaMetadataProvider,
    commit_metadata_entry,
    with_boundary,
)
from watermark_assets.providers.manager import WatermarkManager
from watermark_assets.runs.column_quarantine import quarantine_malformed, quarantine_null_watermark
from watermark_assets.runs.column_spec import ColumnSpec
from watermark_assets.runs.faults import crash_point
from watermark_assets.sources.column import (
    BoundaryRead,
    ColumnRead,
    ReadsNullRows,
    ReadsUnderSchema,
    StagedRows,
    any_null,
    boundary_hashes,
    count_nulls,
    row_hash,
    stage_rows,
)
from watermark_assets.sources.column_schema import (
    ColumnSchemaRead,
    apply_schema_policy,
    declared_columns,
)
from watermark_assets.staging import (
    list_parquet,
    remove_stale_staging,
    remove_tree,
    staging_dir,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The commitInfo entry of every column-pipeline commit: what the run read and wrote (the checks
#: and the UI read it back from the log).
RUN_METADATA_KEY = names.COLUMN_RUN_KEY


#: The txn app id of a column pipeline: one per pipeline (its watermark is the pipeline's).
txn_app_id = names.column_app_id


def watermark_manager(pipeline: ColumnSpec) -> WatermarkManager:
    """The manager over the column pipeline's configured provider."""
    provider = pipeline.column_watermark.provider
    return WatermarkManager(provider.build(pipeline.table.uri, pipeline.name))


@dataclass(frozen=True, kw_only=True)
class ColumnRunRequest:
    """What one run was asked to do, taken from the Dagster context once, at the edge.

    ``pipeline``: what the run reads and writes (:class:`ColumnSpec`, built by the kind's run
    module); a column pipeline's configuration is taken as its spec (:meth:`ColumnSpec.of`)."""

    pipeline: ColumnSpec
    run_id: str
    job_name: str | None = None
    clock: Clock = field(default=system_clock, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.pipeline, ColumnSpec):  # a column pipeline's configuration
            object.__setattr__(self, "pipeline", ColumnSpec.of(self.pipeline))


@dataclass(frozen=True, kw_only=True)
class ColumnPlan(RunPlan):
    """A run of the column engine: its request and its :class:`~watermark_assets.engine.plan.
    RunPlan` (what to read, how to write, what to record, where it started). The properties
    read through to the parts.

    The write mode is chosen by the planner (:mod:`watermark_assets.engine.write`): an append, a
    merge on ``table.merge_keys``, or a replace of the region fixed when planning (a unit's
    ``[u, u]``: the read is ``column = u``; a window ``[start, end)``; a time x unit cell
    ``[start, end) x [u, u]``; a replay chunk ``[lower, upper)``) or of the range read
    (``Replace.read_range()``: a run above its watermark, known once staged)."""

    request: ColumnRunRequest

    @property
    def watermark_before(self) -> ColumnWatermark:
        return self.planned_on.watermark

    @property
    def provider(self) -> str:
        return self.planned_on.provider

    @property
    def repaired_from_log(self) -> bool:
        return self.planned_on.repaired_from_log

    @property
    def bound(self) -> ReadBound:
        return self.read.bound

    @property
    def txn(self) -> TxnVersion:
        return self.record.txn

    @property
    def write_mode(self) -> WriteMode:
        return self.mode

    @property
    def predicate(self) -> Predicate:
        return self.read.predicate

    @property
    def operator(self) -> WatermarkOperator:
        return self.read.operator

    @property
    def predicate_text(self) -> str:
        """The predicate as Spark SQL (``TRUE``: no watermark yet, everything is read)."""
        return self.read.predicate_text


def read_bound(
    pipeline: ColumnSpec,
    watermark: ColumnWatermark,
    now: datetime,
    boundary: Boundary | None = None,
) -> ReadBound:
    """Where the read starts (:func:`effective_lower_bound`), for a replace on whole values,
    and at the boundary value.

    A replaced window is a range of the leading column, so a replace must read every row of the
    values it covers: with several watermark columns and no look-back, the read takes
    ``leading >= watermark's leading value`` (rows at that value with a smaller tie-breaker are
    read again and replaced, never removed without being re-added).

    With the rows committed at the watermark's leading value known (``boundary``, not
    overflowed) and no look-back, the read takes ``leading >= value`` too: rows committed later
    at that value (a smaller id, an update at the same time) are read, the known ones dropped
    (:func:`uses_boundary`). Without it (a commit from before boundaries, more than
    MAX_BOUNDARY_ROWS rows at the value) the read stays strictly above the watermark.
    """
    config = pipeline.column_watermark
    bound = effective_lower_bound(watermark, config.lookback, now, lag=config.lag)
    columns = bound.watermark.columns
    replaces_tuple = pipeline.replace_by_watermark and len(columns) > 1
    if (replaces_tuple or uses_boundary(pipeline, watermark, boundary)) and not (
        watermark.is_empty or config.reads_behind
    ):
        leading = ColumnWatermark(columns[:1], bound.watermark.values[:1])
        return ReadBound(leading, WatermarkOperator.GREATER_OR_EQUAL)
    return bound


def uses_boundary(
    pipeline: ColumnSpec, watermark: ColumnWatermark, boundary: Boundary | None
) -> bool:
    """Whether a run reads the boundary value again and deduplicates by ``boundary``: a known,
    not overflowed boundary of ``watermark``, and no look-back (that re-reads it anyway)."""
    return (
        boundary is not None
        and not boundary.overflowed
        and boundary.belongs_to(watermark)
        and not pipeline.reads_behind
    )


@dataclass(frozen=True)
class Committed:
    """The committed watermark, whether the provider's copy was repaired from the log, and the
    rows committed at its leading value (None: not recorded)."""

    watermark: ColumnWatermark
    repaired: bool
    boundary: Boundary | None


def load_watermark(
    pipeline: ColumnSpec, manager: WatermarkManager, *, repair: bool = True
) -> tuple[ColumnWatermark, bool]:
    """The committed watermark, and whether the provider's copy had to be repaired from the log.

    For the Delta provider the log is the store. For the others the log's copy (every commit
    carries one) is merged in: a run killed after its commit, before its save, left the provider
    behind; the log's value is saved to it now (its commit did succeed). ``repair=False``: the
    merged value is returned and nothing is saved (``watermark-assets plan`` writes nothing).
    """
    committed = load_committed(pipeline, manager, repair=repair)
    return committed.watermark, committed.repaired


def load_committed(
    pipeline: ColumnSpec, manager: WatermarkManager, *, repair: bool = True
) -> Committed:
    """:func:`load_watermark`, with the boundary the Delta log recorded for that watermark (the
    commit that carries a watermark carries its boundary, whatever the provider)."""
    columns = pipeline.columns
    stored, record = manager.load_record(pipeline.dataflow_id, columns)
    if manager.saves_with_commit:
        return Committed(stored, False, _boundary_of(record, stored))
    log_copy = DeltaMetadataProvider(pipeline.table.uri, pipeline=pipeline.name)
    logged_record = log_copy.get_record(pipeline.dataflow_id)
    if logged_record is None:
        return Committed(stored, False, None)
    logged = ColumnWatermark.from_json(logged_record.watermark)
    if stored.covers(logged):
        return Committed(stored, False, _boundary_of(logged_record, stored))
    repaired = stored.merge(logged)
    if repair:
        manager.save_watermark(pipeline.dataflow_id, repaired, job_id=None, dataflow_run_id=None)
    return Committed(repaired, True, _boundary_of(logged_record, repaired))


def _boundary_of(record: WatermarkRecord | None, watermark: ColumnWatermark) -> Boundary | None:
    """The boundary ``record`` carries, if it is ``watermark``'s (a provider moved by hand, or a
    repaired one, has none)."""
    if record is None or record.boundary is None:
        return None
    if ColumnWatermark.from_json(record.watermark) != watermark:
        return None
    boundary = Boundary.from_json(record.boundary)
    return boundary if boundary.belongs_to(watermark) else None


def plan_column_batch(
    request: ColumnRunRequest, *, now: datetime, repair: bool = True
) -> ColumnPlan:
    """Read the txn version first, then the watermark (a commit landing in between makes the
    commit stale, never silently stacked on an old watermark). ``repair=False``: a provider
    behind the log is not saved (:func:`load_watermark`; the plan says it was repaired)."""
    pipeline = request.pipeline
    committer = committer_for(pipeline.table)
    app_id = txn_app_id(pipeline.name)
    committed = committer.transaction_version(app_id)
    manager = watermark_manager(pipeline)
    loaded = load_committed(pipeline, manager, repair=repair)
    before = loaded.watermark
    boundary = loaded.boundary if uses_boundary(pipeline, before, loaded.boundary) else None
    return ColumnPlan(
        request=request,
        read=ReadSlice(read_bound(pipeline, before, now, boundary), boundary=boundary),
        mode=write_mode_of(pipeline),
        record=RecordPlan(
            (TxnVersion.next_of(app_id, committed),),
            watermark=PipelineWatermark.ADVANCED_ABOVE,
        ),
        planned_on=PlannedOn(before, manager.provider.name, loaded.repaired),
    )


def write_mode_of(pipeline: ColumnSpec) -> WriteMode:
    """How a column pipeline's commit writes: a merge on ``table.merge_keys``, with
    ``destination.replace_by_watermark`` a replace of the range read, else an append (the
    configuration refuses merge keys with a replace)."""
    if pipeline.merge_keys:
        return Merge(pipeline.merge_keys)
    if pipeline.replace_by_watermark:
        return Replace.read_range()
    return Append()


@dataclass(frozen=True, kw_only=True)
class StagedColumnBatch:
    """A planned read whose rows are written as Parquet in staging, not committed yet."""

    plan: ColumnPlan
    token: str
    rows: StagedRows
    pushed_down: str
    details: Mapping[str, object]
    data_files: tuple[str, ...]
    data_schema: pa.Schema | None
    #: the session that staged the rows: a stale commit plans and reads again with it
    spark: SparkSession | None = field(default=None, compare=False, repr=False)
    #: what the source could not get (:attr:`ColumnRead.missing`): nothing is committed
    missing: tuple[str, ...] = ()
    #: malformed source records this run put in the quarantine table (committed already; a
    #: record quarantined by an earlier run is not counted again)
    rows_quarantined: int = 0
    #: whether the source quarantines malformed records (CSV/JSON)
    quarantines: bool = False
    #: columns of the source's files the rows leave out (no schema evolution yet); None: the
    #: source cannot tell
    columns_ignored: tuple[str, ...] | None = None
    #: what crashed runs left under the table and its quarantine, removed before this read
    #: (:func:`~watermark_assets.staging.remove_stale_staging`)
    leftovers_removed: tuple[str, ...] = ()
    #: rows of the source with a NULL watermark column (None: not counted, or the source
    #: cannot count them cheaply)
    null_watermark_rows: int | None = None
    #: the rows staged at the next watermark's leading value (with those committed there
    #: before, when it did not move): what the commit records with its watermark
    boundary_after: Boundary | None = None
    #: what ``schema.mode`` did to the read (:mod:`~watermark_assets.sources.column_schema`;
    #: None: nothing to compare with yet, the table does not exist)
    schema_read: ColumnSchemaRead | None = None
    #: values nulled (``ignore``) or rescued (``rescue``) per column, and rows rescued
    schema_values: Mapping[str, int] = field(default_factory=dict)
    rows_rescued: int = 0

    @property
    def evolution(self) -> SchemaEvolution:
        """What the commit may change in the table's schema: the pipeline's ``schema.mode``
        (:meth:`SchemaEvolution.for_mode`), the source's location as the change's origin."""
        pipeline = self.plan.request.pipeline
        return SchemaEvolution.for_mode(
            pipeline.schema_policy.mode.value, origin=pipeline.source.location
        )

    @property
    def staged_read(self) -> StagedRead:
        """What the engine commits of this read (:func:`~watermark_assets.engine.execute.
        commit_reads`)."""
        return StagedRead(
            self.plan,
            self.token,
            self.data_files,
            self.data_schema,
            bool(self.rows_read),
            self.window,
        )

    def boundary_text(self, watermark_text: str) -> str | None:
        """The boundary a commit carrying ``watermark_text`` records (None: not its own)."""
        boundary = self.boundary_after
        if boundary is None or not boundary.belongs_to(ColumnWatermark.from_json(watermark_text)):
            return None
        return boundary.to_json()

    @property
    def rows_read(self) -> int:
        return self.rows.rows

    @property
    def watermark_after(self) -> ColumnWatermark:
        """The next watermark: the greatest row read, never below the watermark before."""
        return self.rows.next_watermark

    @property
    def window(self) -> Region | None:
        """The window (or region) a ``replace_by_watermark`` commit replaces; None for an
        append, or for a run above the watermark that read no row (it has no upper bound).

        A region fixed when planning (the plan's write mode) is replaced also when the
        read found no row: a chunk's whole closed-open range ``[lower, upper)``, a unit's
        ``[u, u]``, a window; their rows in the table were deleted (or corrected away) at the
        source, and the replace removes them. The range read (a run above its watermark) has
        ``lower`` where the read started (the watermark before, or the look-back's start),
        ``upper`` the leading column of the watermark after; ``(lower, upper]`` for a read with
        ``>``, ``[lower, upper]`` for one with ``>=``; from the beginning without a watermark.
        """
        mode = self.plan.write_mode
        if not isinstance(mode, Replace):
            return None
        if mode.regions:  # fixed when planning (a unit, a window, a chunk), also for no row read
            return mode.regions[0]
        bound = self.plan.bound.watermark
        column = self.plan.request.pipeline.columns[0]
        if not self.rows.rows:
            return None
        upper = self.watermark_after.values[0]
        if upper is None:
            return None  # no complete row: nothing can be placed in a window (fails closed later)
        inclusive = self.plan.operator is WatermarkOperator.GREATER_OR_EQUAL or bound.is_empty
        return ReplaceWindow(
            column,
            None if bound.is_empty else bound.values[0],  # type: ignore[arg-type]
            upper,  # type: ignore[arg-type]
            Interval.CLOSED_CLOSED if inclusive else Interval.OPEN_CLOSED,
        )


def stage_column_batch(
    plan: ColumnPlan, spark: SparkSession, *, now: datetime
) -> StagedColumnBatch:
    """Read through the source and write the rows under ``{table}/_staging/{token}``."""
    pipeline = plan.request.pipeline
    table_uri = pipeline.table.uri
    token = f"{now.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}"
    leftovers = remove_stale_staging(table_uri, now)
    source = pipeline.build_source()
    declared = declared_columns(pipeline.source.rows_ddl, table_uri)
    if isinstance(source, ReadsUnderSchema):  # a CSV/JSON folder: how its text is parsed
        source = source.under_schema(declared, pipeline.schema_policy.mode.value)
    read = source.read(spark, plan.predicate)
    null_mode = pipeline.null_watermark
    if read.malformed is not None or (plan.record.records_boundary and null_mode == "quarantine"):
        # a source that quarantines: its quarantine table's too
        leftovers += remove_stale_staging(pipeline.table.quarantine, now)
    nulls: NullRows | None = None
    if plan.record.records_boundary:  # a run above the watermark: the NULL rows as configured
        nulls = _null_rows(pipeline, source, read, spark)
        read = replace(read, frame=nulls.others)
        if nulls.new is not None:
            read = replace(read, frame=read.frame.unionByName(nulls.new))
    read, schema_read = apply_schema_policy(
        read,
        pipeline=pipeline.name,
        policy=pipeline.schema_policy,
        declared=read.declared if declared is None else declared,
        origin=pipeline.source.location,
    )
    keys = list(pipeline.merge_keys)
    missing = [k for k in keys if k not in read.frame.columns]
    if missing:
        raise MergeKeyError(
            table_uri,
            keys,
            f"merge key {missing[0]!r} is not a column of the rows read from {source.name!r} "
            f"(they have {read.frame.columns})",
            "name columns of the source in table.merge_keys",
            column=missing[0],
        )
    data_dir = staging_dir(table_uri, token)
    boundary_after = None
    drops = not isinstance(plan.write_mode, Replace)  # a replace re-writes its window
    boundary = None
    if plan.read.boundary is not None:
        hashed_as = {} if schema_read is None else schema_read.hashed_as
        boundary = BoundaryRead(boundary=plan.read.boundary, drops=drops, hashed_as=hashed_as)
    try:
        if read.missing:  # an incomplete read commits nothing: no need to stage it
            rows = StagedRows(data_dir=None, rows=0, next_watermark=plan.watermark_before)
        else:
            rows = stage_rows(
                read,
                columns=pipeline.columns,
                start=plan.watermark_before,
                data_dir=data_dir,
                partition_by=pipeline.table.partition_by,
                merge_keys=keys,
                boundary=boundary,
            )
            if plan.record.records_boundary and rows.rows_new:
                boundary_after = _boundary_after(plan, rows, spark, read.frame, drops=drops)
        schema = None  # an empty read that records completion: the table's schema, if created
        if not rows.rows and plan.record.records_completion and not read.missing:
            schema = _empty_read_schema(read.frame, data_dir, pipeline.table.partition_by)
        quarantined = 0
        if nulls is not None and nulls.quarantine and not read.missing:
            quarantined += quarantine_null_watermark(
                pipeline, nulls.rows, spark, token=token, run_id=plan.request.run_id, now=now
            )
        if read.malformed is not None and not read.missing:
            quarantined += quarantine_malformed(
                pipeline,
                read.malformed,
                spark,
                token=token,
                run_id=plan.request.run_id,
                now=now,
            )
    finally:
        if read.scratch_uri is not None:  # after the schema's write: the frame may read it
            remove_tree(read.scratch_uri)
    files = list_parquet(data_dir) if rows.rows else ()
    if files:
        schema = _table_schema(files[0], read.frame, pipeline.table.partition_by)
    values, rescued = ({}, 0) if schema_read is None or read.missing else schema_read.counts()
    crash_point("after_data_written")
    return StagedColumnBatch(
        plan=plan,
        token=token,
        rows=rows,
        pushed_down=read.pushed_down,
        details=dict(read.details),
        data_files=files,
        data_schema=schema,
        spark=spark,
        missing=read.missing,
        rows_quarantined=quarantined,
        quarantines=read.malformed is not None or (nulls is not None and nulls.quarantine),
        columns_ignored=read.columns_ignored,
        leftovers_removed=tuple(leftovers),
        boundary_after=boundary_after,
        null_watermark_rows=None if nulls is None else nulls.count,
        schema_read=schema_read,
        schema_values=values,
        rows_rescued=rescued,
    )


def count_null_watermark(pipeline: ColumnSpec, spark: SparkSession) -> int | None:
    """How many rows of the pipeline's source have a NULL watermark column (a time pipeline's
    time column: such rows fall in no window); None: the source cannot count them cheaply."""
    source = pipeline.build_source()
    return count_nulls(source, spark, pipeline.columns)


@dataclass(frozen=True)
class NullRows:
    """The rows of a run's source with a NULL watermark column (``watermark.null_watermark``).

    ``count``: how many the source holds (None: it cannot tell, see
    :class:`~watermark_assets.sources.column.ReadsNullRows`), ``rows`` those rows, ``others``
    the read without them; ``new`` (``include``): those the table does not hold yet, committed
    with the run's rows; ``quarantine``: they go to the quarantine table."""

    count: int | None
    rows: Any
    others: Any
    new: Any = None
    quarantine: bool = False


def _null_rows(
    pipeline: ColumnSpec, source: Any, read: ColumnRead, spark: SparkSession
) -> NullRows:
    """Where a run's NULL watermark rows come from: the source's own pushed-down selection
    (every run: rows inserted later are found too), or, for a source without one, the read's
    (a read of everything: the first run's). Never part of the rows above the watermark; counted
    with one query; then, by mode, left alone (skip), quarantined (each once, by content) or
    committed with the run's rows when the table does not hold them yet (include: a left anti
    join on the whole row's hash against the table's NULL rows, under the run's txn)."""
    columns = pipeline.columns
    incomplete = any_null(columns)
    others = read.frame.where(~incomplete)
    pushed = isinstance(source, ReadsNullRows)
    rows = source.null_rows(spark, columns) if pushed else read.frame.where(incomplete)
    count = count_nulls(source, spark, columns) if pushed else int(rows.count())
    mode = pipeline.null_watermark
    if not count or mode == "skip":
        return NullRows(count, rows, others)
    if mode == "quarantine":
        return NullRows(count, rows, others, quarantine=True)
    new = _not_in_table(spark, rows, pipeline.table.uri, columns)
    return NullRows(count, rows, others, new=new)


def _not_in_table(spark: SparkSession, rows: Any, uri: str, columns: Sequence[str]) -> Any:
    """``rows`` (NULL watermark rows) less those the Delta table at ``uri`` holds, by whole-row
    hash (the table's NULL rows only are read)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError
    from pyspark.sql import functions as F

    from watermark_assets.spark import io

    try:
        table = DeltaTable(uri, storage_options=storage.delta_options(uri))
    except TableNotFoundError:
        return rows
    uris = table.file_uris()
    if not uris:
        return rows
    held = io.read_files(spark, uris, format="parquet", schema=rows.schema, base_path=uri)
    held = held.where(any_null(columns))
    key = "__watermark_assets_row_hash"
    known = held.select(row_hash(held).alias(key)).distinct()
    return (
        rows.withColumn(key, row_hash(rows))
        .join(known, on=key, how="left_anti")
        .select(*[F.col(f"`{c}`") for c in rows.columns])
    )


def _boundary_after(
    plan: ColumnPlan, rows: StagedRows, spark: SparkSession, frame: Any, *, drops: bool
) -> Boundary | None:
    """The rows committed at the next watermark's leading value once this run commits: the
    staged ones there (read back from staging), with the boundary's known ones when the value
    did not move and the read dropped them. A strict read (``>``) that stayed on its start's
    value did not see the rows committed there before: overflowed (the next read stays strict)."""
    after = rows.next_watermark
    if after.is_empty or rows.data_dir is None:
        return None
    column, value = after.columns[0], after.values[0]
    assert value is not None
    before = plan.watermark_before
    if (
        plan.operator is WatermarkOperator.GREATER_THAN
        and not before.is_empty
        and before.values[0] == value
    ):
        return Boundary.of(column, value, None)
    hashes = boundary_hashes(
        spark, rows.data_dir, frame, column, value, limit=MAX_BOUNDARY_ROWS + 1
    )
    prior = plan.read.boundary
    if prior is not None and drops and prior.value == value:
        return prior.with_rows(hashes)
    return Boundary.of(column, value, hashes)


def _empty_read_schema(frame: Any, data_dir: str, partition_by: Sequence[str]) -> pa.Schema:
    """The table schema of a read of no row, from a zero-row Parquet file Spark wrote: the same
    writer and settings as for rows, so the first commit of an empty window can create the table
    with the schema its later files will have (no guess from the source's types).

    Spark writes one zero-row file for an empty frame; a partitioned write of no row writes none,
    so the frame without its partition columns is written once more with ``limit(0)`` (Spark
    plans it as an empty relation: the source is not read again)."""
    from watermark_assets.spark import io

    found = list_parquet(data_dir)
    if not found:
        schema_dir = storage.join(data_dir, "_schema")
        io.write_parquet(frame.drop(*partition_by).limit(0), schema_dir)
        found = list_parquet(schema_dir)
    return _table_schema(found[0], frame, partition_by)


def _table_schema(first_file: str, frame: Any, partition_by: Sequence[str]) -> pa.Schema:
    """The Parquet footer's columns, plus the partition columns with the frame's types (their
    values live in the folder names, not in the files)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = storage.parquet_schema(first_file)
    if partition_by:
        typed = to_arrow_schema(frame.select(*partition_by).schema)
        for name in partition_by:
            schema = schema.append(typed.field(name))
    return schema


@dataclass(frozen=True, kw_only=True)
class ColumnResult:
    """What a run did, for the materialization metadata."""

    staged: StagedColumnBatch
    outcome: CommitOutcome
    rows_committed: int
    rows_removed: int = 0
    rows_kept_by_rewrite: int = 0
    window: Region | None = None
    #: the watermark the store holds after the run
    watermark_after: ColumnWatermark
    attempts: int = 1
    #: a merge on ``table.merge_keys``: rows whose key the table held, rows with a new key
    merge_keys: tuple[str, ...] = ()
    rows_updated: int = 0
    rows_inserted: int = 0


def commit_column_batch(
    staged: StagedColumnBatch, *, now: datetime, replan: Callable[[], ColumnPlan] | None = None
) -> ColumnResult:
    """Commit the staged rows (append or window replace) with the watermark, or plan again when
    another run of the pipeline committed meanwhile (module docstring). ``replan`` makes that new
    plan (default: :func:`plan_column_batch` of the same request; a replay chunk plans its own).

    A read of no row commits nothing, except in two cases, each ONE commit like any other:

    - a chunk's window with ``replace_by_watermark`` (:attr:`StagedColumnBatch.window`): when
      the table holds rows in ``[lower, upper)``, they were deleted or corrected away at the
      source, and the commit removes them (remove actions, rewritten straddling files, no new
      file) with the chunk's txns and metadata. A window the table holds no row of commits
      nothing (no empty commits in the log), unless the chunk records its completion;
    - a chunk that records its completion (``RecordPlan.records_completion``, a
      ``save_watermark: true`` replay, append or replace): the commit carries its txns and its
      upper bound even with no file to add or remove. Why record an empty chunk: the seed saves
      the upper bound "after each successful chunk", and a chunk that read nothing did
      succeed; the re-run then skips it like any completed chunk (its txn is in the log, the
      saved bound covers it). Not recording it was inconsistent too: an empty chunk followed by
      a non-empty one was skipped anyway (the later bound covers it), a trailing one re-read on
      every re-run. Rows arriving later in a completed chunk are not re-read, empty or not
      (re-run with ``save_watermark: false``, or another range). The price is one small commit
      holding only a ``txn`` and ``commitInfo``.

    An empty read moves no watermark of the pipeline (nothing was read). With no table yet it
    commits nothing, unless it records its completion: then its ONE commit creates the table
    (version 0, no file) with the schema of a zero-row Parquet file Spark wrote for the read
    (:func:`_empty_read_schema`: the same writer as for rows, not a guess), its txns and its
    metadata. Otherwise a time pipeline's first window that read nothing would stay without
    history and run again on every tick, and a replay would re-read its empty first chunks.
    """
    pipeline = staged.plan.request.pipeline
    request = staged.plan.request
    if replan is None:

        def replan() -> ColumnPlan:
            return plan_column_batch(request, now=now)

    def attempt(staged: StagedColumnBatch, attempt: int) -> ColumnResult:
        if staged.missing:
            reason = (
                f"{len(staged.missing)} source file(s) missing ({staged.missing[0]}"
                f"{', ...' if len(staged.missing) > 1 else ''}): nothing committed; the "
                "window keeps its rows and high watermark"
            )
            return nothing_committed(staged, reason, attempt)
        if not staged.rows.rows_new and not _commits_when_empty(staged):
            reason = "no row above the watermark: nothing to commit"
            if staged.rows.reread:
                reason = (
                    f"no new row: the {staged.rows.reread} row(s) read at the watermark's "
                    "boundary value were committed already; nothing to commit"
                )
            return nothing_committed(staged, reason, attempt)
        return _commit_once(staged, attempt)

    def stage_again(earlier: StagedColumnBatch, stale: Stale) -> StagedColumnBatch:
        if earlier.spark is None:
            raise stale
        # The records this run quarantined stay committed (the new read finds them there).
        staged = stage_column_batch(replan(), earlier.spark, now=now)
        return replace(
            staged,
            rows_quarantined=staged.rows_quarantined + earlier.rows_quarantined,
            leftovers_removed=(*earlier.leftovers_removed, *staged.leftovers_removed),
        )

    return execute(
        staged,
        attempt,
        stage_again=stage_again,
        staging=lambda staged: [staging_dir(pipeline.table.uri, staged.token)],
        table_uri=pipeline.table.uri,
        pipeline=pipeline.name,
    )


def _commits_when_empty(staged: StagedColumnBatch) -> bool:
    """Whether a read of no (new) row may still commit: a chunk's or a unit's replace, or a
    recorded completion; never a run above the watermark (its boundary rows read again)."""
    plan = staged.plan
    return plan.record.records_completion or (
        staged.window is not None and not plan.record.records_boundary
    )


def nothing_committed(staged: StagedColumnBatch, reason: str, attempt: int) -> ColumnResult:
    """The result of a read that committed nothing (``reason``)."""
    return ColumnResult(
        staged=staged,
        outcome=CommitOutcome(None, True, reason),
        rows_committed=0,
        window=staged.window,
        watermark_after=staged.plan.watermark_before,
        attempts=attempt,
    )


def _commit_once(staged: StagedColumnBatch, attempt: int) -> ColumnResult:
    """The staged rows and the watermark in ONE commit (:func:`~watermark_assets.engine.
    execute.commit_reads`, in the plan's write mode); the provider saves after it, unless the
    commit carried the watermark (the Delta provider)."""
    plan = staged.plan
    request = plan.request
    pipeline = request.pipeline
    uri = pipeline.table.uri
    committer = committer_for(pipeline.table, now=request.clock)
    empty = not staged.rows_read
    saves = plan.record.saves_watermark and not empty  # an empty read moves no watermark
    window = staged.window
    # a run that saves no column watermark (time, unit and cell runs, most replay chunks)
    # needs no provider: those kinds have none of their own
    manager = watermark_manager(pipeline) if saves else None
    after = staged.watermark_after

    def lineage(rewrite: RewritePlan | None) -> dict[str, str]:
        removed = 0 if rewrite is None else rewrite.rows_removed
        kept = 0 if rewrite is None else rewrite.rows_kept_by_rewrite
        merge = rewrite if isinstance(rewrite, MergePlan) else None
        return {RUN_METADATA_KEY: _run_record(staged, window, removed, kept, merge=merge)}

    def commit(entries: Mapping[str, str]) -> Written:
        custom = dict(plan.record.entries)
        if saves:
            entry = dict(entries) or commit_metadata_entry(
                pipeline.dataflow_id,
                after.to_json(),
                job_id=request.job_name,
                dataflow_run_id=request.run_id,
            )
            custom |= with_boundary(entry, pipeline.dataflow_id, staged.boundary_text)
        return commit_reads(
            committer,
            [staged.staged_read],
            entries=custom,
            lineage=lineage,
            partition_by=pipeline.table.partition_by,
            now=request.clock,
            evolution=staged.evolution,
        )

    if manager is None:
        written = commit({})
    else:
        written = manager.commit_then_save(
            pipeline.dataflow_id,
            after,
            commit,
            job_id=request.job_name,
            dataflow_run_id=request.run_id,
        )
    if written.outcome.version is None:  # nothing to commit (a stale one raised Stale)
        return nothing_committed(staged, written.outcome.reason, attempt)
    if manager is not None and not manager.saves_with_commit:
        # the log's copy (load_watermark's crash repair) read past this commit: its state
        # snapshot then holds it, so no later read needs this commit from the log
        DeltaMetadataProvider(uri, pipeline=pipeline.name).get_record(pipeline.dataflow_id)
    mode = plan.mode
    return ColumnResult(
        staged=staged,
        outcome=written.outcome,
        rows_committed=written.rows_added(0),
        rows_removed=written.rows_removed,
        rows_kept_by_rewrite=written.rows_kept_by_rewrite,
        window=window,
        # A run that saves no column watermark (unit and time runs, replay chunks without
        # save_watermark) leaves it where it planned: no walk back through the log per commit.
        watermark_after=(
            manager.load(pipeline.dataflow_id, pipeline.columns)
            if manager is not None
            else plan.watermark_before
        ),
        attempts=attempt,
        merge_keys=mode.keys if isinstance(mode, Merge) else (),
        rows_updated=written.rows_updated,
        rows_inserted=written.rows_inserted,
    )


def _run_record(
    staged: StagedColumnBatch,
    window: Region | None,
    removed: int,
    kept: int,
    *,
    merge: MergePlan | None = None,
) -> str:
    """The ``watermark_assets.column_run`` entry (JSON text). ``rows_deduplicated``: rows read but
    not written (another row of their merge key kept); the commit adds ``rows_read -
    rows_deduplicated + rows_kept_by_rewrite`` rows."""
    plan = staged.plan
    merged = (
        {}
        if merge is None
        else {
            "merge_keys": list(merge.keys),
            "rows_updated": merge.rows_updated,
            "rows_inserted": merge.rows_inserted,
        }
    )
    return json.dumps(
        {
            "pipeline": plan.request.pipeline.name,
            "run_id": plan.request.run_id,
            "watermark_before": plan.watermark_before.to_json(),
            "watermark_after": staged.watermark_after.to_json(),
            "operator": plan.operator.value,
            "predicate": plan.predicate_text,
            "rows_read": staged.rows_read,
            "window": None if window is None else region_json(window),
            "rows_removed": removed,
            "rows_kept_by_rewrite": kept,
            "rows_deduplicated": staged.rows.duplicates,
            "rows_quarantined": staged.rows_quarantined,
            "rows_boundary_reread": staged.rows.reread,
            **(
                {}
                if staged.columns_ignored is None
                else {"columns_ignored": list(staged.columns_ignored)}
            ),
            **merged,
        }
    )
