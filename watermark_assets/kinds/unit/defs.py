"""The Dagster objects of a unit pipeline (seed 003): one partition per unit id.

- Explicit ids (``watermark.units: "id1,id2,id3"``): a :class:`StaticPartitionsDefinition` of
  exactly those ids, in the configured order.
- A secondary input (``watermark.secondary_input``): a :class:`DynamicPartitionsDefinition`
  named ``{pipeline}_units`` and a sensor ``{pipeline}_units_sensor`` that reads the input on
  each tick (:func:`~watermark_assets.sources.secondary_input.read_units`), adds the ids Dagster
  does not know yet (``SensorResult.dynamic_partitions_requests``) and requests one run per
  listed id that never ran, at most ``sensor.max_runs_per_tick`` a tick, oldest partitions first:
  the units due come from the table's done-at state (one snapshot read), so a lost cursor (a new
  instance, a reset sensor) still requests every unit that never ran; the cursor only remembers
  the runs requested whose commit is not in yet (no Dagster query per partition). A unit whose
  run failed is requested again under a new run key (an attempt counter from its failed runs:
  Dagster never forgets a run key). It never removes a
  partition: ids that vanished from the input are reported
  (:meth:`~watermark_assets.core.unit.UnitListing.describe`), and so are refused rows with their
  row number (:meth:`~watermark_assets.core.unit.ScreenedUnits.describe`), in the tick's message
  and, when the report changes, as an asset observation. An input that cannot be read at all
  skips the tick and says why (nothing is added or removed).

The asset's run reads and replaces each of its units in ONE commit
(:func:`~watermark_assets.kinds.unit.run.run_units`). A backfill runs
``backfill.max_partitions_per_run``
units per run (default 1). The checks read this run's commits back from the log: each unit's
done-at never moves backwards; rows added = rows read + rows kept by rewrite.
"""

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

from dagster import (
    AssetChecksDefinition,
    AssetKey,
    AssetObservation,
    AssetsDefinition,
    BackfillPolicy,
    DynamicPartitionsDefinition,
    MetadataValue,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    StaticPartitionsDefinition,
    asset,
    sensor,
)
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,
)

from watermark_assets import names
from watermark_assets import vocabulary as v
from watermark_assets.config import UnitPipelineConfig
from watermark_assets.core.clock import Clock
from watermark_assets.core.unit import UnitWatermark, some_ids, unit_id_problems
from watermark_assets.defs.asset_body import AssetOutcome, AssetRun, run_asset
from watermark_assets.defs.checks import CommitFindings, watermark_checks
from watermark_assets.defs.column_checks import reconcile_mismatch
from watermark_assets.defs.columns import source_schema
from watermark_assets.defs.freshness import freshness_policy
from watermark_assets.defs.jobs import (
    FailedAttempts,
    pipeline_job,
    requested_or_skipped,
    sensor_status,
)
from watermark_assets.defs.keys import asset_key
from watermark_assets.defs.metadata import staged_reads_metadata
from watermark_assets.defs.partition_truth import PartitionTruth, iso_utc
from watermark_assets.defs.pipeline_defs import PipelineDefs
from watermark_assets.defs.run_tags import pipeline_partition_tags
from watermark_assets.defs.schema_notes import schema_observations, source_schema_note
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.delta.log import CommitRecord, table_row_count
from watermark_assets.exceptions import SecondaryInputError
from watermark_assets.kinds.unit.run import (
    INNER_KIND,
    UNIT_RUN_KEY,
    UnitRun,
    load_unit_watermark,
    run_units,
)
from watermark_assets.names import PIPELINE_TAG
from watermark_assets.runs.column import RUN_METADATA_KEY
from watermark_assets.runs.column_spec import ColumnSpec
from watermark_assets.sources.locations import check_source
from watermark_assets.sources.secondary_input import SecondaryInput, read_units

UnitPartitions = StaticPartitionsDefinition | DynamicPartitionsDefinition

#: The tag of a units sensor's run: ``{pipeline}|unit|{id}``, its run key without the attempt
#: (the failed runs of a unit are counted by it, so a failed unit gets a new run key).
UNIT_TICK_TAG = names.UNIT_TICK_TAG


def unit_partitions(pipeline: UnitPipelineConfig) -> UnitPartitions:
    """Static partitions of the explicit ids, or dynamic ones filled by the sensor."""
    explicit = pipeline.watermark.explicit_units
    if explicit is not None:
        return StaticPartitionsDefinition(list(explicit))
    return DynamicPartitionsDefinition(name=names.units_partitions_name(pipeline.name))


def describe(pipeline: UnitPipelineConfig) -> str:
    """The asset's description: its pipeline in a paragraph."""
    lead = pipeline.description.strip() + "\n\n" if pipeline.description else ""
    column = pipeline.watermark.column
    listing = pipeline.watermark.secondary_input
    where = (
        f"the explicit ids `{pipeline.watermark.units}` (static partitions)"
        if listing is None
        else f"the ids the {listing.type} secondary input lists (dynamic partitions "
        f"`{names.units_partitions_name(pipeline.name)}`, added by "
        f"`{names.units_sensor_name(pipeline.name)}`)"
    )
    return (
        f"{lead}One partition per unit id, from {where}. A unit's run reads the rows of the "
        f"{pipeline.source.type} source `{pipeline.source.location}` whose `{column}` is the id "
        f"(pushed down to the source) and replaces exactly that unit's rows of "
        f"`{pipeline.table.uri}` in ONE Delta commit, with the unit's watermark (when it was "
        "done). Metadata: `unit/id`, `watermark/before` and `watermark/after` (when the unit "
        "was done), `rows/read`, `rows/committed`, `rows/removed` (every key: docs/metadata.md)."
    )


def _done_text(run: UnitRun) -> tuple[str, str]:
    before = "(first run)" if run.done_before is None else v.time_text(run.done_before.when)
    after = "(not recorded)" if run.done_after is None else v.time_text(run.done_after.when)
    return before, after


def unit_truth(pipeline: UnitPipelineConfig, run: UnitRun) -> PartitionTruth:
    """One unit as its watermark (done-at) holds it after its run."""
    column, staged = pipeline.watermark.column, run.result.staged
    if run.done_after is None:
        return PartitionTruth(
            state="not recorded",
            reason=f"the run read {staged.rows_read} row(s) where `{column}` = {run.unit!r} "
            "but recorded no done-at: the next run of the unit reads it again",
        )
    done = run.done_after.when
    return PartitionTruth(
        state="done",
        reason=f"the rows where `{column}` = {run.unit!r} were read ({staged.rows_read}) and "
        f"replaced in one commit, done at {iso_utc(done)}; a unit is read again only when it "
        "is run again (the units sensor runs a unit that never ran)",
        watermark=iso_utc(done),
        watermark_time=done,
    )


#: The columns of ``units/refused``: each refused input row (1-based), its value as read (several
#: fields joined by ``, ``) and every rule it broke.
REFUSED_COLUMNS: dict[str, str] = {"row": "int", "value": "string", "reason": "string"}


#: The columns of ``watermark/after`` for a run of several units (and a grid's run): each unit's
#: watermark after the run, empty when none.
UNIT_WATERMARK_COLUMNS: dict[str, str] = {"unit": "string", "watermark": "string"}


def unit_metadata(runs: list[UnitRun], *, table_rows: int | None, table_uri: str) -> dict[str, Any]:
    """What a run of units did: per unit its id, rows and done-at (the last unit's when one)."""
    results = [r.result for r in runs]
    versions = [r.outcome.version for r in results if r.outcome.version is not None]
    metadata: dict[str, Any] = {
        v.RUNS: v.lines(r.line() for r in runs),
        v.ROWS_READ: MetadataValue.int(sum(r.staged.rows_read for r in results)),
        v.ROWS_COMMITTED: MetadataValue.int(sum(r.rows_committed for r in results)),
        v.ROWS_REMOVED: MetadataValue.int(sum(r.rows_removed for r in results)),
        v.DELTA_VERSIONS: MetadataValue.json(versions),
        v.DAGSTER_URI: MetadataValue.path(table_uri),
    }
    metadata |= staged_reads_metadata([r.staged for r in results])
    if len(runs) == 1:
        (run,) = runs
        before, after = _done_text(run)
        metadata |= {
            v.UNIT_ID: MetadataValue.text(run.unit),
            v.WATERMARK_BEFORE: MetadataValue.text(before),
            v.WATERMARK_AFTER: MetadataValue.text(after),
            v.READ_PREDICATE: MetadataValue.text(run.result.staged.plan.predicate_text),
            v.READ_PUSHED_DOWN: MetadataValue.text(run.result.staged.pushed_down),
            v.REPLACE_WINDOW: MetadataValue.text(v.region_text(run.result.window, none="(none)")),
        }
        if run.done_after is not None:
            metadata[v.WATERMARK_AFTER_TIME] = v.timestamp(run.done_after.when)
    else:
        metadata[v.UNIT_IDS] = MetadataValue.json([r.unit for r in runs])
        done = (
            {
                "unit": r.unit,
                "watermark": None if r.done_after is None else v.time_text(r.done_after.when),
            }
            for r in runs
        )
        metadata[v.WATERMARK_AFTER] = v.table(UNIT_WATERMARK_COLUMNS, done)
    if table_rows is not None:
        metadata[v.DAGSTER_ROW_COUNT] = MetadataValue.int(table_rows)
    return metadata


def backfill_policy(per_run: int | None) -> BackfillPolicy:
    """One run for a backfill's range (None), or runs of at most ``per_run`` partitions."""
    if per_run is None:
        return BackfillPolicy.single_run()
    return BackfillPolicy.multi_run(max_partitions_per_run=per_run)


def build_unit_asset(
    pipeline: UnitPipelineConfig, partitions_def: UnitPartitions, clock: Clock
) -> AssetsDefinition:
    """The unit-partitioned asset: a run replaces each of its units (module docstring)."""
    policy = backfill_policy(pipeline.backfill.max_partitions_per_run)

    def unit_run(run: AssetRun) -> AssetOutcome:
        check_source(pipeline)  # before Spark: a clear error, not Spark's
        runs = run_units(
            pipeline,
            list(run.partitions.keys),
            run.spark,
            run_id=run.run_id,
            job_name=run.job_name,
            clock=clock,
            log=run.info,
        )
        uri = pipeline.table.uri
        metadata = unit_metadata(runs, table_rows=table_row_count(uri), table_uri=uri)
        truths = {each.unit: unit_truth(pipeline, each) for each in runs}
        return AssetOutcome(metadata, uri, per_partition=AssetOutcome.truths(truths))

    decorator = asset(
        key=asset_key(pipeline),
        description=describe(pipeline),
        group_name="watermark_unit_ingestion",
        kinds={"spark", "delta"},
        metadata={
            "table_uri": pipeline.table.uri,
            "source": pipeline.source.location,
            "source_type": pipeline.source.type,
            "unit_column": pipeline.watermark.column,
            "units": "explicit"
            if pipeline.watermark.secondary_input is None
            else f"secondary input ({pipeline.watermark.secondary_input.type})",
        },
        op_tags={PIPELINE_TAG: pipeline.name},
        partitions_def=partitions_def,
        backfill_policy=policy,
    )
    return run_asset(decorator, unit_run)


def build_unit_checks(pipeline: UnitPipelineConfig, asset_key: AssetKey) -> AssetChecksDefinition:
    """The two checks, read from this run's commits in the Delta log: each unit's done-at never
    moves backwards (the commit's value is at or above the one it planned on), and the rows it
    adds reconcile with the rows read (+ rows kept when a file holding other units was
    rewritten)."""

    def judge(commit: CommitRecord, committer: DeltaCommitter) -> CommitFindings | None:
        unit_text = commit.custom_metadata.get(UNIT_RUN_KEY)
        run_text = commit.custom_metadata.get(RUN_METADATA_KEY)
        if not unit_text or not run_text:
            return None
        unit = json.loads(unit_text)
        before, after = unit["done_at_before"], unit["done_at_after"]
        regressions = []
        if before is not None and after < before:
            regressions.append(f"v{commit.version}: unit {unit['unit']!r} {before} -> {after} ms")
        mismatch = reconcile_mismatch(commit.version, json.loads(run_text), commit)
        return CommitFindings(regressions, mismatch)

    return watermark_checks(
        pipeline.name,
        asset_key,
        pipeline.table,
        judge,
        monotone="Each unit's watermark (done-at) a commit stores is at or above the one it read.",
        reconcile="Rows added by a unit's commit = rows read + rows of other units kept when a "
        "file was rewritten.",
        no_commit="this run made no commit",
    )


@dataclass(frozen=True)
class UnitsCursor:
    """The units sensor's cursor: the digest of what was last observed (ids no longer listed,
    refused rows) and the ids whose run was requested but whose commit is not in the table yet,
    each with the attempt requested (a run in flight; a failed one counts one more failed run
    than that, and is requested again). It is an optimisation only: which units are due comes
    from the table (:func:`queue_unit_runs`); a lost cursor (a new instance, a reset sensor)
    requests the never-run units again, which a run key already launched on this instance makes
    a no-op. A cursor of an older version (the bare digest, ``waiting`` ids, ``requested`` as a
    list: attempt 0) reads as far as it goes."""

    noted: str | None = None
    requested: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_string(cls, text: str | None) -> "UnitsCursor":
        if not text:
            return cls()
        if not text.startswith("{"):
            return cls(noted=text)
        data = json.loads(text)
        requested = data.get("requested") or {}
        if isinstance(requested, list):
            requested = dict.fromkeys(requested, 0)
        return cls(noted=data.get("noted"), requested=dict(requested))

    def to_string(self) -> str:
        return json.dumps({"noted": self.noted, "requested": dict(self.requested)})


@dataclass(frozen=True)
class QueuedUnitRuns:
    """One tick's runs: the units due (listed, never run, not requested already or requested
    and failed), those requested now with their attempt, those that wait for later ticks, those
    still in flight (with the attempt in flight) and those due again after a failed run."""

    due: int
    requested: Mapping[str, int]
    waiting: tuple[str, ...]
    in_flight: Mapping[str, int]
    cap: int
    failed: tuple[str, ...] = ()

    def describe(self) -> str:
        text = f"{self.due} unit(s) never ran: {len(self.requested)} run(s) requested"
        if self.failed:
            text += f" ({len(self.failed)} again after a failed run: {some_ids(self.failed)})"
        if self.waiting:
            text += (
                f", {len(self.waiting)} wait for later ticks (sensor.max_runs_per_tick {self.cap})"
            )
        if self.in_flight:
            text += f"; {len(self.in_flight)} requested earlier, not committed yet"
        return text


def unit_tick_base(pipeline_name: str, unit: str) -> str:
    """A unit's run key without its attempt (the value of :data:`UNIT_TICK_TAG`)."""
    return f"{pipeline_name}|unit|{unit}"


def queue_unit_runs(
    listed: Sequence[str],
    *,
    done: Set[str],
    requested: Mapping[str, int],
    cap: int,
    failed_runs: Callable[[str], int] = lambda unit: 0,
) -> QueuedUnitRuns:
    """The units of ``listed`` (in order: oldest partitions first) with no committed run
    (``done``: the table's done-at state) that were not ``requested`` already; the first
    ``cap`` are requested, each with its attempt: its failed runs (``failed_runs``, per unit).
    A requested unit whose commit is in ``done`` leaves the in-flight list; so does one no
    longer listed, and one with more failed runs than its attempt requested (that run failed:
    it is due again, under the next attempt)."""
    listed_set = set(listed)
    in_flight = {
        u: n
        for u, n in requested.items()
        if u in listed_set and u not in done and failed_runs(u) <= n
    }
    due = [u for u in dict.fromkeys(listed) if u not in done and u not in in_flight]
    asked = {u: failed_runs(u) for u in due[:cap]}
    again = tuple(u for u in asked if u in requested)
    return QueuedUnitRuns(len(due), asked, tuple(due[cap:]), in_flight, cap, again)


@dataclass(frozen=True, kw_only=True)
class UnitsTick:
    """What a sensor tick read from a secondary input: the known ids, the new ones, the report
    (ids no longer listed, refused rows), the observation to emit and the cursor's digest."""

    known: tuple[str, ...] = ()
    new: tuple[str, ...] = ()
    #: the ids the input lists, in partition order (known ones first, then the new ones)
    listed: tuple[str, ...] = ()
    report: str = ""
    events: list[AssetObservation] = field(default_factory=list)
    digest: str | None = None
    #: why the input could not be read (nothing is added then), or None
    unreadable: str | None = None


def read_units_tick(
    context: SensorEvaluationContext,
    pipeline: UnitPipelineConfig,
    source: SecondaryInput,
    asset_key: AssetKey,
    read: Callable[[], Any] | None = None,
    *,
    noted: str | None,
) -> UnitsTick:
    """Read the secondary input and compare it with the dynamic partitions (never removes one);
    the report is observed when it changes: ``noted`` is the digest of the last one observed
    (kept in the sensor's cursor)."""
    name = names.units_partitions_name(pipeline.name)
    # A key added by hand in the UI may break the id rules: it stays, and is not compared.
    known = [k for k in context.instance.get_dynamic_partitions(name) if not unit_id_problems(k)]
    try:
        screened = read_units(source) if read is None else read()
    except SecondaryInputError as error:
        return UnitsTick(known=tuple(known), unreadable=f"{pipeline.name}: {error}")
    units = UnitWatermark.of_units(INNER_KIND, known).new_units(screened.units)
    report = f"{units.describe()} | {screened.describe()}"
    # What is observed once until it changes: the ids no longer listed, the refused rows.
    report_json = json.dumps(
        [list(units.missing), [(r.row, repr(r.value)) for r in screened.refused]]
    )
    digest = hashlib.sha256(report_json.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    changed = digest != noted and bool(units.missing or screened.refused)
    events: list[AssetObservation] = []
    if units.new or changed:
        events.append(
            AssetObservation(
                asset_key=asset_key,
                metadata={
                    v.UNITS_LISTING: MetadataValue.text(units.describe()),
                    v.UNITS_INPUT: MetadataValue.text(screened.describe()),
                    v.UNITS_NEW: MetadataValue.json(list(units.new)),
                    v.UNITS_NO_LONGER_LISTED: MetadataValue.json(list(units.missing)),
                    v.UNITS_REFUSED: v.table(
                        REFUSED_COLUMNS,
                        (
                            {"row": r.row, "value": r.value, "reason": r.reason}
                            for r in screened.refused
                        ),
                    ),
                },
            )
        )
    listed = set(screened.units)
    return UnitsTick(
        known=tuple(known),
        new=units.new,
        listed=(*(k for k in known if k in listed), *units.new),
        report=report,
        events=events,
        digest=digest,
    )


def build_units_sensor(
    pipeline: UnitPipelineConfig,
    job: UnresolvedAssetJobDefinition,
    asset_key: AssetKey,
    partitions_def: DynamicPartitionsDefinition,
    *,
    read: Callable[[], Any] | None = None,
) -> SensorDefinition:
    """``{pipeline}_units_sensor``: new ids of the secondary input -> dynamic partitions + one
    run each, at most ``sensor.max_runs_per_tick`` runs a tick (module docstring). The cursor
    (:class:`UnitsCursor`) holds a digest of the ids no longer listed and the refused rows, so
    an unchanged report is said in each tick but observed once, and the ids requested whose
    commit is not in yet; the units due are the listed ones with no done-at in the table."""
    listing = pipeline.watermark.secondary_input
    assert listing is not None, "only a secondary input has a units sensor"
    source = listing.build()
    settings = pipeline.sensor

    @sensor(
        name=names.units_sensor_name(pipeline.name),
        job=job,
        minimum_interval_seconds=settings.minimum_interval_seconds,
        default_status=sensor_status(settings.running_by_default),
        description=f"Reads the unit ids of {source.describe()} and adds the new ones as "
        f"partitions of {pipeline.name} (never removes one), with a run each.",
    )
    def units_sensor(context: SensorEvaluationContext) -> SensorResult:
        cursor = UnitsCursor.from_string(context.cursor)
        tick = read_units_tick(context, pipeline, source, asset_key, read, noted=cursor.noted)
        if tick.unreadable is not None:
            return SensorResult(skip_reason=tick.unreadable, cursor=context.cursor)
        # Which units are due comes from the table's own state (one snapshot read), never
        # from the cursor alone: a lost cursor still finds every unit that never ran.
        done = load_unit_watermark(pipeline.table.uri, pipeline.name).units
        finished = {u for u, at in done.items() if at is not None}
        failed = FailedAttempts(context, UNIT_TICK_TAG)
        # the requested units still waiting for their commit, in one query; the due ones it
        # requests next are asked one by one (at most max_runs_per_tick)
        waiting = [u for u in cursor.requested if u not in finished]
        failed.prefetch(unit_tick_base(pipeline.name, u) for u in waiting)
        queued = queue_unit_runs(
            tick.listed,
            done=finished,
            requested=cursor.requested,
            cap=settings.max_runs_per_tick,
            failed_runs=lambda unit: failed(unit_tick_base(pipeline.name, unit)),
        )
        report = f"{tick.report} | {queued.describe()}"
        note = ""
        if queued.requested:  # one schema read of the source, when runs would start
            note = source_schema_note(ColumnSpec.replacing(pipeline, [pipeline.watermark.column]))
            report += note
        events = [
            AssetObservation(
                asset_key=event.asset_key,
                metadata={
                    **event.metadata,
                    v.UNITS_WAITING: MetadataValue.int(len(queued.waiting)),
                },
            )
            for event in tick.events
        ]
        events += schema_observations(context.instance, asset_key, note)
        next_cursor = UnitsCursor(
            noted=tick.digest, requested={**queued.in_flight, **queued.requested}
        ).to_string()
        adds = [partitions_def.build_add_request(list(tick.new))] if tick.new else []
        requests = [
            RunRequest(
                run_key=f"{unit_tick_base(pipeline.name, unit)}|a{attempt}",
                partition_key=unit,
                tags={
                    PIPELINE_TAG: pipeline.name,
                    UNIT_TICK_TAG: unit_tick_base(pipeline.name, unit),
                    **pipeline_partition_tags(pipeline.name, unit),
                },
            )
            for unit, attempt in queued.requested.items()
        ]
        return requested_or_skipped(
            context,
            pipeline.name,
            report,
            requests,
            dynamic_partitions_requests=adds,
            asset_events=events,
            cursor=next_cursor,
        )

    return units_sensor


def build_unit_pipeline(pipeline: UnitPipelineConfig, clock: Clock) -> PipelineDefs:
    """Everything of one unit pipeline without ``time`` (the unit kind's ``dagster_defs``):
    static partitions of explicit ids, or dynamic ones with the sensor that adds the ids its
    secondary input lists; fresh by its ``freshness`` alone."""
    units = unit_partitions(pipeline)
    asset = build_unit_asset(pipeline, units, clock)
    check = build_unit_checks(pipeline, asset.key)
    job = pipeline_job(
        pipeline.name,
        asset,
        check,
        units,
        f"Replaces the rows of {pipeline.name}'s units (one commit per unit)",
    )
    sensor = None
    if isinstance(units, DynamicPartitionsDefinition):
        sensor = build_units_sensor(pipeline, job, asset.key, units)
    return PipelineDefs(
        asset,
        check,
        job,
        sensor,
        freshness=freshness_policy(pipeline.freshness, None),
        column_schema=source_schema(pipeline.source),
    )
