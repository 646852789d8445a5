"""Benchmark (issue 8 §5): the tick that decides which time partitions run, against Dagster.

Run ``make bench-time`` or ``.venv/bin/python benchmarks/bench_time_tick.py [--quick]``. One run
measures every side on the same data, because machines are shared and noisy: compare ratios,
never absolute timings from different runs. Nothing is asserted about timings; the script exits 1
only when a result is wrong (a tick that does not request exactly the windows expected, a status
listing that does not return exactly the partitions stored).

A. **Entry size** (core only): the commitInfo entry of a time pipeline with every window
   succeeded, in the earlier per-window JSON and in covered spans, 5 years hourly and daily, and
   the time to read it back (``TimeWatermark.from_json``).
B. **Our tick** (``kinds.time.defs.decide_tick``: the watermark read from the Delta log, then
   ``TimeWatermark.due_at``) over 5 years of hourly windows (``--hours``: 43,848) with 0%, 50%
   and 100% of them succeeded, on a Delta table whose log holds one commit per succeeded window
   (setup below). Warm (one process, median of ``--reps``) and whole process (a fresh
   interpreter that builds the code location's Definitions and does one tick).
C. **Dagster baseline**: a local sqlite ``DagsterInstance`` (temporary DAGSTER_HOME) holding one
   materialization per succeeded partition (``report_runless_asset_event``, copied in bulk:
   :func:`store_materializations`); "list every partition's status" =
   ``instance.get_materialized_partitions`` + the partition keys of the
   ``TimeWindowPartitionsDefinition`` + the set difference (the partitions to run), and Dagster's
   own asset status cache (``get_and_update_asset_status_cache_value``, what the UI reads: first
   call after the events, then warm). Warm and whole process.
D. **Time x unit cells** (core level, ``UnitWatermark[TimeWatermark]``): 200 units x 365 daily
   windows (73,000 cells): the grid's JSON, read back and ``core/unit/grid.due_cells`` with its
   ranged runs (what ``kinds/unit/grid_defs.decide_grid_tick`` does after its log read); and
   Dagster's listing over a ``MultiPartitionsDefinition`` (days x static units) with the same
   cells materialized (warm only).

``--only entry|tick|cells`` runs one part.

State read per tick: bytes the process read (``rchar`` of ``/proc/self/io``, all reads
included: the Delta log and checkpoint through deltalake's Rust reader too, sqlite's pages).

**Setup of the Delta log (not timed).** Version 0 is created by ``deltalake.write_deltalake``
(an empty table of the pipeline's schema); each succeeded window then gets one commit, in window
order, holding what a run of ``kinds/time/run.py`` commits: ``commitInfo`` with the entry
``watermark_assets.time/orders`` (the watermark after the window, its ``read_version``, the
window, run and job ids) and a ``watermark_assets.column_run`` record, the window's ``txn``, and
one ``add`` of a data file (not written: the tick never opens data files). These commits are
written as Delta JSON commit files directly (43,848 commits through ``create_write_transaction``
would take most of an hour here), and a checkpoint is made by ``deltalake``
(``create_checkpoint``) at the last multiple of 100, as a writer checkpointing every 100 commits
would leave it; the commits after it stay JSON. The table is then read by the same code a tick
runs (``load_time_watermark``), and the script checks the watermark it finds.
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
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_column import print_table, ratio, secs

FROM = datetime(2020, 1, 1, tzinfo=timezone.utc)
RESULT_PREFIX = "BENCH_TIME_RESULT "
PCTS = (0, 50, 100)
CHECKPOINT_EVERY = 100
COLD_TIMEOUT = 600


class BenchmarkError(Exception):
    """A wrong result (not a slow one): the script exits non-zero."""


def read_bytes() -> int:
    """Bytes this process has read so far (``rchar``); 0 where /proc is missing."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def timed(call: Callable[[], Any], reps: int) -> tuple[float, int, Any]:
    """Median seconds of ``reps`` calls, bytes read by the last one, its result."""
    times: list[float] = []
    result: Any = None
    used = 0
    for _ in range(reps):
        before = read_bytes()
        started = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - started)
        used = read_bytes() - before
    return statistics.median(times), used, result


def size(value: int) -> str:
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value} B"


# --------------------------------------------------------------------------------------------
# A. entry size (core)
# --------------------------------------------------------------------------------------------


def per_window_json(highs: Sequence[tuple[int, int]]) -> str:
    """The earlier form of the time watermark: window start (ISO) -> high watermark (ms)."""
    from watermark_assets.core.time.instant import format_millis

    return json.dumps({format_millis(s): h for s, h in highs}, separators=(",", ":"))


def entry_text(watermark_json: str, read_version: int) -> str:
    """The commitInfo entry as ``kinds/time/run.plan_window`` writes it (a JSON string in JSON)."""
    entry = {"watermark": watermark_json, "read_version": read_version}
    return json.dumps(json.dumps(entry))


def bench_entry_size(years: int) -> list[list[str]]:
    from watermark_assets.core.time import TimeSpec, TimeWatermark, to_millis, windows

    rows: list[list[str]] = []
    to = FROM.replace(year=FROM.year + years)
    for partition in ("hourly", "daily"):
        tiles = windows(TimeSpec(FROM, to, partition), to)
        cases = {"all succeeded": list(tiles), "every other failed": list(tiles)[::2]}
        for label, done in cases.items():
            highs = [(to_millis(w.start), to_millis(w.end)) for w in done]
            earlier = per_window_json(highs)
            spans = TimeWatermark.empty().advance(done)
            before = len(entry_text(earlier, 1))
            after = len(entry_text(spans.to_json(), 1))
            read_before, _, old = timed(lambda t=earlier: TimeWatermark.from_json(t), 3)
            compact = spans.to_json()
            read_after, _, new = timed(lambda t=compact: TimeWatermark.from_json(t), 3)
            if old != new or new != spans:
                raise BenchmarkError(f"{partition} {label}: the two forms read differently")
            rows.append(
                [
                    f"{partition}, {len(tiles):,} windows, {label}",
                    size(before),
                    size(after),
                    ratio(before, after),
                    f"{read_before * 1000:.1f}",
                    f"{read_after * 1000:.2f}",
                ]
            )
    return rows


# --------------------------------------------------------------------------------------------
# B. our tick on a Delta log with history
# --------------------------------------------------------------------------------------------


def pipeline_yaml(work: Path, table: str, to: datetime) -> str:
    return json.dumps(
        {
            "pipelines": [
                {
                    "name": "orders",
                    "source": {"type": "delta_table", "uri": str(work / "source")},
                    "watermark": {
                        "kind": "time",
                        "column": "updated_at",
                        "from": FROM.strftime("%Y-%m-%d"),
                        "to": to.strftime("%Y-%m-%d %H:%M:%S"),
                        "partition": "hourly",
                        "grace_days": 3,
                    },
                    "table": {"uri": table},
                }
            ]
        }
    )


def build_history(table: str, tiles: Sequence[Any], succeeded: int) -> None:
    """Version 0 by deltalake, one commit per succeeded window, a checkpoint (module docstring)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from watermark_assets.core.time import TimeWatermark, format_instant
    from watermark_assets.kinds.time.run import time_metadata_key, window_app_id

    schema = pa.schema(
        [("id", pa.int64()), ("updated_at", pa.timestamp("us", tz="UTC")), ("amount", pa.float64())]
    )
    write_deltalake(table, schema.empty_table())
    log_dir = Path(table) / "_delta_log"
    key = time_metadata_key("orders")
    checkpoint_at = succeeded // CHECKPOINT_EVERY * CHECKPOINT_EVERY
    watermark = TimeWatermark.empty()
    stamp = int(time.time() * 1000)
    for index in range(succeeded):
        window, version = tiles[index], index + 1
        watermark = watermark.advance(window)
        bounds = [format_instant(window.start), format_instant(window.end)]
        entry = {
            "watermark": watermark.to_json(),
            "read_version": version - 1,
            "window": bounds,
            "recorded_window": bounds,
            "high_watermark": bounds[1],
            "run_id": str(uuid.UUID(int=index)),
            "job_id": "orders_job",
        }
        run = {
            "pipeline": "orders",
            "run_id": entry["run_id"],
            "operator": ">=",
            "predicate": f"updated_at >= '{bounds[0]}' AND updated_at < '{bounds[1]}'",
            "rows_read": 10,
            "window": json.dumps({"column": "updated_at", "lower": bounds[0], "upper": bounds[1]}),
            "rows_removed": 0,
        }
        actions = [
            {
                "commitInfo": {
                    "timestamp": stamp + index,
                    "operation": "WRITE",
                    "operationParameters": {"mode": "Append"},
                    "clientVersion": "bench_time_tick",
                    key: json.dumps(entry),
                    "watermark_assets.column_run": json.dumps(run),
                }
            },
            {"txn": {"appId": window_app_id("orders", window), "version": 1, "lastUpdated": stamp}},
            {
                "add": {
                    "path": f"part-{index:06d}-{uuid.UUID(int=index).hex}.parquet",
                    "partitionValues": {},
                    "size": 2048,
                    "modificationTime": stamp,
                    "dataChange": True,
                    "stats": json.dumps({"numRecords": 10}),
                }
            },
        ]
        text = "\n".join(json.dumps(a, separators=(",", ":")) for a in actions) + "\n"
        (log_dir / f"{version:020d}.json").write_text(text)
        if version == checkpoint_at:
            DeltaTable(table).create_checkpoint()


TICK_CHILD = """
import json, sys, time
started = time.perf_counter()
from datetime import datetime
from pathlib import Path
from watermark_assets.config import parse_config
from watermark_assets.defs import build_definitions
from watermark_assets.kinds.time.defs import decide_tick
config = parse_config(Path(sys.argv[1]).read_text(), env={}, base=Path.cwd(), origin="bench")
defs = build_definitions(config)
loaded = time.perf_counter()
tick = decide_tick(config.pipeline("orders"), datetime.fromisoformat(sys.argv[2]))
done = time.perf_counter()
print(sys.argv[3] + json.dumps({"load": loaded - started, "tick": done - loaded,
                                "keys": len(tick.keys)}))
"""

DAGSTER_CHILD = """
import json, sys, time
started = time.perf_counter()
from dagster import AssetKey, DagsterInstance
from dagster import TimeWindowPartitionsDefinition
instance = DagsterInstance.local_temp(tempdir=sys.argv[1])
partitions_def = TimeWindowPartitionsDefinition(start=sys.argv[2], end=sys.argv[3],
    fmt="%Y-%m-%d-%H:%M", cron_schedule="0 * * * *", timezone="UTC")
loaded = time.perf_counter()
done_keys = instance.get_materialized_partitions(AssetKey("orders"))
missing = [k for k in partitions_def.get_partition_keys() if k not in done_keys]
done = time.perf_counter()
print(sys.argv[4] + json.dumps({"load": loaded - started, "tick": done - loaded,
                                "keys": len(missing)}))
"""


def run_child(code: str, args: Sequence[str]) -> dict[str, Any]:
    """A fresh interpreter running ``code``: its wall time and what it printed."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code, *args, RESULT_PREFIX],
        capture_output=True,
        text=True,
        env=env,
        timeout=COLD_TIMEOUT,
        check=False,
    )
    wall = time.perf_counter() - started
    line = next((x for x in done.stdout.splitlines() if x.startswith(RESULT_PREFIX)), None)
    if done.returncode != 0 or line is None:
        raise BenchmarkError(f"child process failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(line[len(RESULT_PREFIX) :])
    result["wall"] = wall
    return result


def expected_due(tiles: Sequence[Any], succeeded: int) -> int:
    """Windows a tick at ``to`` requests: those never run, plus the succeeded ones ending after
    the cut-off (highest - 3 days grace)."""
    if not succeeded:
        return len(tiles)
    cut_off = tiles[succeeded - 1].end - timedelta(days=3)
    rerun = sum(1 for w in tiles[:succeeded] if w.end > cut_off)
    return len(tiles) - succeeded + rerun


def cold_at(args: argparse.Namespace, pct: int) -> bool:
    """Whether the share ``pct`` gets its whole-process run (--no-cold: none; --cold-at: one)."""
    return not args.no_cold and args.cold_at in (None, pct)


def bench_ours(args: argparse.Namespace, work: Path, tiles: Sequence[Any]) -> list[list[str]]:
    from watermark_assets.config import parse_config
    from watermark_assets.kinds.time.defs import decide_tick

    to = tiles[-1].end
    rows: list[list[str]] = []
    for pct in PCTS:
        succeeded = len(tiles) * pct // 100
        table = str(work / f"orders_{pct}")
        print(f"[ours] {pct}%: writing {succeeded:,} commits ...", flush=True)
        started = time.perf_counter()
        build_history(table, tiles, succeeded)
        print(f"[ours] {pct}%: log written in {time.perf_counter() - started:.1f}s", flush=True)
        config_path = work / f"pipelines_{pct}.yaml"
        config_path.write_text(pipeline_yaml(work, table, to))
        config = parse_config(config_path.read_text(), env={}, base=work, origin="bench")
        pipeline = config.pipeline("orders")
        seconds, used, tick = timed(lambda p=pipeline: decide_tick(p, to), args.reps)
        want = expected_due(tiles, succeeded)
        if len(tick.keys) != want:
            raise BenchmarkError(f"{pct}%: the tick requests {len(tick.keys)}, expected {want}")
        cold: dict[str, Any] = {}
        if cold_at(args, pct):
            cold = run_child(TICK_CHILD, [str(config_path), to.isoformat()])
            if cold["keys"] != want:
                raise BenchmarkError(f"{pct}% whole process: {cold['keys']} keys, not {want}")
        log_bytes = sum(f.stat().st_size for f in (Path(table) / "_delta_log").iterdir())
        rows.append(
            [
                f"ours, {pct}% succeeded",
                f"{len(tick.keys):,}",
                f"{seconds * 1000:.0f}",
                size(used),
                size(log_bytes),
                secs(cold.get("tick")),
                secs(cold.get("wall")),
            ]
        )
    return rows


# --------------------------------------------------------------------------------------------
# C. Dagster baseline
# --------------------------------------------------------------------------------------------


def bench_dagster(args: argparse.Namespace, work: Path, tiles: Sequence[Any]) -> list[list[str]]:
    from dagster import TimeWindowPartitionsDefinition

    start, end = tiles[0].start, tiles[-1].end
    fmt = "%Y-%m-%d-%H:%M"
    partitions_def = TimeWindowPartitionsDefinition(
        start=start.strftime(fmt),
        end=end.strftime(fmt),
        fmt=fmt,
        cron_schedule="0 * * * *",
        timezone="UTC",
    )
    keys = partitions_def.get_partition_keys()
    if len(keys) != len(tiles):
        raise BenchmarkError(f"Dagster has {len(keys)} partitions, the core {len(tiles)}")
    done_by_pct = {pct: keys[: len(keys) * pct // 100] for pct in PCTS}
    child = None if args.no_cold else [start.strftime(fmt), end.strftime(fmt)]
    return dagster_listing(args, work / "dagster_home", partitions_def, done_by_pct, child)


def dagster_listing(
    args: argparse.Namespace,
    home: Path,
    partitions_def: Any,
    done_by_pct: dict[int, Sequence[str]],
    child: Sequence[str] | None,
) -> list[list[str]]:
    """One row per share materialized: Dagster's listing of every partition's status (warm, and
    in a whole process when ``child`` gives the time partitions' bounds), its status cache."""
    from dagster import AssetKey, DagsterInstance
    from dagster._core.storage.partition_status_cache import (
        get_and_update_asset_status_cache_value,
    )

    home.mkdir()
    asset_key = AssetKey("orders")
    instance = DagsterInstance.local_temp(tempdir=str(home))
    every = len(partitions_def.get_partition_keys())
    rows: list[list[str]] = []
    stored: set[str] = set()
    for pct, done in done_by_pct.items():
        new = [k for k in done if k not in stored]
        print(f"[dagster] {pct}%: storing {len(new):,} materializations ...", flush=True)
        started = time.perf_counter()
        store_materializations(instance, home, asset_key, new)
        stored.update(new)
        print(f"[dagster] {pct}%: stored in {time.perf_counter() - started:.1f}s", flush=True)

        def listing() -> list[str]:
            materialized = instance.get_materialized_partitions(asset_key)
            return [k for k in partitions_def.get_partition_keys() if k not in materialized]

        seconds, used, missing = timed(listing, args.reps)
        if len(missing) != every - len(stored):
            raise BenchmarkError(f"Dagster {pct}%: {len(missing)} missing, not the expected")

        def status() -> Any:
            return get_and_update_asset_status_cache_value(instance, asset_key, partitions_def)

        first, _, _ = timed(status, 1)
        warm, _, _ = timed(status, args.reps)
        cold: dict[str, Any] = {}
        if child is not None and cold_at(args, pct):
            cold = run_child(DAGSTER_CHILD, [str(home), *child])
            if cold["keys"] != len(missing):
                raise BenchmarkError(f"Dagster {pct}% whole process: {cold['keys']} keys")
        db_bytes = sum(f.stat().st_size for f in home.rglob("*.db"))
        rows.append(
            [
                f"Dagster, {pct}% materialized",
                f"{len(missing):,}",
                f"{seconds * 1000:.0f}",
                size(used),
                size(db_bytes),
                secs(cold.get("tick")),
                secs(cold.get("wall")),
                f"{first * 1000:.0f} / {warm * 1000:.0f}",
            ]
        )
    return rows


def store_materializations(instance: Any, home: Path, asset_key: Any, keys: Sequence[str]) -> None:
    """One materialization per key, as ``report_runless_asset_event`` stores it.

    Through the API each event is its own sqlite transaction (about 0.1 s each on this shared
    machine: 43,848 would take over an hour), so the first key is reported through the API, the
    others are copies of its ``event_logs`` row in the index shard (the event JSON and the
    ``partition`` column changed to the key) inserted in one transaction, and the last key is
    reported through the API again so the asset's record points at the newest event."""
    import sqlite3

    from dagster import AssetMaterialization

    if not keys:
        return
    report = instance.report_runless_asset_event
    keys = [str(k) for k in keys]  # a MultiPartitionKey is stored as its text
    report(AssetMaterialization(asset_key, partition=keys[0]))
    with sqlite3.connect(home / "history" / "runs" / "index.db") as db:
        template = db.execute(
            "SELECT run_id, event, dagster_event_type, timestamp, step_key, asset_key "
            "FROM event_logs WHERE partition = ? ORDER BY id DESC LIMIT 1",
            (keys[0],),
        ).fetchone()
        run_id, event, event_type, stamp, step_key, key_text = template
        db.executemany(
            "INSERT INTO event_logs (run_id, event, dagster_event_type, timestamp, step_key, "
            "asset_key, partition) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                (run_id, event.replace(keys[0], k), event_type, stamp, step_key, key_text, k)
                for k in keys[1:-1]
            ),
        )
    if len(keys) > 1:
        report(AssetMaterialization(asset_key, partition=keys[-1]))


# --------------------------------------------------------------------------------------------
# D. time x unit cells (core level)
# --------------------------------------------------------------------------------------------


def bench_dagster_cells(args: argparse.Namespace, work: Path) -> list[list[str]]:
    """Dagster's listing for the cells: a ``MultiPartitionsDefinition`` of the same days and
    units, the first share of the days materialized for every unit."""
    from dagster import (
        DailyPartitionsDefinition,
        MultiPartitionsDefinition,
        StaticPartitionsDefinition,
    )

    start = datetime(2023, 1, 1, tzinfo=timezone.utc)
    days = [(start + timedelta(days=d)).strftime("%Y-%m-%d") for d in range(args.unit_days)]
    partitions_def = MultiPartitionsDefinition(
        {
            "day": DailyPartitionsDefinition(
                start_date=days[0],
                end_date=(start + timedelta(days=args.unit_days)).strftime("%Y-%m-%d"),
            ),
            "unit": StaticPartitionsDefinition([f"u{n:04d}" for n in range(args.units)]),
        }
    )
    keys = partitions_def.get_partition_keys()
    if len(keys) != args.units * args.unit_days:
        raise BenchmarkError(f"Dagster has {len(keys)} cells")
    done_by_pct: dict[int, Sequence[str]] = {}
    for pct in PCTS:
        done_days = set(days[: args.unit_days * pct // 100])
        done_by_pct[pct] = [k for k in keys if k.keys_by_dimension["day"] in done_days]
    return dagster_listing(args, work / "dagster_cells", partitions_def, done_by_pct, None)


def bench_cells(args: argparse.Namespace) -> list[list[str]]:
    from watermark_assets.core.time import TimeSpec, TimeWatermark, to_millis, windows
    from watermark_assets.core.unit import UnitWatermark
    from watermark_assets.core.unit.grid import due_cells

    start = datetime(2023, 1, 1, tzinfo=timezone.utc)
    end = start + timedelta(days=args.unit_days)
    spec = TimeSpec(start, end, "daily", grace_days=3)
    tiles = windows(spec, end)
    units = [f"u{n:04d}" for n in range(args.units)]
    rows: list[list[str]] = []
    for pct in PCTS:
        succeeded = len(tiles) * pct // 100
        inner = TimeWatermark.empty().advance(list(tiles)[:succeeded])
        watermark = UnitWatermark("time", {u: inner for u in units})
        text = watermark.to_json()
        highs = [(to_millis(w.start), to_millis(w.end)) for w in list(tiles)[:succeeded]]
        earlier = len(json.dumps({u: per_window_json(highs) for u in units}))

        def tick(text: str = text) -> int:
            # What the grid's sensor decides (kinds/unit/grid_defs.decide_grid_tick after its log
            # read): the entry parsed, then core/unit/grid.due_cells and its ranged runs.
            due = due_cells(UnitWatermark.from_json(text), units, spec, end)
            due.ranges()
            return len(due)

        seconds, _, due = timed(tick, args.reps)
        want = len(units) * expected_due(tiles, succeeded)
        if due != want:
            raise BenchmarkError(f"cells {pct}%: {due} cells due, expected {want}")
        rows.append(
            [
                f"{len(units)} units x {len(tiles)} days, {pct}% succeeded",
                f"{due:,}",
                f"{seconds * 1000:.0f}",
                size(len(text)),
                size(earlier),
            ]
        )
    return rows


# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--years", type=int, default=5, help="hourly windows over this many years")
    parser.add_argument("--hours", type=int, default=None, help="or exactly this many windows")
    parser.add_argument("--units", type=int, default=200)
    parser.add_argument("--unit-days", type=int, default=365)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--no-cold", action="store_true", help="skip the whole-process runs")
    parser.add_argument(
        "--cold-at",
        type=int,
        choices=PCTS,
        help="the whole-process runs at this share only (a smoke run: the same code at each)",
    )
    parser.add_argument("--no-dagster", action="store_true", help="skip the Dagster baseline")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument(
        "--only", choices=["entry", "tick", "cells"], help="one part: A, B/C or D (default: all)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.hours, args.units, args.unit_days, args.reps = args.hours or 240, 5, 30, 1
    from watermark_assets.core.time import TimeSpec, windows

    hours = args.hours or (FROM.replace(year=FROM.year + args.years) - FROM) // timedelta(hours=1)
    to = FROM + timedelta(hours=hours)
    tiles = list(windows(TimeSpec(FROM, to, "hourly"), to))
    work = Path(tempfile.mkdtemp(prefix="wa_bench_time_"))
    started = time.perf_counter()
    code = 0
    try:
        part = args.only
        if part in (None, "entry"):
            print_table(
                f"A. commitInfo entry of a time pipeline, {args.years} years",
                ["watermark", "per-window", "spans", "ratio", "read ms (per-window)", "read ms"],
                bench_entry_size(1 if args.quick else args.years),
            )
        headers = [
            "tick",
            "keys to run",
            "warm ms",
            "read/tick",
            "state on disk",
            "process: tick s",
            "process: wall s",
        ]
        if not args.no_dagster:
            headers.append("status cache ms (1st / warm)")
        if part in (None, "tick"):
            rows = bench_ours(args, work, tiles)
            if not args.no_dagster:
                rows += bench_dagster(args, work, tiles)
                rows = [r + ["-"] * (len(headers) - len(r)) for r in rows]
            print_table(f"B/C. one tick over {len(tiles):,} hourly partitions", headers, rows)
        if part in (None, "cells"):
            print_table(
                "D. time x unit cells (core: the grid's entry read, due_cells and its ranges)",
                ["cells", "cells to run", "warm ms", "JSON (spans)", "JSON (per-window)"],
                bench_cells(args),
            )
            if not args.no_dagster:
                print_table(
                    f"D. Dagster, {args.units} units x {args.unit_days} days (multi-partitions)",
                    headers,
                    bench_dagster_cells(args, work),
                )
    except BenchmarkError as error:
        print(f"WRONG RESULT: {error}", flush=True)
        code = 1
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"total wall time {time.perf_counter() - started:.0f}s, exit {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
