"""Benchmark: watermark listing vs a naive full listing, and the ingestion asset vs plain PySpark.

Run ``make bench`` or ``.venv/bin/python benchmarks/bench_watermarks.py [--quick]``. Everything is
measured in ONE process and ONE run, because machines are shared and noisy: compare the ratios
printed at the end, never absolute timings from different runs. Nothing is asserted about timings;
the script exits non-zero only when a result is wrong (files found, rows committed).

Part A (sensor tick cost): N landing files (default 50,000) in hourly Hive folders over 35 days,
the first N - K (in path order) already processed. Times the pruned listing the sensor uses, the
whole sensor tick through Dagster, and a naive "list everything, subtract a set" baseline.

Part B (ingestion): 240 gzip NDJSON files (~480,000 rows) over 2 days. Times one Dagster run of the
asset job over the partition range (one Spark job, one Delta commit) against a plain PySpark
read-json/write-parquet of the same files in the same Spark session.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

LANDING_START = datetime(2024, 2, 1, tzinfo=timezone.utc)
LANDING_DAYS = 35
INGEST_START = datetime(2024, 3, 1, tzinfo=timezone.utc)
SCHEMA = "id BIGINT, event_time TIMESTAMP, user_id BIGINT, action STRING, amount DOUBLE"
ACTIONS = ("view", "cart", "buy", "refund")
SPARK_CONF = {"spark.ui.enabled": "false"}
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
PIPELINE = "events"


@dataclass(frozen=True)
class Sizes:
    landing_files: int
    new_files: int
    listing_reps: int
    ingest_days: int
    ingest_hours: int
    files_per_hour: int
    rows_per_file: int
    ingest_reps: int

    @property
    def ingest_files(self) -> int:
        return self.ingest_days * self.ingest_hours * self.files_per_hour

    @property
    def ingest_rows(self) -> int:
        return self.ingest_files * self.rows_per_file


FULL = Sizes(50_000, 500, 5, 2, 12, 10, 2_000, 3)
QUICK = Sizes(5_000, 500, 3, 2, 12, 1, 2_000, 1)


class BenchmarkError(Exception):
    """A wrong result (not a slow one): the script exits non-zero."""


@dataclass
class Timing:
    seconds: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def best(self) -> float:
        return min(self.seconds)


def timed(function: Callable[[], Any], reps: int) -> tuple[Timing, Any]:
    """Run ``function`` ``reps`` times; the timings and the last result."""
    timing = Timing()
    result = None
    for _ in range(reps):
        started = time.perf_counter()
        result = function()
        timing.seconds.append(time.perf_counter() - started)
    return timing, result


def frozen_clock(moment: datetime) -> Callable[[], datetime]:
    return lambda: moment


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A plain-text table; the first column left-aligned, the others right-aligned."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ]
        return "  ".join(parts).rstrip()

    print(title)
    print(line(headers))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(line(row))
    print()


def secs(value: float) -> str:
    return f"{value:.3f}"


def ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:.2f}x" if denominator > 0 else "n/a"


def pipeline_yaml(landing: Path, table: Path, **overrides: Any) -> dict[str, Any]:
    """A file pipeline like tests/conftest.py's, with this benchmark's schema."""
    pipeline: dict[str, Any] = {
        "name": PIPELINE,
        "source": {"type": "files", "uri": str(landing), "format": "ndjson", "schema": SCHEMA},
        "watermark": {"partition_template": "date=%Y-%m-%d/hour=%H"},
        "table": {
            "uri": str(table),
            "partition_by": ["event_date"],
            "derived_columns": {"event_date": "to_date(event_time)"},
        },
        "partitions": {"granularity": "daily", "start": "2024-01-01"},
        "checkpoint": {"interval_files": 1, "interval_secs": 0},
    }
    for key, value in overrides.items():
        pipeline[key] = {**pipeline.get(key, {}), **value}
    return pipeline


def project_config(*pipelines: dict[str, Any]) -> Any:
    import yaml

    from watermark_assets.config import parse_config

    text = yaml.safe_dump(
        {"spark": {"master": "local[2]", "conf": SPARK_CONF}, "pipelines": list(pipelines)}
    )
    return parse_config(text, env={}, base=Path.cwd(), origin="benchmark config")


# --------------------------------------------------------------------------------------------
# Part A: listing
# --------------------------------------------------------------------------------------------


def write_landing(root: Path, count: int, rng: random.Random) -> list[str]:
    """``count`` empty files over LANDING_DAYS of hourly folders; their relative paths, sorted."""
    hours = LANDING_DAYS * 24
    paths: list[str] = []
    for number in range(count):
        hour = number * hours // count
        first = hour * count // hours
        slot = number - first  # position inside the hour folder: names sort in creation order
        when = LANDING_START + timedelta(hours=hour, seconds=slot * 50 + rng.randrange(50))
        folder = f"date={when:%Y-%m-%d}/hour={when:%H}"
        paths.append(f"{folder}/{int(when.timestamp())}-{rng.getrandbits(48):012x}.ndjson.gz")
    for folder in sorted({p.rsplit("/", 1)[0] for p in paths}):
        (root / folder).mkdir(parents=True)
    for path in paths:
        os.close(os.open(root / path, os.O_CREAT | os.O_WRONLY, 0o644))
    return sorted(paths)


def naive_walk(root: Path, processed: set[str]) -> tuple[list[str], int, int]:
    """Full recursive listing (os.walk); paths not in ``processed``, paths listed, dirs listed."""
    new: list[str] = []
    listed = dirs = 0
    prefix = len(str(root)) + 1
    for directory, subdirs, files in os.walk(root):
        dirs += 1
        listed += len(subdirs) + len(files)
        relative = directory[prefix:]
        for name in files:
            path = f"{relative}/{name}" if relative else name
            if path not in processed:
                new.append(path)
    return sorted(new), listed, dirs


def naive_find(root: Path, processed: set[str]) -> tuple[list[str], int]:
    """Full recursive listing through fsspec (find, same backend as the watermark listing)."""
    from watermark_assets import storage

    fs, inner = storage.filesystem(str(root))
    fs.invalidate_cache()
    found = fs.find(inner, withdirs=True, detail=True)
    prefix = len(inner) + 1
    files = (p[prefix:] for p, info in found.items() if info["type"] == "file")
    return sorted(p for p in files if p not in processed), len(found)


def set_bytes(values: set[str]) -> int:
    return sys.getsizeof(values) + sum(sys.getsizeof(v) for v in values)


def bench_listing(sizes: Sizes, work: Path) -> tuple[list[list[str]], list[str], bool]:
    from dagster import DagsterInstance, build_sensor_context

    from watermark_assets import storage
    from watermark_assets.core.checkpoint import Checkpoint
    from watermark_assets.core.filepath.coldstart import lookback_horizon
    from watermark_assets.core.filepath.listing import plan_listing
    from watermark_assets.core.filepath.path import NameOrdering
    from watermark_assets.core.filepath.timeparts import PartitionTemplate
    from watermark_assets.core.filepath.watermark import FileWatermark
    from watermark_assets.defs import build_definitions
    from watermark_assets.kinds.file_path.assets import requested_files
    from watermark_assets.state.load import load_state

    landing = work / "a_landing"
    print(f"[A] writing {sizes.landing_files} landing files under {landing} ...", flush=True)
    started = time.perf_counter()
    paths = write_landing(landing, sizes.landing_files, random.Random(1))
    print(f"[A]   done in {time.perf_counter() - started:.1f}s", flush=True)
    done, expected = paths[: -sizes.new_files], paths[-sizes.new_files :]
    now = LANDING_START + timedelta(days=LANDING_DAYS, minutes=30)

    watermark = FileWatermark.initial().advance(done)
    checkpoint_text = Checkpoint(watermark, int(now.timestamp()), delta_version=None).dumps()
    lookback_days = 2
    horizon = lookback_horizon(PartitionTemplate("date=%Y-%m-%d/hour=%H"), lookback_days, now)
    pruned = watermark.prune(horizon)
    pruned_text = Checkpoint(pruned, int(now.timestamp()), delta_version=None).dumps()
    processed = set(done)
    suffixes = project_config(pipeline_yaml(landing, work / "unused")).pipelines[0].source.suffixes

    def listing(plan: Any) -> Callable[[], Any]:
        return lambda: storage.list_files_above(
            str(landing), plan, suffixes=suffixes, ordering=NameOrdering.AUTO
        )

    reps = sizes.listing_reps
    rows: list[list[str]] = []
    ok = True

    def check(label: str, found: Sequence[str]) -> str:
        nonlocal ok
        if list(found) != expected:
            ok = False
            print(
                f"[A] WRONG: {label} returned {len(found)} files, expected the {len(expected)} new",
                file=sys.stderr,
            )
            return f"{len(found)} WRONG"
        return str(len(found))

    print("[A] timing listings ...", flush=True)
    full_plan = plan_listing(watermark, horizon=None)
    t_wm, res_wm = timed(listing(full_plan), reps)
    pruned_plan = plan_listing(pruned, horizon=horizon)
    t_pr, res_pr = timed(listing(pruned_plan), reps)
    t_walk, (res_walk, walk_listed, walk_dirs) = timed(lambda: naive_walk(landing, processed), reps)
    t_find, (res_find, find_listed) = timed(lambda: naive_find(landing, processed), reps)

    rows.append(
        [
            "watermark listing, every partition kept",
            secs(t_wm.median),
            secs(t_wm.best),
            str(res_wm.paths_listed),
            str(res_wm.directories_listed),
            check("watermark listing", res_wm.files),
            f"{len(checkpoint_text.encode())} B checkpoint",
        ]
    )
    rows.append(
        [
            f"watermark listing, pruned to a {lookback_days}d window",
            secs(t_pr.median),
            secs(t_pr.best),
            str(res_pr.paths_listed),
            str(res_pr.directories_listed),
            check("pruned watermark listing", res_pr.files),
            f"{len(pruned_text.encode())} B checkpoint",
        ]
    )
    set_size = set_bytes(processed)
    rows.append(
        [
            "naive os.walk + set",
            secs(t_walk.median),
            secs(t_walk.best),
            str(walk_listed),
            str(walk_dirs),
            check("naive os.walk", res_walk),
            f"{set_size} B set",
        ]
    )
    rows.append(
        [
            "naive fsspec find + set",
            secs(t_find.median),
            secs(t_find.best),
            str(find_listed),
            "n/a",
            check("naive fsspec find", res_find),
            f"{set_size} B set",
        ]
    )

    # The whole sensor tick through Dagster: state from a checkpoint, listing, run requests.
    # The checkpoint holds the unpruned watermark; with a lookback, load_state prunes it.
    sensor_cases: list[tuple[str, dict[str, Any]]] = [
        (
            "sensor tick (Dagster), late_arrival_days=null",
            {"watermark": {"late_arrival_days": None}},
        ),
        (
            f"sensor tick (Dagster), late_arrival_days={lookback_days}",
            {"watermark": {"late_arrival_days": lookback_days}},
        ),
    ]
    print("[A] timing sensor ticks ...", flush=True)
    for index, (label, overrides) in enumerate(sensor_cases):
        table = work / f"a_table_{index}"
        config = project_config(pipeline_yaml(landing, table, **overrides))
        pipeline = config.pipelines[0]
        storage.write_text_atomic(pipeline.checkpoint_uri, checkpoint_text)
        try:
            state = load_state(pipeline, now=now)
        except Exception as error:  # reported, not hidden: the brief asks which complaint
            ok = False
            print(f"[A] load_state failed for {label}: {error!r}", file=sys.stderr)
            rows.append([label, "-", "-", "-", "-", "load_state failed", type(error).__name__])
            continue
        defs = build_definitions(config, clock=frozen_clock(now))
        sensor_def = defs.resolve_sensor_def(f"{PIPELINE}_sensor")
        instance = DagsterInstance.ephemeral()

        def tick(sensor_def: Any = sensor_def, instance: Any = instance, defs: Any = defs) -> Any:
            context = build_sensor_context(instance=instance, definitions=defs)
            return sensor_def.evaluate_tick(context)

        t_tick, data = timed(tick, reps)
        requested = [
            f
            for request in data.run_requests
            for f in requested_files(request.run_config, PIPELINE) or ()
        ]
        found = check(label, sorted(requested))
        rows.append(
            [
                label,
                secs(t_tick.median),
                secs(t_tick.best),
                "-",
                "-",
                found,
                f"{len(data.run_requests)} run requests, state "
                f"{len(state.watermark.partition_watermarks)} partitions",
            ]
        )
    wm_bytes, pruned_bytes = len(checkpoint_text.encode()), len(pruned_text.encode())
    ratios = [
        f"naive os.walk / watermark listing, all kept: {ratio(t_walk.median, t_wm.median)}",
        f"naive fsspec find / watermark listing, all kept: {ratio(t_find.median, t_wm.median)}",
        f"naive os.walk / watermark listing, pruned: {ratio(t_walk.median, t_pr.median)}",
        f"naive fsspec find / watermark listing, pruned: {ratio(t_find.median, t_pr.median)}",
        f"naive set bytes / checkpoint bytes, all kept: {ratio(set_size, wm_bytes)}",
        f"naive set bytes / checkpoint bytes, pruned: {ratio(set_size, pruned_bytes)}",
    ]
    return rows, ratios, ok


# --------------------------------------------------------------------------------------------
# Part B: ingestion
# --------------------------------------------------------------------------------------------


def write_ingest_landing(root: Path, sizes: Sizes, rng: random.Random) -> list[str]:
    """Gzip NDJSON files, days x hours x files_per_hour; their relative paths, sorted."""
    paths = []
    next_id = 0
    for day in range(sizes.ingest_days):
        for hour in range(sizes.ingest_hours):
            when = INGEST_START + timedelta(days=day, hours=hour * 24 // sizes.ingest_hours)
            folder = root / f"date={when:%Y-%m-%d}" / f"hour={when:%H}"
            folder.mkdir(parents=True, exist_ok=True)
            for number in range(sizes.files_per_hour):
                stamp = when + timedelta(minutes=number * 60 // sizes.files_per_hour)
                name = f"{int(stamp.timestamp())}-{rng.getrandbits(48):012x}.ndjson.gz"
                base = int(when.timestamp())
                lines = []
                for _ in range(sizes.rows_per_file):
                    moment = datetime.fromtimestamp(base + rng.randrange(3600), timezone.utc)
                    lines.append(
                        json.dumps(
                            {
                                "id": next_id,
                                "event_time": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                "user_id": rng.randrange(1, 5000),
                                "action": rng.choice(ACTIONS),
                                "amount": round(rng.uniform(1, 500), 2),
                            }
                        )
                    )
                    next_id += 1
                with gzip.open(folder / name, "wt", encoding="utf-8", compresslevel=6) as handle:
                    handle.write("\n".join(lines) + "\n")
                paths.append(f"{folder.relative_to(root).as_posix()}/{name}")
    return sorted(paths)


def spark_jobs_in(spark: Any, group: str, function: Callable[[], Any]) -> tuple[float, Any, int]:
    """Seconds, result, and Spark jobs launched under a job group (-1 if not measurable)."""
    context = spark.sparkContext
    context.setJobGroup(group, group)
    try:
        started = time.perf_counter()
        result = function()
        elapsed = time.perf_counter() - started
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    jobs = len(context.statusTracker().getJobIdsForGroup(group))
    return elapsed, result, jobs


def bench_ingestion(sizes: Sizes, work: Path) -> tuple[list[list[str]], list[str], bool]:
    import pyarrow.dataset as ds
    from dagster import DagsterInstance
    from deltalake import DeltaTable
    from pyspark.sql import functions as F

    from watermark_assets.defs import build_definitions
    from watermark_assets.defs.jobs import RANGE_END_TAG, RANGE_START_TAG
    from watermark_assets.kinds.file_path.assets import files_run_config
    from watermark_assets.names import job_name
    from watermark_assets.spark.session import get_spark

    master = work / "b_landing_master"
    print(
        f"[B] writing {sizes.ingest_files} gzip NDJSON files ({sizes.ingest_rows} rows) ...",
        flush=True,
    )
    started = time.perf_counter()
    relative = write_ingest_landing(master, sizes, random.Random(2))
    print(f"[B]   done in {time.perf_counter() - started:.1f}s", flush=True)
    days = [
        (INGEST_START + timedelta(days=d)).strftime("%Y-%m-%d") for d in range(sizes.ingest_days)
    ]
    now = INGEST_START + timedelta(days=sizes.ingest_days, hours=1)

    print("[B] starting Spark (once) and warming it up ...", flush=True)
    started = time.perf_counter()
    spark = get_spark("local[2]", SPARK_CONF)
    spark_start = time.perf_counter() - started
    instance = DagsterInstance.ephemeral()
    ok = True

    def asset_run(name: str, landing: Path, expected_rows: int) -> tuple[float, int, str]:
        table = work / f"{name}_table"
        config = project_config(pipeline_yaml(landing, table))
        defs = build_definitions(config, clock=frozen_clock(now))
        job = defs.resolve_job_def(job_name(PIPELINE))
        tags = {
            RANGE_START_TAG: days[0],
            RANGE_END_TAG: days[-1],
        }

        def run() -> Any:
            return job.execute_in_process(
                run_config={**QUIET_LOGS, **files_run_config(PIPELINE, None)},
                instance=instance,
                tags=tags,
                raise_on_error=True,
            )

        elapsed, result, jobs = spark_jobs_in(spark, name, run)
        if not result.success:
            raise BenchmarkError(f"asset run {name} failed")
        checks = result.get_asset_check_evaluations()
        passed = sum(1 for check in checks if check.passed)
        if passed != len(checks):
            failed = [c.check_name for c in checks if not c.passed]
            raise BenchmarkError(f"asset run {name}: asset checks failed: {failed}")
        delta = DeltaTable(str(table))
        rows = delta.to_pyarrow_dataset().count_rows()
        note = f"Delta v{delta.version()}, {passed}/{len(checks)} checks ok, {jobs} Spark jobs"
        if rows != expected_rows or delta.version() != 0:
            raise BenchmarkError(
                f"asset run {name}: table has {rows} rows at version {delta.version()}, "
                f"expected {expected_rows} rows in ONE commit (version 0)"
            )
        return elapsed, rows, note

    def plain_run(
        name: str, landing: Path, paths: Sequence[str], expected_rows: int
    ) -> tuple[float, int, str]:
        out = work / f"{name}_parquet"
        files = [str(landing / p) for p in paths]

        def run() -> None:
            frame = spark.read.schema(SCHEMA).json(files)
            frame = frame.withColumn("event_date", F.to_date("event_time"))
            frame.write.partitionBy("event_date").parquet(str(out))

        elapsed, _, jobs = spark_jobs_in(spark, name, run)
        rows = ds.dataset(str(out), format="parquet", partitioning="hive").count_rows()
        if rows != expected_rows:
            raise BenchmarkError(f"plain run {name}: {rows} rows written, expected {expected_rows}")
        return elapsed, rows, f"{jobs} Spark jobs"

    # Warm-up: a small day (12 files) through both paths: JVM JIT, JSON/Parquet code, Dagster.
    warm = work / "b_landing_warm"
    tiny = Sizes(0, 0, 0, 1, 12, 1, sizes.rows_per_file, 0)
    warm_paths = write_ingest_landing(warm, tiny, random.Random(3))
    warm_started = time.perf_counter()
    spark.range(1000).selectExpr("sum(id)").collect()
    asset_run("b_warm_asset", warm, tiny.ingest_rows)
    shutil.rmtree(work / "b_warm_asset_table")
    plain_run("b_warm_plain", warm, warm_paths, tiny.ingest_rows)
    warm_up = time.perf_counter() - warm_started
    print(f"[B]   Spark start {spark_start:.1f}s, warm-up {warm_up:.1f}s", flush=True)

    asset_times: list[float] = []
    plain_times: list[float] = []
    asset_note = plain_note = ""
    for rep in range(sizes.ingest_reps):
        order = ("asset", "plain") if rep % 2 == 0 else ("plain", "asset")
        for side in order:
            landing = work / f"b_landing_{side}_{rep}"
            shutil.copytree(master, landing)
            name = f"b_{side}_{rep}"
            print(f"[B] repetition {rep + 1}/{sizes.ingest_reps}: {side} ...", flush=True)
            try:
                if side == "asset":
                    elapsed, _, asset_note = asset_run(name, landing, sizes.ingest_rows)
                    asset_times.append(elapsed)
                else:
                    elapsed, _, plain_note = plain_run(name, landing, relative, sizes.ingest_rows)
                    plain_times.append(elapsed)
            except BenchmarkError as error:
                ok = False
                print(f"[B] WRONG: {error}", file=sys.stderr)
                return [], [], ok
            print(f"[B]   {elapsed:.2f}s", flush=True)
            shutil.rmtree(landing)
    rows = [
        [
            "asset job, 1 run over the partition range",
            secs(statistics.median(asset_times)),
            " ".join(f"{t:.2f}" for t in asset_times),
            str(sizes.ingest_files),
            str(sizes.ingest_rows),
            asset_note,
        ],
        [
            "plain PySpark json -> parquet",
            secs(statistics.median(plain_times)),
            " ".join(f"{t:.2f}" for t in plain_times),
            str(sizes.ingest_files),
            str(sizes.ingest_rows),
            plain_note,
        ],
    ]
    ratios = [
        "asset / plain (median): "
        f"{ratio(statistics.median(asset_times), statistics.median(plain_times))}",
        f"(Spark start-up {spark_start:.1f}s and warm-up {warm_up:.1f}s are excluded)",
    ]
    return rows, ratios, ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument("--only", choices=("listing", "ingestion"), help="run one part only")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warnings.filterwarnings("ignore", message=".*is currently in beta.*")
    work = Path(tempfile.mkdtemp(prefix="bench_watermarks_"))
    started = time.perf_counter()
    ok = True
    try:
        outputs = []
        if args.only in (None, "listing"):
            rows, ratios, part_ok = bench_listing(sizes, work)
            ok &= part_ok
            outputs.append(
                (
                    f"A. Sensor tick: {sizes.landing_files} landing files, {sizes.new_files} new "
                    f"(times in seconds, {sizes.listing_reps} repetitions)",
                    [
                        "case",
                        "median",
                        "best",
                        "paths listed",
                        "dirs listed",
                        "files found",
                        "state",
                    ],
                    rows,
                    ratios,
                )
            )
        if args.only in (None, "ingestion"):
            try:
                rows, ratios, part_ok = bench_ingestion(sizes, work)
            except BenchmarkError as error:
                print(f"[B] WRONG: {error}", file=sys.stderr)
                rows, ratios, part_ok = [], [], False
            ok &= part_ok
            if rows:
                outputs.append(
                    (
                        f"B. Ingestion: {sizes.ingest_files} gzip NDJSON files, "
                        f"{sizes.ingest_rows} rows, {sizes.ingest_days} days "
                        f"(times in seconds, {sizes.ingest_reps} alternating repetitions)",
                        ["case", "median", "each run", "files", "rows", "notes"],
                        rows,
                        ratios,
                    )
                )
        print()
        for title, headers, rows, ratios in outputs:
            print_table(title, headers, rows)
            for line in ratios:
                print(f"  {line}")
            print()
        print(f"total wall time {time.perf_counter() - started:.0f}s; exit {'0' if ok else '1'}")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
