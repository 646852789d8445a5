"""Benchmark: the event-time aggregate's batch engine against Structured Streaming (issue 9 §5).

Run ``make bench-event-time`` or ``.venv/bin/python benchmarks/bench_event_time.py [--quick]``.
One run measures both engines on the same events, because machines are shared and noisy: compare
the ratios, never absolute timings from different runs. Timings are never asserted; the script
exits 1 only when a result is wrong (the two engines' output tables or late counts differ).

Setup (not timed): ``--events`` events (default 1,000,000) over 10 hours of event time, in
``--files`` files, the same rows (a) as gzip NDJSON landing files for the streaming query and (b)
as appends to a Delta table (one commit per file, as ingestion runs commit them) for the batch
engine. Each file's events are ordered by time with some disorder, and the last file also holds
late events of the first hour.

Runs, per engine, in one process with one Spark session (warm): run 1 reads the first 90% of the
files, run 2 the last 10% (an incremental run), each with 5-minute windows, a 10-minute delay and
``count``, ``sum(amount)``, ``max(user_id)``. ``--cold``: also one whole process per engine that
starts Spark and does run 1 on a fresh copy (what a user's first materialization feels).
Sizes: the batch engine's state table, and the streaming query's checkpoint (its state store).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

T0 = datetime(2024, 1, 30, tzinfo=timezone.utc)
SCHEMA = "id BIGINT, event_time TIMESTAMP, user_id BIGINT, amount DOUBLE"
RESULT_PREFIX = "BENCH_EVENT_TIME_RESULT "


class BenchmarkError(Exception):
    """A wrong result (not a slow one): the script exits non-zero."""


def generate(root: Path, events: int, files: int, seed: int = 5) -> None:
    """The landing files and the upstream Delta table, with the same events."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    per_file = events // files
    span = timedelta(hours=10) / files
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("event_time", pa.timestamp("us", "UTC")),
            ("user_id", pa.int64()),
            ("amount", pa.float64()),
        ]
    )
    (root / "landing").mkdir(parents=True)
    for number in range(files):
        start = T0 + span * number
        rows = []
        for k in range(per_file):
            moment = start + span * (k / per_file) + timedelta(seconds=rng.uniform(-120, 0))
            if number == files - 1 and k % 100 == 0:  # late: the first hour
                moment = T0 + timedelta(seconds=rng.uniform(0, 3600))
            rows.append(
                {
                    "id": number * per_file + k,
                    "event_time": moment,
                    "user_id": rng.randrange(1, 50_000),
                    "amount": round(rng.uniform(1, 500), 2),
                }
            )
        path = root / "landing" / f"part-{number:04d}.ndjson.gz"
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps({**row, "event_time": row["event_time"].isoformat()}))
                handle.write("\n")
        (root / "parquet").mkdir(exist_ok=True)
        pq.write_table(
            pa.Table.from_pylist(rows, schema=schema),
            root / "parquet" / f"part-{number:04d}.parquet",
        )


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def engines(root: Path) -> tuple[Any, Any]:
    from watermark_assets.core.event_time import TumblingWindows, WatermarkTracker
    from watermark_assets.kinds.event_time.stream import StreamSpec
    from watermark_assets.kinds.event_time.window import WindowAggregateSpec
    from watermark_assets.spark.window_agg import Aggregate

    aggregates = (
        Aggregate.parse("events", "count"),
        Aggregate.parse("amount", "sum(amount)"),
        Aggregate.parse("top_user", "max(user_id)"),
    )
    batch = WindowAggregateSpec(
        pipeline="bench",
        upstreams={"events": str(root / "events")},
        event_column="event_time",
        tracker=WatermarkTracker(delays_ms={"events": 600_000}),
        windows=TumblingWindows(size_ms=300_000),
        aggregates=aggregates,
        output_uri=str(root / "batch" / "out"),
        late_uri=str(root / "batch" / "out_late"),
        state_uri=str(root / "batch" / "out_state"),
    )
    stream = StreamSpec(
        pipeline="bench",
        landing_uri=str(root / "stream_landing"),
        file_format="json",
        schema_ddl=SCHEMA,
        event_column="event_time",
        delay_ms=600_000,
        window_ms=300_000,
        aggregates=aggregates,
        output_uri=str(root / "stream" / "out"),
    )
    return batch, stream


def upstream_until(root: Path, files: int) -> None:
    """The first ``files`` files have landed: copied to the streaming landing folder, and
    appended to the upstream Delta table (one commit each, as ingestion runs commit them)."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, write_deltalake

    landing = root / "stream_landing"
    landing.mkdir(exist_ok=True)
    for path in sorted((root / "landing").iterdir())[:files]:
        if not (landing / path.name).exists():
            shutil.copy(path, landing / path.name)
    events = root / "events"
    done = DeltaTable(str(events)).version() + 1 if (events / "_delta_log").exists() else 0
    for path in sorted((root / "parquet").iterdir())[done:files]:
        write_deltalake(str(events), pq.read_table(path), mode="append")


def run_engine(spark: Any, name: str, batch: Any, stream: Any, now: datetime) -> dict[str, Any]:
    from watermark_assets.kinds.event_time.stream import run_window_stream
    from watermark_assets.kinds.event_time.window import run_window_batch

    started = time.perf_counter()
    if name == "batch":
        result = run_window_batch(spark, batch, now=now, run_id="bench")
        late, watermark = result.late_rows, result.watermark_after.watermark_ms
    else:
        streamed = run_window_stream(spark, stream, now=now, run_id="bench")
        late, watermark = streamed.late_kept, streamed.watermark_ms or 0
        dropped = streamed.late_dropped
        return {
            "seconds": time.perf_counter() - started,
            "late": late,
            "watermark": watermark,
            "dropped": dropped,
        }
    return {"seconds": time.perf_counter() - started, "late": late, "watermark": watermark}


def output(uri: str) -> list[tuple[Any, ...]]:
    from deltalake import DeltaTable

    rows = DeltaTable(uri).to_pyarrow_table().to_pylist()
    return sorted(
        (r["window_start"], r["events"], round(r["amount"], 2), r["top_user"]) for r in rows
    )


def cold_case(root: Path, name: str, files: int) -> float:
    """One whole process: Python, Spark start-up and run 1 of ``name`` on a fresh copy."""
    fresh = Path(tempfile.mkdtemp(prefix=f"bench-cold-{name}-"))
    try:
        shutil.copytree(root / "landing", fresh / "landing")
        shutil.copytree(root / "parquet", fresh / "parquet")
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, __file__, "--case", name, "--root", str(fresh), "--files", str(files)],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        )
        if done.returncode != 0:
            raise BenchmarkError(f"cold {name} failed: {done.stderr[-2000:]}")
        return time.perf_counter() - started
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="20,000 events, no cold processes")
    parser.add_argument("--cold", action="store_true", help="also one whole process per engine")
    parser.add_argument("--case", choices=("batch", "streaming"), help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from watermark_assets.spark.session import get_spark

    if args.case:  # a cold process: start Spark, run 1, exit
        root = Path(args.root)
        first = args.files - max(1, args.files // 10)
        upstream_until(root, first)
        batch, stream = engines(root)
        spark = get_spark("local[2]", {"spark.ui.enabled": "false", "spark.log.level": "ERROR"})
        run_engine(spark, args.case, batch, stream, T0 + timedelta(hours=11))
        return 0

    events = 20_000 if args.quick else args.events
    started_all = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="bench-event-time-"))
    try:
        generate(root, events, args.files)
        spark_started = time.perf_counter()
        spark = get_spark("local[2]", {"spark.ui.enabled": "false", "spark.log.level": "ERROR"})
        spark_seconds = time.perf_counter() - spark_started
        batch, stream = engines(root)
        first = args.files - max(1, args.files // 10)
        table: list[list[str]] = []
        results: dict[str, list[dict[str, Any]]] = {"batch": [], "streaming": []}
        for step, files in (
            ("run 1 (90% of the files)", first),
            ("run 2 (the last 10%)", args.files),
        ):
            upstream_until(root, files)
            for name in ("batch", "streaming"):
                result = run_engine(spark, name, batch, stream, T0 + timedelta(hours=11))
                results[name].append(result)
                table.append([step, name, f"{result['seconds']:.2f}", str(result["late"])])
        if output(batch.output_uri) != output(stream.output_uri):
            raise BenchmarkError("the two engines' output tables differ")
        lates = [sum(r["late"] for r in results[n]) for n in ("batch", "streaming")]
        dropped = sum(r.get("dropped", 0) for r in results["streaming"])
        if lates[0] != lates[1]:
            raise BenchmarkError(f"late rows kept differ: batch {lates[0]}, streaming {lates[1]}")
        # Spark counts what its stateful operator dropped AFTER the partial aggregation: one row
        # per (late window, task), so at most the late events, and none exactly when none
        if not (0 < dropped <= lates[0]) and (dropped, lates[0]) != (0, 0):
            raise BenchmarkError(f"Spark dropped {dropped} rows for {lates[0]} late events")
        cold = (
            {n: cold_case(root, n, args.files) for n in ("batch", "streaming")}
            if args.cold and not args.quick
            else {}
        )
        print(
            f"Event-time aggregate, {events:,} events in {args.files} files, 5-minute windows, "
            "delay 10 minutes (one process, one Spark session; seconds)"
        )
        headers = ["run", "engine", "seconds", "late rows"]
        widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(headers)]
        print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
        print("  ".join("-" * w for w in widths))
        for row in table:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
        for step in (0, 1):
            ratio = results["streaming"][step]["seconds"] / results["batch"][step]["seconds"]
            print(f"  run {step + 1}: streaming / batch = {ratio:.2f}x")
        windows = len(output(batch.output_uri))
        print(
            f"  output: {windows} windows, identical in both engines; late: both kept {lates[0]} "
            f"events; Spark reported {dropped} dropped rows (counted after its partial "
            "aggregation: one per late window and task)"
        )
        print(
            f"  state: batch state table {folder_bytes(Path(batch.state_uri)):,} bytes; "
            f"streaming checkpoint {folder_bytes(Path(stream.checkpoint_uri)):,} bytes"
        )
        print(f"  Spark start-up {spark_seconds:.1f}s (not counted above)")
        for name, seconds in cold.items():
            print(f"  cold process, {name}: {seconds:.1f}s (Python + Spark start-up + run 1)")
        print(f"total wall time {time.perf_counter() - started_all:.0f}s; exit 0")
        return 0
    except BenchmarkError as error:
        print(f"WRONG RESULT: {error}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
