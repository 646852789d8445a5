"""End-to-end ingestion with landing AND lake on S3 against the same on local disk.

The benchmark's 240 gzip NDJSON files (``bench_watermarks.py`` part B: 2 days x 24 hours x 5
files, 2,000 rows each) are ingested by ONE Dagster run of the asset job over the partition range
(one Spark job, one Delta commit), twice per side, alternating, in ONE process with ONE Spark
session (each side warmed up first by one unmeasured run; the first S3 run's time is printed
apart: it starts the executors' Python workers; ``--no-warm-up`` leaves the warm-ups out, for a
smoke run, and the first measured S3 run is that first one):

- local: the landing folder and the Delta table on local disk (Spark's own JSON reader and
  Parquet writer);
- S3: both on moto's S3 server on 127.0.0.1 (tests/s3_server.py, counting the requests it
  answers): Spark reads and writes through the fsspec data source (``spark/io.py``), the Delta
  commit goes through delta-rs.

Both must commit every row once in one commit (exit 1 otherwise). Timings are never asserted;
compare the ratio (benchmarks/README.md, "S3 against local disk"). moto answers in Python, so the
S3 side measures this project's S3 path plus an emulator, not AWS.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_watermarks import (
    INGEST_START,
    PIPELINE,
    QUIET_LOGS,
    SPARK_CONF,
    Sizes,
    frozen_clock,
    pipeline_yaml,
    print_table,
    ratio,
    secs,
    write_ingest_landing,
)
from s3_server import S3Server


class BenchmarkError(Exception):
    """A side committed the wrong rows."""


def parse(raw: dict[str, Any], storage_block: dict[str, Any] | None) -> Any:
    import yaml

    from watermark_assets.config import parse_config

    document: dict[str, Any] = {
        "spark": {"master": "local[2]", "conf": SPARK_CONF},
        "pipelines": [raw],
    }
    if storage_block is not None:
        document["storage"] = storage_block
    return parse_config(yaml.safe_dump(document), env={}, base=Path.cwd(), origin="benchmark")


def ingest(config: Any, sizes: Sizes, instance: Any) -> float:
    """Seconds of one run of the asset job over every day; checks the rows and the commit."""
    from deltalake import DeltaTable

    from watermark_assets import storage
    from watermark_assets.defs import build_definitions
    from watermark_assets.defs.jobs import RANGE_END_TAG, RANGE_START_TAG
    from watermark_assets.kinds.file_path.assets import files_run_config
    from watermark_assets.names import job_name

    days = [
        (INGEST_START + timedelta(days=d)).strftime("%Y-%m-%d") for d in range(sizes.ingest_days)
    ]
    now = INGEST_START + timedelta(days=sizes.ingest_days, hours=1)
    job = build_definitions(config, clock=frozen_clock(now)).resolve_job_def(job_name(PIPELINE))
    started = time.perf_counter()
    result = job.execute_in_process(
        run_config={**QUIET_LOGS, **files_run_config(PIPELINE, None)},
        instance=instance,
        tags={
            RANGE_START_TAG: days[0],
            RANGE_END_TAG: days[-1],
        },
        raise_on_error=True,
    )
    elapsed = time.perf_counter() - started
    table_uri = config.pipeline(PIPELINE).table.uri
    table = DeltaTable(table_uri, storage_options=storage.delta_options(table_uri))
    rows = table.to_pyarrow_dataset().count_rows()
    if not result.success or rows != sizes.ingest_rows or table.version() != 0:
        raise BenchmarkError(
            f"{table_uri}: {rows} rows at version {table.version()}, expected "
            f"{sizes.ingest_rows} in ONE commit"
        )
    return elapsed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=2, help="landing days (2)")
    parser.add_argument("--hours", type=int, default=24, help="landing hours a day (24)")
    parser.add_argument("--files-per-hour", type=int, default=5, help="files per hour (5)")
    parser.add_argument("--rows-per-file", type=int, default=2_000, help="rows per file (2,000)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per side (2)")
    parser.add_argument(
        "--no-warm-up",
        action="store_true",
        help="no unmeasured run per side first (a smoke run: the measured runs are the same code)",
    )
    args = parser.parse_args(argv)
    sizes = Sizes(
        0, 0, 0, args.days, args.hours, args.files_per_hour, args.rows_per_file, args.repeat
    )

    from dagster import DagsterInstance

    from watermark_assets import storage
    from watermark_assets.spark.session import get_spark

    work = Path(tempfile.mkdtemp(prefix="bench_s3_ingest_"))
    try:
        master = work / "landing"
        write_ingest_landing(master, sizes, random.Random(2))
        print(f"[s3] {sizes.ingest_files} files, {sizes.ingest_rows} rows written", flush=True)
        started = time.perf_counter()
        get_spark("local[2]", SPARK_CONF)
        print(f"[s3] Spark started in {time.perf_counter() - started:.1f}s", flush=True)
        instance = DagsterInstance.ephemeral()
        with S3Server() as server:
            block = server.storage_block()
            bucket = server.new_bucket("bench")
            parse(pipeline_yaml(master, work / "unused"), block)  # installs the S3 settings
            fs, _ = storage.filesystem(f"s3://{bucket}/landing")
            fs.put(str(master), f"{bucket}/landing", recursive=True)

            def config_of(side: str, rep: int) -> Any:
                if side == "local":
                    table = work / f"table_{rep}"
                    return parse(pipeline_yaml(master, table), None)
                raw = pipeline_yaml(master, work / "unused")
                raw["source"]["uri"] = f"s3://{bucket}/landing"
                raw["table"]["uri"] = f"s3://{bucket}/lake/run_{rep}"
                return parse(raw, block)

            # Warm-up of both paths, not in the table: JIT, readers, Dagster, and on S3 the
            # executors' Python workers importing fsspec/s3fs (the first S3 run pays it)
            # (--no-warm-up: none; the first S3 run of the process is then the first measured)
            first_s3: float | None = None
            if not args.no_warm_up:
                ingest(config_of("local", -1), sizes, instance)
                first_s3 = ingest(config_of("S3", -1), sizes, instance)
                print(f"[s3] warm-up: the first S3 run took {first_s3:.2f}s", flush=True)
            times: dict[str, list[float]] = {"local": [], "S3": []}
            requests: Counter[str] = Counter()
            for rep in range(args.repeat):
                for side in ("local", "S3") if rep % 2 == 0 else ("S3", "local"):
                    config = config_of(side, rep)
                    server.reset()
                    elapsed = ingest(config, sizes, instance)
                    if side == "S3":
                        requests = Counter(r.kind for r in server.requests)
                    times[side].append(elapsed)
                    first_s3 = elapsed if first_s3 is None and side == "S3" else first_s3
                    print(f"[s3] {side} run {rep + 1}: {elapsed:.2f}s", flush=True)
        shown = ", ".join(f"{kind} {count}" for kind, count in sorted(requests.items()))
        print_table(
            f"Ingestion of {sizes.ingest_files} files ({sizes.ingest_rows} rows), one run each",
            ["landing and lake", "median s", "runs s", "S3 requests of one run"],
            [
                [
                    side,
                    secs(statistics.median(values)),
                    " ".join(f"{v:.2f}" for v in values),
                    shown if side == "S3" else "-",
                ]
                for side, values in times.items()
            ],
        )
        print(
            "S3 / local (median): "
            f"{ratio(statistics.median(times['S3']), statistics.median(times['local']))}; the "
            f"first S3 run of the process (cold Python workers) took {first_s3:.2f}s"
        )
        return 0
    except BenchmarkError as error:
        print(f"WRONG: {error}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
