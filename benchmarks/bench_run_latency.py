"""Benchmark: the latency a user feels, as whole processes (issue 10 §6).

Run ``make bench-latency`` or ``.venv/bin/python benchmarks/bench_run_latency.py [--quick]``.
Every figure is the wall time of a whole process (interpreter start, imports, Spark start-up or a
Spark Connect connection, the run, exit), the median of alternating repetitions in ONE run of
the script; compare the ratios and differences, never seconds from different runs.

A. One small file (``--rows`` rows): ``watermark-assets run-sensors`` as a process, the sensor
   tick, ONE run and its Delta commit, on a Dagster instance that exists already (created, and
   the sensor ticked once before the file landed: not counted), under local Spark
   (``local[2]``) and under Spark Connect (a server from pyspark's jars that this script starts
   first and stops at the end, as a long-running server would already be up). Next to each:
   the same one-file run in a process that is already warm (Spark up, Dagster loaded): the
   run's own work. The process minus the warm run is the fixed cost a run pays. Target: under
   Spark Connect within 2 s of its work.
B. The ingestion of ``bench_watermarks.py`` (240 gzip NDJSON files, 480,000 rows; ``--quick``:
   4), start-up included: the asset's run worker as a process, exactly as Dagster runs it (ONE
   run over the partition range queued on an on-disk instance first, not counted, then
   ``dagster api execute_run``: load the code location, open the instance, plan, Spark, ONE
   Delta commit, the checks, the run's events) against a plain PySpark script as a process
   doing the same read and Parquet write of the same files (its own SparkSession with the same
   settings). Then the same at 960 files of 1,000 rows (960,000 rows; ``--no-large`` skips it).
   Target (issue 23 §7): the asset within 1.15x of the script run with the same Spark settings
   and JVM archive (the ``tuned`` row), at both sizes.

Nothing about timings is asserted; the script exits 1 when a result is wrong (rows committed).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml
from bench_watermarks import (
    INGEST_START,
    PIPELINE,
    QUIET_LOGS,
    SCHEMA,
    BenchmarkError,
    Sizes,
    pipeline_yaml,
    print_table,
    ratio,
    write_ingest_landing,
)

ROOT = Path(__file__).resolve().parents[1]
#: The settings every process of this benchmark runs Spark with (asset, plain script, CLI).
SPARK_CONF = {"spark.ui.enabled": "false"}
FULL_INGEST = Sizes(0, 0, 0, 2, 12, 10, 2_000, 3)
QUICK_INGEST = Sizes(0, 0, 0, 1, 4, 1, 200, 1)
#: B's second size (issue 23 §7): 960 files of 1,000 rows, 960,000 rows over the same 2 days.
LARGE_INGEST = Sizes(0, 0, 0, 2, 12, 40, 1_000, 3)
#: B's target: the asset's run worker within this ratio of the plain script, start-up included.
TARGET = 1.15


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def run_process(
    command: Sequence[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[float, str]:
    """Wall seconds of a whole process and its output; BenchmarkError when it fails."""
    started = time.perf_counter()
    done = subprocess.run(
        list(command),
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'benchmarks'}", **(env or {})},
        timeout=900,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchmarkError(
            f"{' '.join(command[:4])} ... exited {done.returncode}:\n"
            f"{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return elapsed, done.stdout


def table_rows(table: Path) -> tuple[int, int]:
    from deltalake import DeltaTable

    delta = DeltaTable(str(table))
    return delta.to_pyarrow_dataset().count_rows(), delta.version()


# -------------------------------------------------------------------------------- configurations
def spark_section(remote: str | None) -> dict[str, Any]:
    return {"remote": remote} if remote else {"master": "local[2]", "conf": SPARK_CONF}


def write_config(folder: Path, landing: Path, remote: str | None) -> Path:
    """A configuration with the pipeline ``events`` over ``landing``, its table in ``folder``."""
    # partitions from the landing data's first day: no tick reports weeks of empty partitions
    start = {"start": INGEST_START.strftime("%Y-%m-%d")}
    pipeline = pipeline_yaml(landing, folder / "table", partitions=start)
    path = folder / "config.yaml"
    document = {"spark": spark_section(remote), "pipelines": [pipeline]}
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def one_file(folder: Path, rows: int, seed: int) -> tuple[Path, str]:
    """A landing folder holding ONE gzip NDJSON file of ``rows`` rows; (folder, its path)."""
    sizes = Sizes(0, 0, 0, 1, 1, 1, rows, 0)
    [relative] = write_ingest_landing(folder, sizes, random.Random(seed))
    return folder, relative


# ------------------------------------------------------------------- A. one small file, per run
def cli_run(work: Path, name: str, rows: int, remote: str | None) -> float:
    """``watermark-assets run-sensors`` as a process over ONE new file; its wall seconds."""
    folder = work / name
    landing = folder / "landing"
    landing.mkdir(parents=True)
    config = write_config(folder, landing, remote)
    home = folder / "dagster_home"
    home.mkdir()
    used_instance(home, config)  # not counted: the instance exists and the sensor has ticked
    one_file(landing, rows, seed=len(name))  # then the file lands
    command = [sys.executable, "-m", "watermark_assets.cli", "--config", str(config)]
    # started in its folder: in the checkout, its .env would name the checkout's instance
    elapsed, _ = run_process([*command, "run-sensors"], {"DAGSTER_HOME": str(home)}, folder)
    committed, version = table_rows(folder / "table")
    if committed != rows or version != 0:
        raise BenchmarkError(f"{name}: {committed} rows at version {version}, expected {rows}")
    return elapsed


def used_instance(home: Path, config: Path) -> None:
    """The Dagster instance in ``home`` as a user's is when a file lands: created (its SQLite
    storages) and the pipeline's sensor has ticked over the landing folder before (here: once,
    over the empty folder, reporting its observations). Creating the storage of those runless
    events happens once in an instance's life, not once per run."""
    from dagster import DagsterInstance, build_sensor_context
    from dagster._core.instance.ref import InstanceRef

    from watermark_assets.config import load_config
    from watermark_assets.defs import build_definitions

    defs = build_definitions(load_config(config))
    sensor = defs.resolve_sensor_def(f"{PIPELINE}_sensor")
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        data = sensor.evaluate_tick(build_sensor_context(instance=instance, definitions=defs))
        if data.run_requests:
            raise BenchmarkError(f"the empty landing folder's tick requested {data.run_requests}")
        for event in data.asset_events:
            instance.report_runless_asset_event(event)


def warm_runs(work: Path, name: str, rows: int, remote: str | None, count: int) -> list[float]:
    """``count + 1`` one-file runs in ONE process (``--child-warm``): the first pays the Spark
    start-up (or the Connect connection), the others are warm. Their seconds."""
    folder = work / name
    folder.mkdir()
    spec = {"folder": str(folder), "rows": rows, "remote": remote, "count": count + 1}
    _, output = run_process([sys.executable, __file__, "--child-warm", json.dumps(spec)])
    return [float(value) for value in json.loads(output.strip().splitlines()[-1])]


def child_warm(spec: dict[str, Any]) -> None:
    """In this process: one-file runs of fresh pipelines (landing and table), one after another,
    through the job as the run worker executes it; prints their seconds as JSON."""
    from dagster import DagsterInstance

    from watermark_assets.config import load_config
    from watermark_assets.defs import build_definitions
    from watermark_assets.kinds.file_path.assets import files_run_config
    from watermark_assets.names import job_name

    folder, rows = Path(spec["folder"]), int(spec["rows"])
    instance = DagsterInstance.ephemeral()
    seconds = []
    for number in range(int(spec["count"])):
        run_folder = folder / f"run{number}"
        landing, relative = one_file(run_folder / "landing", rows, seed=number)
        config = write_config(run_folder, landing, spec["remote"])
        started = time.perf_counter()
        defs = build_definitions(load_config(config))
        result = defs.resolve_job_def(job_name(PIPELINE)).execute_in_process(
            instance=instance,
            partition_key=INGEST_START.strftime("%Y-%m-%d"),
            run_config={**QUIET_LOGS, **files_run_config(PIPELINE, [relative])},
            raise_on_error=True,
        )
        seconds.append(time.perf_counter() - started)
        committed, _ = table_rows(run_folder / "table")
        if not result.success or committed != rows:
            raise BenchmarkError(f"warm run {number}: {committed} rows, expected {rows}")
    print(json.dumps(seconds))


def bench_one_file(
    work: Path,
    rows: int,
    reps: int,
    remote: str | None,
    *,
    local: bool = True,
    warm_ups: int | None = None,
) -> tuple[list[list[str]], list[str]]:
    results: dict[str, list[float]] = {"local": [], "connect": []}
    kinds = [("local", None)] if local else []
    kinds += [("connect", remote)] if remote else []
    # A long-running server has served runs before (its JIT is warm): as many runs as the
    # repetitions warm a new one up, not counted, so the processes and the warm runs both meet
    # a warm server (one run left the first processes to meet a colder one than the warm runs).
    # ``warm_ups`` 0 (the smoke test) leaves them out: they are the counted runs' code again.
    warm_ups = reps if warm_ups is None else warm_ups
    for number in range(warm_ups if remote else 0):
        print(
            f"[A] warming the Spark Connect server up: run {number + 1}/{warm_ups} ...", flush=True
        )
        seconds = cli_run(work, f"a_connect_warm_up_{number}", rows, remote)
        print(f"[A]   {seconds:.2f}s (not counted)", flush=True)
    for rep in range(reps):
        for kind, url in kinds if rep % 2 == 0 else kinds[::-1]:
            print(f"[A] one-file process, {kind}, repetition {rep + 1}/{reps} ...", flush=True)
            results[kind].append(cli_run(work, f"a_{kind}_{rep}", rows, url))
            print(f"[A]   {results[kind][-1]:.2f}s", flush=True)
    table: list[list[str]] = []
    notes: list[str] = []
    for kind, url in kinds:
        print(f"[A] warm runs in one process, {kind} ...", flush=True)
        # as many warm runs as repetitions after the first (the smoke run's one: the same code)
        first, *warm = warm_runs(work, f"a_{kind}_warm", rows, url, reps)
        process, work_s = median(results[kind]), median(warm)
        label = "local Spark (local[2])" if url is None else "Spark Connect (server up)"
        each = " ".join(f"{t:.2f}" for t in results[kind])
        fixed = process - work_s
        table.append(
            [label, f"{process:.2f}", each, f"{first:.2f}", f"{work_s:.2f}", f"{fixed:.2f}"]
        )
        notes.append(f"{label}: a one-file run costs {fixed:.2f} s more than its work")
        if url is not None:
            verdict = "met" if fixed <= 2.0 else "NOT met"
            notes.append(f"target: a one-file Spark Connect run within 2 s of its work: {verdict}")
    return table, notes


# ---------------------------------------------------------- B. asset vs plain PySpark, cold
PLAIN_SCRIPT = """
import json, sys
from pyspark.sql import SparkSession, functions as F
spec = json.loads(sys.argv[1])
builder = SparkSession.builder
for key, value in spec["conf"].items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
frame = spark.read.schema(spec["schema"]).json(spec["files"])
frame = frame.withColumn("event_date", F.to_date("event_time"))
frame.write.partitionBy("event_date").parquet(spec["out"])
"""


def prepare_run_worker(folder: Path, config: Path, first: str, last: str) -> tuple[list[str], str]:
    """Queue ONE run of the asset job over the partition range on an instance in ``folder``, as
    the UI or a backfill does (not counted), and return the command of its run worker: the
    ``dagster api execute_run`` process a run launcher starts (the Kubernetes, Docker and ECS
    launchers run exactly this), with the environment it needs."""
    from dagster import DagsterInstance
    from dagster._core.definitions.reconstruct import ReconstructableRepository
    from dagster._core.instance.ref import InstanceRef
    from dagster._grpc.types import ExecuteRunArgs
    from dagster._serdes import serialize_value

    from watermark_assets.defs.jobs import RANGE_END_TAG, RANGE_START_TAG
    from watermark_assets.kinds.file_path.assets import files_run_config
    from watermark_assets.names import job_name

    home = folder / "dagster_home"
    home.mkdir()
    env = {"DAGSTER_HOME": str(home), "WATERMARK_ASSETS_CONFIG": str(config)}
    previous = {name: os.environ.get(name) for name in env}
    os.environ.update(env)  # the code location reads its configuration from the environment
    try:
        repository = ReconstructableRepository.for_module(
            "watermark_assets.definitions", "defs", working_directory=str(ROOT)
        )
        job = repository.get_reconstructable_job(job_name(PIPELINE))
        origin = job.get_python_origin()
        with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
            run = instance.create_run_for_job(
                job_def=job.get_definition(),
                run_config={**QUIET_LOGS, **files_run_config(PIPELINE, None)},
                tags={
                    RANGE_START_TAG: first,
                    RANGE_END_TAG: last,
                },
                job_code_origin=origin,
            )
            arguments = ExecuteRunArgs(
                job_origin=origin,
                run_id=run.run_id,
                instance_ref=instance.get_ref(),
                set_exit_code_on_failure=True,
            )
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    dagster = str(Path(sys.executable).parent / "dagster")
    command = [dagster, "api", "execute_run", serialize_value(arguments)]
    return command, json.dumps(env)


def plain_confs() -> dict[str, dict[str, str]]:
    """The plain script's Spark settings: ``plain`` as a user writes it (the settings that shape
    the output: time zone, timestamp type, memory, ...; Spark's own start-up and listing), and
    ``plain, tuned`` with everything the asset's session gets on top (the driver-side listing
    threshold and the class-data sharing archive): the framework's own overhead."""
    from watermark_assets.spark import cds
    from watermark_assets.spark.session import LISTING_THRESHOLD_KEY, session_conf

    base = session_conf("local[2]", SPARK_CONF)  # SPARK_DEFAULTS, the master, SPARK_CONF
    plain = {k: v for k, v in base.items() if k != LISTING_THRESHOLD_KEY}
    return {"plain": plain, "plain, tuned": cds.with_archive(base)}


def bench_ingestion(work: Path, sizes: Sizes) -> tuple[list[list[str]], list[str]]:
    from watermark_assets.spark.session import LISTING_THRESHOLD_KEY

    master = work / f"b_landing_{sizes.ingest_files}"  # one per size: the sizes differ
    print(f"[B] writing {sizes.ingest_files} files ({sizes.ingest_rows} rows) ...", flush=True)
    relative = write_ingest_landing(master, sizes, random.Random(2))
    days = [
        (INGEST_START + timedelta(days=d)).strftime("%Y-%m-%d") for d in range(sizes.ingest_days)
    ]
    confs = plain_confs()
    sides = ["asset", *confs]
    times: dict[str, list[float]] = {side: [] for side in sides}
    for rep in range(sizes.ingest_reps):
        for side in sides[rep % len(sides) :] + sides[: rep % len(sides)]:  # rotating order
            folder = work / f"b_{side.replace(', ', '_')}_{rep}"
            landing = folder / "landing"
            shutil.copytree(master, landing)
            print(f"[B] repetition {rep + 1}/{sizes.ingest_reps}: {side} ...", flush=True)
            if side == "asset":
                config = write_config(folder, landing, None)
                command, env = prepare_run_worker(folder, config, days[0], days[-1])
                elapsed, _ = run_process(command, json.loads(env))
                committed, version = table_rows(folder / "table")
                if committed != sizes.ingest_rows or version != 0:
                    raise BenchmarkError(
                        f"asset: {committed} rows at version {version}, expected "
                        f"{sizes.ingest_rows} in one commit"
                    )
            else:
                spec = {
                    "conf": confs[side],
                    "schema": SCHEMA,
                    "files": [str(landing / p) for p in relative],
                    "out": str(folder / "parquet"),
                }
                command = [sys.executable, "-c", PLAIN_SCRIPT, json.dumps(spec)]
                elapsed, _ = run_process(command)
                import pyarrow.dataset as ds

                written = ds.dataset(
                    str(folder / "parquet"), format="parquet", partitioning="hive"
                ).count_rows()
                if written != sizes.ingest_rows:
                    raise BenchmarkError(f"{side}: {written} rows, expected {sizes.ingest_rows}")
            times[side].append(elapsed)
            print(f"[B]   {elapsed:.2f}s", flush=True)
            shutil.rmtree(folder)
    labels = {
        "asset": "asset run worker (dagster api execute_run), 1 run",
        "plain": "plain PySpark script process",
        "plain, tuned": "plain script + the asset's Spark tuning",
    }
    rows = [
        [labels[side], f"{median(times[side]):.2f}", " ".join(f"{t:.2f}" for t in times[side])]
        for side in sides
    ]
    asset, plain, tuned_plain = (median(times[side]) for side in sides)
    met = "met" if asset / tuned_plain <= TARGET else "NOT met"
    notes = [
        f"asset / the plain script, start-up included (median): {ratio(asset, plain)}",
        f"asset / the tuned plain script (the same Spark settings and JVM archive), start-up "
        f"included (median): {ratio(asset, tuned_plain)}; target within {TARGET:.2f}x: {met}",
    ]
    tuned = "driver JVM with Spark's class-data sharing archive (spark/cds.py)"
    if "-XX:SharedArchiveFile" not in confs["plain, tuned"].get(
        "spark.driver.extraJavaOptions", ""
    ):
        tuned = "NO class-data sharing archive yet (python -m watermark_assets.spark.cds)"
    threshold = confs["plain, tuned"].get(LISTING_THRESHOLD_KEY)
    notes.append(f"tuned: driver-side listing up to {threshold} paths, {tuned}")
    return rows, notes


# ------------------------------------------------------------------------------------------ main
def start_connect_server(work: Path) -> Any:
    """A Spark Connect server from pyspark's jars (tests/spark_services.py), as a context."""
    sys.path.insert(0, str(ROOT / "tests"))
    from spark_services import connect_server

    return connect_server(work / "connect")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument("--rows", type=int, default=2_000, help="rows of the one small file")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 3; quick 1)")
    parser.add_argument("--only", choices=("one-file", "ingestion"), help="run one part only")
    parser.add_argument(
        "--remote", help="an already running Spark Connect server (default: start one)"
    )
    parser.add_argument("--no-connect", action="store_true", help="A: local Spark only")
    parser.add_argument(
        "--no-local", action="store_true", help="A: Spark Connect only (B still starts JVMs)"
    )
    parser.add_argument(
        "--warm-ups",
        type=int,
        default=None,
        help="A: one-file runs that warm the Spark Connect server up, not counted (default: reps)",
    )
    parser.add_argument(
        "--no-large", action="store_true", help="B: the 240-file size only (not 960 files too)"
    )
    parser.add_argument("--child-warm", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_warm:
        child_warm(json.loads(args.child_warm))
        return 0
    reps = args.reps or (1 if args.quick else 3)
    sizes = QUICK_INGEST if args.quick else FULL_INGEST
    sizes = Sizes(0, 0, 0, sizes.ingest_days, sizes.ingest_hours, sizes.files_per_hour,
                  sizes.rows_per_file, reps)  # fmt: skip
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="bench_run_latency_"))
    started = time.perf_counter()
    outputs = []
    ok = True
    try:
        if args.only in (None, "one-file"):
            if args.no_connect and args.no_local:
                parser.error("--no-connect and --no-local leave part A nothing to measure")
            local = not args.no_local
            if args.no_connect or args.remote:
                rows, notes = bench_one_file(
                    work, args.rows, reps, args.remote, local=local, warm_ups=args.warm_ups
                )
            else:
                print("[A] starting a Spark Connect server ...", flush=True)
                server_started = time.perf_counter()
                with start_connect_server(work) as server:
                    print(f"[A]   up in {time.perf_counter() - server_started:.1f}s", flush=True)
                    rows, notes = bench_one_file(
                        work, args.rows, reps, server.url, local=local, warm_ups=args.warm_ups
                    )
            outputs.append(
                (
                    f"A. One file of {args.rows} rows: run-sensors as a whole process (seconds, "
                    f"{reps} repetitions) and the same run in a warm process",
                    ["mode", "process", "each", "1st in process", "warm run", "fixed cost"],
                    rows,
                    notes,
                )
            )
        if args.only in (None, "ingestion"):
            large = dataclasses.replace(LARGE_INGEST, ingest_reps=reps)
            scales = [sizes] if args.quick or args.no_large else [sizes, large]
            for scale in scales:
                rows, notes = bench_ingestion(work, scale)
                outputs.append(
                    (
                        f"B. Ingestion of {scale.ingest_files} files ({scale.ingest_rows} rows), "
                        "whole processes with Spark start-up (seconds, "
                        f"{reps} alternating repetitions)",
                        ["case", "median", "each"],
                        rows,
                        notes,
                    )
                )
    except BenchmarkError as error:
        print(f"WRONG: {error}", file=sys.stderr)
        ok = False
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    for title, headers, rows, notes in outputs:
        print_table(title, headers, rows)
        for line in notes:
            print(f"  {line}")
        print()
    print(f"total wall time {time.perf_counter() - started:.0f}s; exit {'0' if ok else '1'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
