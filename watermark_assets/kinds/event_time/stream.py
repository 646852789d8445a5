"""The same event-time window aggregate on Spark Structured Streaming (issue 9 §4).

One run is one ``trigger(availableNow=True)`` of a real streaming query: a file stream source
over the upstream pipeline's landing folder, ``withWatermark(event column, delay)``, the tumbling
window aggregation in append mode, and ``foreachBatch``, which stages each micro-batch's emitted
windows as Parquet and commits them to the output Delta table with ``deltalake``: one commit per
micro-batch, with the txn ``(watermark_assets/{pipeline}/stream, batch id + 1)``. A micro-batch
that Spark replays after a crash (its offsets were logged, its commit log entry was not) finds
its txn in the table and adds nothing. The streaming checkpoint lives next to the output table
(``{table}_checkpoint``).

Spark drops late rows (a null event time, or a window already closed by the watermark of the
previous micro-batch). Nothing is silently dropped here: before committing a micro-batch's
windows, ``foreachBatch`` reads again the files that micro-batch read (the checkpoint's file source
log) and commits the rows that are late by Spark's rule to the late table, with the same txn.
Spark's own count (``numRowsDroppedByWatermark``) is reported too; it is taken after its partial
aggregation, so it is one per late window and task, not one per late event. Structured
Streaming has no distinct aggregation, so a ``count_distinct`` aggregate is refused here (the
batch engine has it).

Spark's semantics are the batch engine's (``kinds/event_time/window.py``): late rows are judged
with the watermark the micro-batch started with; after the data, ``availableNow`` runs a no-data
micro-batch that emits the windows the new watermark closed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from watermark_assets import names, storage
from watermark_assets.core.clock import ensure_utc
from watermark_assets.core.event_time import format_duration_ms
from watermark_assets.core.time.instant import format_millis, parse_millis
from watermark_assets.delta.committer import TxnVersion, committer_for
from watermark_assets.engine.write import Append, RunRecord
from watermark_assets.exceptions import DeltaCommitError
from watermark_assets.kinds.event_time.window import commit_staged, stage_frame
from watermark_assets.runs.faults import crash_point
from watermark_assets.spark.window_agg import WINDOW_END, WINDOW_START, Aggregate

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True, kw_only=True)
class StreamSpec:
    """What the streaming query needs, as plain values."""

    pipeline: str
    landing_uri: str
    file_format: str  # json (NDJSON), csv, parquet
    schema_ddl: str
    event_column: str
    delay_ms: int
    window_ms: int
    aggregates: tuple[Aggregate, ...]
    output_uri: str
    #: the rows Spark drops as late are kept here (default: the output table + ``_late``)
    late_table_uri: str | None = None

    @property
    def late_uri(self) -> str:
        return self.late_table_uri or self.output_uri.rstrip("/") + names.LATE_TABLE_SUFFIX

    def __post_init__(self) -> None:
        distinct = [a.name for a in self.aggregates if a.function == "count_distinct"]
        if distinct:
            raise ValueError(
                f"aggregates {distinct} are count_distinct, which Structured Streaming does not "
                "support (no distinct aggregation on a stream); use engine: batch"
            )

    @property
    def app_id(self) -> str:
        return names.stream_app_id(self.pipeline)

    @property
    def checkpoint_uri(self) -> str:
        return self.output_uri.rstrip("/") + names.STREAM_CHECKPOINT_SUFFIX

    @property
    def metadata_key(self) -> str:
        return names.event_stream_key(self.pipeline)


@dataclass(kw_only=True)
class StreamRunResult:
    """What one availableNow trigger did."""

    batches: list[int] = field(default_factory=list)
    windows_emitted: int = 0
    rows_read: int = 0
    late_dropped: int = 0
    #: late rows kept in the late table (read again from the files each micro-batch read)
    late_kept: int = 0
    #: the watermark of the newest micro-batch committed (None: none yet)
    watermark_ms: int | None = None
    versions: list[int] = field(default_factory=list)


def _aggregate_columns(aggregates: Sequence[Aggregate]) -> list[Any]:
    from pyspark.sql import functions as F

    columns = []
    for a in aggregates:
        if a.function == "count":
            columns.append(F.count(F.lit(1)).alias(a.name))
        else:
            columns.append(getattr(F, a.function)(F.col(str(a.column))).alias(a.name))
    return columns


def windowed_stream(spark: SparkSession, spec: StreamSpec) -> DataFrame:
    """The streaming plan: the file source, the watermark, the windowed aggregation."""
    from pyspark.sql import functions as F

    from watermark_assets.spark.paths import literal_path

    reader = spark.readStream.schema(spec.schema_ddl).format(spec.file_format)
    source = reader.load(literal_path(spec.landing_uri))  # a '*' in a folder name is no glob
    size = format_duration_ms(spec.window_ms)
    return (
        source.where(F.col(spec.event_column).isNotNull())  # kept as late rows, never aggregated
        .withWatermark(spec.event_column, format_duration_ms(spec.delay_ms))
        .groupBy(F.window(F.col(spec.event_column), size))
        .agg(*_aggregate_columns(spec.aggregates))
        .select(
            F.col("window.start").alias(WINDOW_START),
            F.col("window.end").alias(WINDOW_END),
            *[a.name for a in spec.aggregates],
        )
    )


def run_window_stream(
    spark: SparkSession, spec: StreamSpec, *, now: datetime, run_id: str
) -> StreamRunResult:
    """One ``availableNow`` trigger of the query (module docstring), until it is done."""
    result = StreamRunResult()
    token = f"{ensure_utc(now):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"

    def commit_batch(frame: DataFrame, batch_id: int) -> None:
        watermark_ms = batch_watermark_ms(spec, batch_id)
        entry = {"batch_id": batch_id, "run_id": run_id, "watermark": format_millis(watermark_ms)}
        # first the rows Spark drops as late in this micro-batch, then its windows: a replay
        # after a crash between the two finds the first committed and commits the second
        late = late_rows_of_batch(spark, spec, batch_id, run_id)
        if late is not None:
            _, kept = _commit_frame(spec, late, spec.late_uri, batch_id, token, entry)
            result.late_kept += kept
            crash_point("event_stream_after_late")  # the exactly-once tests kill here
        version, rows = _commit_frame(
            spec,
            frame.repartition(1).sortWithinPartitions(WINDOW_START),
            spec.output_uri,
            batch_id,
            token,
            entry,
        )
        crash_point("event_stream_after_output")  # before Spark's commit log: a replay
        if version is not None:
            result.batches.append(batch_id)
            result.windows_emitted += rows
            result.versions.append(version)

    from watermark_assets.spark.paths import spark_path

    query = (
        windowed_stream(spark, spec)
        .writeStream.outputMode("append")
        .foreachBatch(commit_batch)
        .option("checkpointLocation", spark_path(spec.checkpoint_uri))
        .trigger(availableNow=True)
        .queryName(f"watermark_assets_{spec.pipeline}_{uuid.uuid4().hex[:6]}")
        .start()
    )
    query.awaitTermination()
    for progress in query.recentProgress:
        result.rows_read += int(progress.get("numInputRows", 0))
        for operator in progress.get("stateOperators", []):
            result.late_dropped += int(operator.get("numRowsDroppedByWatermark", 0))
    result.watermark_ms = committed_watermark_ms(spec)
    return result


def _commit_frame(
    spec: StreamSpec,
    frame: DataFrame,
    table_uri: str,
    batch_id: int,
    token: str,
    entry: dict[str, Any],
) -> tuple[int | None, int]:
    """ONE commit of ``frame`` to ``table_uri`` with the txn ``(query, batch id + 1)`` (an
    :class:`~watermark_assets.engine.write.Append` through the batch engine's
    :func:`~watermark_assets.kinds.event_time.window.commit_staged`); nothing when the table holds
    it
    already (a replayed micro-batch). The version and the rows."""
    committer = committer_for(table_uri)
    version = batch_id + 1  # txn versions start at 1
    committed = committer.transaction_version(spec.app_id)
    if (committed or 0) >= version:
        # a replayed micro-batch whose rows are committed: the frame is still computed (to the
        # noop sink), since Spark checks that foreachBatch committed every state partition
        frame.write.format("noop").mode("overwrite").save()
        return None, 0
    staged, schema, rows = stage_frame(spec.pipeline, frame, table_uri, f"stream-{batch_id}", token)
    record = RunRecord(
        (TxnVersion(spec.app_id, version, committed),),
        {spec.metadata_key: json.dumps({**entry, "rows": rows})},
        records_completion=True,  # a micro-batch commits, rows or not
    )
    committed_as = commit_staged(
        spec.pipeline, committer, [staged], Append(), record, schema, batch=batch_id
    )
    return committed_as, rows


def _offsets(spec: StreamSpec, batch_id: int) -> tuple[int, int | None]:
    """A micro-batch's offsets file: its watermark and its file source's log offset (None before
    the source had a file)."""
    fs, root = storage.filesystem(spec.checkpoint_uri)
    with fs.open(f"{root}/offsets/{batch_id}", "r") as handle:
        lines = handle.read().splitlines()
    metadata = json.loads(lines[1])  # "v1", the batch's metadata, then one line per source
    source = json.loads(lines[2]) if len(lines) > 2 and lines[2] != "-" else {}
    offset = source.get("logOffset") if isinstance(source, dict) else None
    return int(metadata.get("batchWatermarkMs", 0)), None if offset is None else int(offset)


def batch_files(spec: StreamSpec, batch_id: int) -> list[str]:
    """The files micro-batch ``batch_id`` read: the file source log's entries after the
    previous batch's log offset up to its own (``sources/0/K``, or a ``.compact`` file that
    holds older entries)."""
    _, upto = _offsets(spec, batch_id)
    if upto is None:
        return []
    after = _offsets(spec, batch_id - 1)[1] if batch_id > 0 else None
    first = 0 if after is None else after + 1
    fs, root = storage.filesystem(spec.checkpoint_uri)
    folder = f"{root}/sources/0"
    names = {p.rsplit("/", 1)[-1] for p in fs.ls(folder, detail=False)}
    paths: list[str] = []
    for log_id in range(first, upto + 1):
        name = str(log_id) if str(log_id) in names else None
        if name is None:  # compacted: the first .compact at or after it holds its entries
            compacts = sorted(
                int(n.removesuffix(".compact")) for n in names if n.endswith(".compact")
            )
            holder = next((c for c in compacts if c >= log_id), None)
            if holder is None:
                raise DeltaCommitError(
                    f"the streaming checkpoint {spec.checkpoint_uri!r} lost file source log "
                    f"entry {log_id}; the late records of micro-batch {batch_id} cannot be read",
                    table_uri=spec.output_uri,
                )
            name = f"{holder}.compact"
        with fs.open(f"{folder}/{name}", "r") as handle:
            for line in handle.read().splitlines()[1:]:
                record = json.loads(line)
                if int(record.get("batchId", log_id)) == log_id:
                    paths.append(str(record["path"]))
    return paths


def late_rows_of_batch(
    spark: SparkSession, spec: StreamSpec, batch_id: int, run_id: str
) -> DataFrame | None:
    """The rows micro-batch ``batch_id`` read that Spark drops as late: a null event time, or a
    window already closed by the watermark Spark judges late rows with (the previous batch's,
    ``eventTimeWatermarkForLateEvents``). Read again from the files the batch read; None when it
    read none (a no-data micro-batch)."""
    from watermark_assets.spark import window_agg
    from watermark_assets.spark.paths import literal_path

    files = batch_files(spec, batch_id)
    if not files:
        return None
    judged_by = _offsets(spec, batch_id - 1)[0] if batch_id > 0 else 0
    raw = spark.read.schema(spec.schema_ddl).format(spec.file_format)
    framed = window_agg.with_window(
        # the log holds URIs (a space is %20; '+' stays '+', so unquote is exact)
        raw.load([literal_path(unquote(p)) for p in files]),
        spec.event_column,
        spec.window_ms,
        0,
    )
    return window_agg.late_records(
        framed,
        window_agg.late_condition(spec.event_column, judged_by),
        event_column=spec.event_column,
        watermark_ms=judged_by,
        run_id=run_id,
        batch=batch_id,
    )


def batch_watermark_ms(spec: StreamSpec, batch_id: int) -> int:
    """The watermark micro-batch ``batch_id`` runs with (late rows judged and windows closed by
    it), from its offsets file in the checkpoint, which Spark writes before running the batch:
    the watermark committed with the batch's windows."""
    fs, root = storage.filesystem(spec.checkpoint_uri)
    with fs.open(f"{root}/offsets/{batch_id}", "r") as handle:
        lines = handle.read().splitlines()
    metadata = json.loads(lines[1])  # "v1", then the batch's metadata, then the offsets
    return int(metadata.get("batchWatermarkMs", 0))


def committed_watermark_ms(spec: StreamSpec) -> int | None:
    """The watermark of the newest micro-batch committed to the output table; None before.

    The output's txn version says which micro-batch (``batch id + 1``; a checkpoint keeps it),
    and Spark's offsets file of that batch its watermark (the one its commit recorded): neither
    depends on the output's log, whose commits (and their ``commitInfo``) a maintenance job may
    clean up. A streaming checkpoint without that offsets file: the newest commit still in the
    log that recorded one."""
    committer = committer_for(spec.output_uri)
    committed = committer.transaction_version(spec.app_id)
    if committed is None:
        return None
    try:
        return batch_watermark_ms(spec, committed - 1)
    except FileNotFoundError:
        pass
    version = committer.current_version()
    while version is not None and version >= 0:
        try:
            record = committer.read_commit(version)
        except DeltaCommitError:
            break  # cleaned up from here on
        entry = record.custom_metadata.get(spec.metadata_key)
        if entry is not None:
            return parse_millis(json.loads(entry)["watermark"])
        version -= 1
    raise DeltaCommitError(
        f"pipeline {spec.pipeline!r}: the output table {spec.output_uri!r} holds micro-batch "
        f"{committed - 1}, but neither the streaming checkpoint {spec.checkpoint_uri!r} nor the "
        "table's log records its watermark; restore the checkpoint, or rebuild the output and "
        "its checkpoint",
        table_uri=spec.output_uri,
    )
