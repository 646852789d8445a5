"""Benchmark (issue 21 §2): a file-path pipeline's state read and tick against its history.

Run ``.venv/bin/python benchmarks/bench_state_history.py [--quick] [--sizes 50,500,5000]``. For
each N it builds a ``parquet_commit`` pipeline (no Spark) whose table holds N commits, one tiny
Parquet file each (one per landing hour folder ``date=YYYY-MM-DD/hour=HH``, 24 a day, so 5,000
commits span 208 days): all but the last ``--tail`` (20) straight through the project's committer
(``DeltaCommitter.commit``: the add action, the partition's next txn and the commit metadata that
``commit_batch`` records, the watermark pruned as a run's state is), the last ones by the
project's own commit path (the batch planned on ``load_state``, staged, committed by
``kinds.file_path.commit.commit_batch``, the checkpoint written after each: the first of them reads
the
whole log once, as a pipeline without a checkpoint does). delta-rs checkpoints the table every 100
commits as every writer does; the pipeline keeps the defaults
(``late_arrival_days: 3``, ``sweep.days: 7``, the seed's checkpoint intervals).

Measured (median of ``--reps`` in one process, after one warm-up):

- **state read**: ``state.load.load_state`` (the checkpoint, the table's latest version, the
  commits after the checkpoint);
- **tick (in process)**: the pipeline's Dagster sensor, ``evaluate_tick`` on an ephemeral instance
  with the cursor carried over from tick to tick (the state read, the landing listing; the sweep
  and the closing of empty partitions are due at the first, warm-up tick only);
- **tick (process)**: a fresh interpreter running ``watermark-assets run-sensors`` on this one
  pipeline (idle: no run starts, no Spark), whole wall time, once;
- sizes: the newest commit JSON, the checkpoint file (the state), the whole ``_delta_log``, and
  the entries of the checkpoint's per-partition maps.

A second table does the same for a time pipeline (``state/snapshot.py``): N daily windows, one
commit each carrying its window's txn and time-watermark entry (written directly, as a run writes
them, no Spark), the state snapshot caught up every 50 commits as ticks do; measured: the state
read (``TimeWatermarkLog``: the snapshot and the commits after it), ``decide_tick`` in process,
a ``run-sensors`` process (idle: every window done), the newest commit, the snapshot and the log.

Timings are never asserted; the script exits 1 only when a result is wrong (a state whose
watermark or totals differ from what was committed, a tick that requests a run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from watermark_assets.config import FilePipelineConfig, parse_config  # noqa: E402
from watermark_assets.core.filepath.watermark import FileWatermark  # noqa: E402
from watermark_assets.core.partition_selection import PartitionSelection  # noqa: E402
from watermark_assets.delta.committer import DeltaCommitter, TxnVersion  # noqa: E402
from watermark_assets.delta.stats import describe_data_files  # noqa: E402
from watermark_assets.kinds.file_path.commit import commit_batch  # noqa: E402
from watermark_assets.kinds.file_path.plan import BatchPlan, BatchRequest  # noqa: E402
from watermark_assets.kinds.file_path.stage import stage_batch  # noqa: E402
from watermark_assets.state.commit_metadata import (  # noqa: E402
    COMMIT_METADATA_KEY,
    CommitMetadata,
    txn_app_id,
)
from watermark_assets.state.horizons import pruned_watermark  # noqa: E402
from watermark_assets.state.load import load_state  # noqa: E402

START = datetime(2024, 1, 1, tzinfo=timezone.utc)
SCHEMA = pa.schema([("click_id", pa.int64())])


class BenchmarkError(Exception):
    """A wrong result (not a slow one): the script exits non-zero."""


def config_document(work: Path) -> dict[str, Any]:
    table = str(work / "delta" / "clicks")
    return {
        "spark": {"master": "local[1]"},
        "pipelines": [
            {
                "name": "clicks",
                "source": {"type": "parquet_commit", "uri": table},
                "watermark": {"partition_template": "date=%Y-%m-%d/hour=%H"},
                "table": {"uri": table},
                "partitions": {"granularity": "daily", "start": "2024-01-01"},
            }
        ],
    }


def build(work: Path, commits: int, tail: int) -> tuple[FilePipelineConfig, datetime]:
    """The pipeline and "now" (one hour after the last file) after ``commits`` commits: all but
    the last ``tail`` straight through the project's committer (what ``commit_batch`` commits:
    the file's add action, the partition's next txn, the commit metadata), the last ``tail``
    through ``commit_batch`` itself (planned on the state, checkpoint written after each)."""
    document = config_document(work)
    (work / "pipelines.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
    config = parse_config(yaml.safe_dump(document), env={}, base=work, origin="bench")
    pipeline = config.file_pipeline("clicks")
    table = Path(pipeline.table.uri)
    committer = DeltaCommitter(pipeline.table.uri)
    watermark = FileWatermark.initial()
    txns: dict[str, int] = {}
    when = START
    for number in range(1, commits + 1):
        when = START + timedelta(hours=number - 1)
        path = f"date={when:%Y-%m-%d}/hour={when:%H}/{int(when.timestamp())}-{number:08x}.parquet"
        (table / path).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"click_id": [number]}, schema=SCHEMA), table / path)
        key = f"{when:%Y-%m-%d}"
        if number > commits - tail:
            request = BatchRequest(pipeline, PartitionSelection.of_keys([key]), f"bench-{number}")
            state = load_state(pipeline, now=when)
            plan = BatchPlan(request, state, (path,), {path: key}, ())
            outcome = commit_batch(stage_batch(plan, None, now=when), now=when).outcome
        else:
            before = pruned_watermark(pipeline, watermark, when)
            watermark = before.advance([path])
            app_id = txn_app_id(pipeline.name, key)
            metadata = CommitMetadata(
                pipeline=pipeline.name,
                source=pipeline.source.name,
                run_id=f"bench-{number}",
                partition_keys=(key,),
                watermark_before=before,
                watermark_after=watermark,
                files=1,
                rows_read=1,
                rows_quarantined=0,
                rows_committed=1,
                per_partition={key: {"files": 1, "rows_read": 1, "rows_quarantined": 0}},
                partition_files={path.rsplit("/", 1)[0]: 1},
                source_files=(path,),
                partition_prefixes={key: path.rsplit("/", 1)[0]},
                new_partitions=() if app_id in txns else (key,),
            )
            outcome = committer.commit(
                describe_data_files(pipeline.table.uri, [path], []),
                schema=SCHEMA,
                partition_by=[],
                txns=[TxnVersion.next_of(app_id, txns.get(app_id))],
                custom_metadata={COMMIT_METADATA_KEY: metadata.to_json()},
            )
            txns[app_id] = txns.get(app_id, 0) + 1
        if outcome.version != number - 1:
            raise BenchmarkError(f"commit {number} became version {outcome.version}")
    return pipeline, when + timedelta(hours=1)


def median_ms(call: Callable[[], Any], reps: int) -> tuple[float, Any]:
    result = call()  # warm-up
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, result


def in_process_tick(work: Path, now: datetime) -> Callable[[], Any]:
    from dagster import DagsterInstance, build_sensor_context

    from watermark_assets.config import load_config
    from watermark_assets.defs import build_definitions

    defs = build_definitions(load_config(str(work / "pipelines.yaml")), clock=lambda: now)
    sensor = defs.resolve_sensor_def("clicks_sensor")
    instance = DagsterInstance.ephemeral()
    cursor: list[str | None] = [None]

    def tick() -> Any:
        # the cursor carried over as the daemon does: the first (warm-up) tick sweeps and closes
        # the empty partitions below the horizon; the measured ones are the steady ticks
        context = build_sensor_context(instance=instance, cursor=cursor[0], definitions=defs)
        data = sensor.evaluate_tick(context)
        cursor[0] = data.cursor
        return data

    return tick


def process_tick(work: Path) -> float:
    home = work / "dagster_home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "watermark_assets.cli", "--config", "pipelines.yaml", "run-sensors"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise BenchmarkError(f"run-sensors exited {done.returncode}: {done.stderr[-2000:]}")
    return time.perf_counter() - started


def size(path: Path) -> int:
    return (
        sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        if path.is_dir()
        else (path.stat().st_size)
    )


def kb(value: int) -> str:
    return f"{value / 1024:.1f} KiB"


def measure(commits: int, reps: int, cold: bool, tail: int) -> list[str]:
    import json

    work = Path(tempfile.mkdtemp(prefix=f"bench_state_{commits}_"))
    try:
        started = time.perf_counter()
        pipeline, now = build(work, commits, min(tail, commits))
        built = time.perf_counter() - started
        read_ms, state = median_ms(lambda: load_state(pipeline, now=now), reps)
        if (state.totals.files, state.delta_version) != (commits, commits - 1):
            raise BenchmarkError(f"the state says {state.totals} at {state.delta_version}")
        tick_ms, data = median_ms(in_process_tick(work, now), reps)
        if data.run_requests:
            raise BenchmarkError(f"an idle tick requested {len(data.run_requests)} runs")
        whole = f"{process_tick(work):.2f} s" if cold else "-"
        log = Path(pipeline.table.uri) / "_delta_log"
        newest = max(log.glob("*.json"), key=lambda p: int(p.stem))
        checkpoint = Path(pipeline.checkpoint_uri)
        saved = json.loads(checkpoint.read_text(encoding="utf-8"))
        entries = sum(len(saved.get(k, {})) for k in ("partition_watermarks", "partition_rows"))
        return [
            str(commits),
            f"{read_ms:.1f}",
            f"{tick_ms:.1f}",
            whole,
            kb(newest.stat().st_size),
            kb(checkpoint.stat().st_size),
            str(entries),
            kb(size(log)),
            f"{built:.0f} s",
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)


HEADERS = [
    "N commits",
    "state read ms",
    "tick ms",
    "tick (process)",
    "newest commit",
    "checkpoint (state)",
    "map entries",
    "_delta_log",
    "build",
]


def print_table(rows: Sequence[Sequence[str]], headers: Sequence[str] = HEADERS) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print("  ".join(h.rjust(w) for h, w in zip(headers, widths)))
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))


# --- the time kind: a time pipeline's state (state/snapshot.py) against its history ---------

TIME_HEADERS = [
    "N commits",
    "state read ms",
    "tick ms",
    "tick (process)",
    "newest commit",
    "snapshot (state)",
    "_delta_log",
]


def time_document(work: Path) -> dict[str, Any]:
    """A daily time pipeline from 2000-01-01 over a Delta source (never read: no run starts)."""
    return {
        "pipelines": [
            {
                "name": "orders_daily",
                "source": {"type": "delta_table", "uri": str(work / "source")},
                "watermark": {
                    "kind": "time",
                    "column": "updated_at",
                    "from": "2000-01-01",
                    "to": "P0D",
                    "partition": "daily",
                },
                "table": {"uri": str(work / "delta" / "orders_daily")},
            }
        ]
    }


def build_time(work: Path, commits: int) -> tuple[Any, datetime]:
    """N daily windows committed, one commit each, as a time run commits them: the window's
    rows, its txn and the time watermark entry (the log read once more after each 50 commits,
    as ticks do: the state snapshot follows)."""
    from deltalake import write_deltalake
    from deltalake.transaction import CommitProperties, Transaction

    from watermark_assets.config import TimePipelineConfig
    from watermark_assets.core.partition_selection import TimeWindow
    from watermark_assets.core.time import TimeWatermark, format_instant
    from watermark_assets.kinds.time.run import TimeWatermarkLog, time_metadata_key, window_app_id

    document = time_document(work)
    write_deltalake(  # the source exists (never read: every window is done)
        str(work / "source"),
        pa.table({"id": [0], "updated_at": [datetime(2000, 1, 1, tzinfo=timezone.utc)]}),
    )
    (work / "pipelines.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
    pipeline = parse_config(yaml.safe_dump(document), env={}, base=work, origin="bench").pipeline(
        "orders_daily"
    )
    assert isinstance(pipeline, TimePipelineConfig)
    start = datetime(2000, 1, 1, tzinfo=timezone.utc)
    watermark = TimeWatermark.empty()
    key = time_metadata_key(pipeline.name)
    for n in range(commits):
        window = TimeWindow(start + timedelta(days=n), start + timedelta(days=n + 1))
        watermark = watermark.advance(window)
        entry = {
            "watermark": watermark.to_json(),
            "window": [format_instant(window.start), format_instant(window.end)],
        }
        rows = pa.table({"id": [n], "updated_at": [window.start]})
        write_deltalake(
            pipeline.table.uri,
            rows,
            mode="append",
            commit_properties=CommitProperties(
                custom_metadata={key: json.dumps(entry)},
                app_transactions=[Transaction(window_app_id(pipeline.name, window), 1)],
            ),
        )
        if n % 50 == 49:
            TimeWatermarkLog(pipeline).read()
    TimeWatermarkLog(pipeline).read()
    now = start + timedelta(days=commits)  # at midnight: every window done, the tick is idle
    return pipeline, now


def measure_time(commits: int, reps: int, cold: bool) -> list[str]:
    from watermark_assets.kinds.time.defs import decide_tick
    from watermark_assets.kinds.time.run import TimeWatermarkLog
    from watermark_assets.state.store import state_file_uri

    with tempfile.TemporaryDirectory(prefix=f"bench_time_{commits}_") as folder:
        work = Path(folder)
        pipeline, now = build_time(work, commits)
        read_ms, watermark = median_ms(lambda: TimeWatermarkLog(pipeline).read(), reps)
        covered = watermark.covered()
        if len(covered) != 1 or covered[0].end != now:
            raise BenchmarkError(f"the time watermark read back covers {covered}")
        tick_ms, tick = median_ms(lambda: decide_tick(pipeline, now), reps)
        if tick.keys:
            raise BenchmarkError(f"an idle tick wanted {tick.keys[:3]}")
        process = f"{process_tick(work):.2f} s" if cold else "-"
        log = Path(pipeline.table.uri) / "_delta_log"
        newest = max(log.glob("*.json"), key=lambda p: int(p.stem))
        key = "watermark_assets.time/orders_daily"
        snapshot = Path(state_file_uri(pipeline.table.uri, key))
        return [
            str(commits),
            f"{read_ms:.1f}",
            f"{tick_ms:.1f}",
            process,
            kb(size(newest)),
            kb(size(snapshot)),
            kb(size(log)),
        ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="50,500,5000", help="commit counts, comma-separated")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--no-cold", action="store_true", help="skip the whole-process tick")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument(
        "--tail", type=int, default=20, help="the last N commits go through commit_batch"
    )
    args = parser.parse_args(argv)
    sizes = [8] if args.quick else [int(n) for n in args.sizes.split(",")]
    reps = 1 if args.quick else args.reps
    started = time.perf_counter()
    try:
        rows = [measure(n, reps, not args.no_cold, args.tail) for n in sizes]
        time_rows = [measure_time(n, reps, not args.no_cold) for n in sizes]
    except BenchmarkError as error:
        print(f"wrong result: {error}", file=sys.stderr)
        return 1
    print("file-path state against its history (parquet_commit, one file per commit)")
    print_table(rows)
    print()
    print("time-watermark state against its history (daily windows, one commit each)")
    print_table(time_rows, TIME_HEADERS)
    print(f"total wall time {time.perf_counter() - started:.0f} s, exit 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
