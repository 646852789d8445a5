"""The same event-time window aggregate on Spark Structured Streaming (issue 9 §4).

One run is one ``trigger(availableNow=True)`` of a real streaming query: a file stream source
over the upstream pipeline's landing folder, ``withWatermark(event column, delay)``, the tumbling
window aggregation in append mode, and ``foreachBatch``, which stages each micro-batch's emitted
windows as Parquet and commits them to the output Delta table with ``deltalake``: one commit per
micro-batch, with the txn ``(watermark_assets/{pipeline}/stream, batch id + 1)``. A micro-batch
that Spark replays after a crash (its offsets were logged, its commit log entry was not) finds
its txn in the table and adds nothing. The streaming checkpoint lives next to the output table
(``{table}_checkpoint``).

Spark drops late rows (their window was already closed by the watermark of the previous
micro-batch); it reports how many in each micro-batch's progress (``numRowsDroppedByWatermark``).
That count is taken after Spark's partial aggregation, so it is one per late window and task, not
one per late event (the benchmark shows 7 dropped for 10 late events): the batch engine, which
keeps every late event, is the one to use when late records matter. Structured Streaming has no
distinct aggregation, so a ``count_distinct`` aggregate is refused here (the batch engine has it).

Spark's semantics are the batch engine's (``runs/event_window.py``): late rows are judged with the
watermark the micro-batch started with; after the data, ``availableNow`` runs a no-data
micro-batch that emits the windows the new watermark closed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from watermark_assets import storage
from watermark_assets.core.clock import ensure_utc
from watermark_assets.core.event_time import format_duration_ms
from watermark_assets.core.time.instant import format_millis, parse_millis
from watermark_assets.delta.committer import DeltaCommitter, TxnVersion
from watermark_assets.delta.stats import describe_data_files
from watermark_assets.exceptions import DeltaCommitError
from watermark_assets.spark.window_agg import WINDOW_END, WINDOW_START, Aggregate
from watermark_assets.staging import STAGING_DIR, list_parquet, move_into_table, remove_tree

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

    def __post_init__(self) -> None:
        distinct = [a.name for a in self.aggregates if a.function == "count_distinct"]
        if distinct:
            raise ValueError(
                f"aggregates {distinct} are count_distinct, which Structured Streaming does not "
                "support (no distinct aggregation on a stream); use engine: batch"
            )

    @property
    def app_id(self) -> str:
        return f"watermark_assets/{self.pipeline}/stream"

    @property
    def checkpoint_uri(self) -> str:
        return self.output_uri.rstrip("/") + "_checkpoint"

    @property
    def metadata_key(self) -> str:
        return f"watermark_assets.event_stream/{self.pipeline}"


@dataclass(kw_only=True)
class StreamRunResult:
    """What one availableNow trigger did."""

    batches: list[int] = field(default_factory=list)
    windows_emitted: int = 0
    rows_read: int = 0
    late_dropped: int = 0
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

    from watermark_assets.spark.paths import spark_path

    reader = spark.readStream.schema(spec.schema_ddl).format(spec.file_format)
    source = reader.load(spark_path(spec.landing_uri))
    size = format_duration_ms(spec.window_ms)
    return (
        source.withWatermark(spec.event_column, format_duration_ms(spec.delay_ms))
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
    committer = DeltaCommitter(spec.output_uri)
    token = f"{ensure_utc(now):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"

    def commit_batch(frame: DataFrame, batch_id: int) -> None:
        version = batch_id + 1  # txn versions start at 1
        committed = committer.transaction_version(spec.app_id)
        if (committed or 0) >= version:
            return  # a replayed micro-batch: its windows are committed already
        staged = storage.join(spec.output_uri, f"{STAGING_DIR}/{token}-stream-{batch_id}")
        _write_sorted(frame, staged)
        files = list_parquet(staged)
        if not files:
            raise DeltaCommitError(
                f"micro-batch {batch_id} of {spec.pipeline!r}: Spark wrote no Parquet file under "
                f"{staged!r}",
                table_uri=spec.output_uri,
            )
        schema = storage.parquet_schema(files[0])
        rows = sum(storage_rows(f) for f in files)
        relative = (
            move_into_table(files, staged, spec.output_uri, f"{token}-{batch_id}") if rows else []
        )
        remove_tree(staged)
        watermark_ms = batch_watermark_ms(spec, batch_id)
        metadata = {
            spec.metadata_key: json.dumps(
                {
                    "batch_id": batch_id,
                    "run_id": run_id,
                    "windows": rows,
                    "watermark": format_millis(watermark_ms),
                }
            )
        }
        outcome = committer.commit(
            describe_data_files(spec.output_uri, relative, []),
            schema=schema,
            partition_by=(),
            txns=[TxnVersion(spec.app_id, version, committed)],
            custom_metadata=metadata,
        )
        if outcome.stale:
            raise DeltaCommitError(
                f"micro-batch {batch_id} of {spec.pipeline!r} was committed by another writer at "
                f"the same time ({outcome.reason}); stop the other query",
                table_uri=spec.output_uri,
            )
        result.batches.append(batch_id)
        result.windows_emitted += rows
        if outcome.version is not None:
            result.versions.append(outcome.version)

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
    """The watermark recorded by the output table's newest micro-batch commit; None before."""
    committer = DeltaCommitter(spec.output_uri)
    version = committer.current_version()
    while version is not None and version >= 0:
        entry = committer.read_commit(version).custom_metadata.get(spec.metadata_key)
        if entry is not None:
            watermark = parse_millis(json.loads(entry)["watermark"])
            return watermark
        version -= 1
    return None


def _write_sorted(frame: DataFrame, staged: str) -> None:
    """The emitted windows as one Parquet file, in window order (the batch engine's output)."""
    from watermark_assets.spark.paths import spark_path

    frame.repartition(1).sortWithinPartitions(WINDOW_START).write.mode("errorifexists").parquet(
        spark_path(staged)
    )


def storage_rows(uri: str) -> int:
    """Rows of one Parquet file, from its footer."""
    import pyarrow.parquet as pq

    fs, path = storage.filesystem(uri)
    return int(pq.read_metadata(path, filesystem=fs).num_rows)
