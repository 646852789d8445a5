"""Benchmark: an incremental column-watermark read of 1% changed rows against a full read.

Run ``make bench-column`` or ``.venv/bin/python benchmarks/bench_column.py [--quick]``. One run
measures both sides on the same data, because machines are shared and noisy: compare the ratios
(full / incremental), never absolute timings from different runs. Nothing is asserted about
timings; the script exits 1 only when a result is wrong (rows read, the next watermark).

Setup (not timed): an ``orders`` table (id BIGINT, updated_at TIMESTAMPTZ, customer TEXT, amount
DOUBLE) of ``--rows`` rows in a fresh PostgreSQL database (created, loaded with COPY, dropped at
the end), and the same rows as a Delta table written with ``deltalake`` in ``--commits`` commits
ordered by ``updated_at`` (each file has its own ``updated_at`` range in its statistics). Then
``--changed-pct`` of the rows, spread at random over the table, get a newer ``updated_at``:
PostgreSQL ``UPDATE``; Delta, by default, the changed versions appended as one new commit (the old
versions stay, as in an append-only change feed; ``--delta-change`` for a delete + append or a
MERGE, which rewrite the files the change touches: benchmarks/README.md).

Cases, per source: a full read (empty watermark) and an incremental read (watermark = the greatest
``updated_at`` before the change, operator ``>``), each through the source's ``read`` and
``stage_rows`` into a temporary folder: the path a run takes, minus the Delta commit. Timed warm
(one process, one Spark session, alternating repetitions, median) and cold (a whole process per
case, ``--case NAME``, Spark start-up included).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

BASE = datetime(2026, 1, 1, tzinfo=timezone.utc)
CASES = ("postgres_full", "postgres_incremental", "delta_full", "delta_incremental")
SOURCES = {"postgres": "PostgreSQL (JDBC)", "delta": "Delta (deltalake log)"}
RESULT_PREFIX = "BENCH_COLUMN_RESULT "
COLD_TIMEOUT = 1800  # seconds a --case process may take


class BenchmarkError(Exception):
    """A wrong result (not a slow one): the script exits non-zero."""


@dataclass(frozen=True)
class Setup:
    """What the cases need; written as JSON for the ``--case`` subprocesses."""

    rows: int
    changed: int
    full_rows: dict[str, int]  # source -> rows a full read must return
    database: str | None  # None: PostgreSQL is skipped
    jdbc_url: str | None
    delta_uri: str
    before: str  # the watermark before the change (JSON)
    after: str  # the watermark a read must reach (JSON)
    delta_change: str

    def dumps(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def loads(cls, text: str) -> Setup:
        return cls(**json.loads(text))


def spark_conf() -> dict[str, str]:
    from watermark_assets.sources.jdbc import postgres_jdbc_jar

    conf = {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
    }
    jar = postgres_jdbc_jar()
    if jar:
        conf["spark.jars"] = jar
    return conf


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


def ratio(numerator: float | None, denominator: float | None) -> str:
    if numerator is None or denominator is None or denominator <= 0:
        return "n/a"
    return f"{numerator / denominator:.1f}x"


def secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


# --------------------------------------------------------------------------------------------
# Setup (not timed)
# --------------------------------------------------------------------------------------------


def orders_table(rows: int) -> Any:
    """``rows`` orders, one second apart (plus sub-second jitter), sorted by ``updated_at``."""
    import pyarrow as pa

    base = int(BASE.timestamp() * 1_000_000)
    micros = [base + i * 1_000_000 + (i * 7919) % 1_000_000 for i in range(rows)]
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "updated_at": pa.array(micros, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "customer": pa.array([f"customer {i % 5000:04d}" for i in range(rows)], pa.string()),
            "amount": pa.array([(i * 37 % 100_000) / 100 for i in range(rows)], pa.float64()),
        }
    )


def changed_rows(table: Any, changed: int, rng: random.Random) -> Any:
    """``changed`` rows picked at random, each with an ``updated_at`` after every existing one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = sorted(rng.sample(range(table.num_rows), changed))
    picked = table.take(pa.array(ids, pa.int64()))
    top = int(pc.max(table["updated_at"]).cast(pa.int64()).as_py())
    micros = [top + 60_000_000 + n * 1_000 for n in range(changed)]
    stamps = pa.array(micros, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    return picked.set_column(picked.schema.get_field_index("updated_at"), "updated_at", stamps)


def pg_conninfo(args: argparse.Namespace, database: str) -> str:
    return f"postgresql://{args.pg_user}@{args.pg_host}:{args.pg_port}/{database}"


def setup_postgres(args: argparse.Namespace, table: Any, changed: Any) -> tuple[str, str]:
    """A fresh database with ``orders`` (:func:`load_postgres`); its name and JDBC URL."""
    import psycopg

    database = f"wa_bench_column_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_conninfo(args, "postgres"), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{database}"')
    try:
        load_postgres(args, database, table, changed)
    except BaseException:
        drop_postgres(args, database)
        raise
    url = f"jdbc:postgresql://{args.pg_host}:{args.pg_port}/{database}?user={args.pg_user}"
    return database, url


def load_postgres(args: argparse.Namespace, database: str, table: Any, changed: Any) -> None:
    """``orders`` loaded by COPY (indexes built after), then the changed rows UPDATEd."""
    import psycopg
    import pyarrow.csv as pacsv

    with psycopg.connect(pg_conninfo(args, database), autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE orders (id bigint NOT NULL, updated_at timestamptz NOT NULL, "
            "customer text NOT NULL, amount double precision NOT NULL)"
        )
        buffer = io.BytesIO()
        pacsv.write_csv(table, buffer, pacsv.WriteOptions(include_header=False))
        view = buffer.getbuffer()
        with conn.cursor().copy("COPY orders FROM STDIN (FORMAT csv)") as copy:
            for start in range(0, len(view), 1 << 20):
                copy.write(view[start : start + (1 << 20)])
        del view
        conn.execute("ALTER TABLE orders ADD PRIMARY KEY (id)")
        # What an incrementally read table has: an index on its watermark column.
        conn.execute("CREATE INDEX orders_updated_at ON orders (updated_at)")
        conn.execute(
            "UPDATE orders AS o SET updated_at = c.updated_at "
            "FROM unnest(%s::bigint[], %s::timestamptz[]) AS c(id, updated_at) WHERE o.id = c.id",
            (changed["id"].to_pylist(), changed["updated_at"].to_pylist()),
        )
        conn.execute("VACUUM ANALYZE orders")
        count = conn.execute("SELECT count(*) FROM orders").fetchone()
        if count is None or count[0] != table.num_rows:
            raise BenchmarkError(f"PostgreSQL holds {count} rows, expected {table.num_rows}")


def drop_postgres(args: argparse.Namespace, database: str) -> None:
    import psycopg

    with psycopg.connect(pg_conninfo(args, "postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def setup_delta(uri: str, table: Any, changed: Any, commits: int, how: str) -> int:
    """The rows in ``commits`` appends ordered by ``updated_at``, then the change; the number of
    rows a full read must return."""
    from deltalake import DeltaTable, write_deltalake

    per_commit = -(-table.num_rows // commits)
    for start in range(0, table.num_rows, per_commit):
        write_deltalake(uri, table.slice(start, per_commit), mode="append")
    delta = DeltaTable(uri)
    if how == "append":  # an append-only log: the old versions stay
        write_deltalake(uri, changed, mode="append")
        return int(table.num_rows + changed.num_rows)
    if how == "delete-append":
        ids = ",".join(str(i) for i in changed["id"].to_pylist())
        delta.delete(f"id IN ({ids})")
        write_deltalake(uri, changed, mode="append")
    else:  # merge: every touched file is rewritten with its updated and unchanged rows
        (
            delta.merge(changed, predicate="t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .execute()
        )
    rows = DeltaTable(uri).to_pyarrow_dataset().count_rows()
    if rows != table.num_rows:
        raise BenchmarkError(f"the Delta table holds {rows} rows, expected {table.num_rows}")
    return int(rows)


def postgres_unavailable(args: argparse.Namespace) -> str | None:
    """Why PostgreSQL cannot be benchmarked here, or None."""
    from watermark_assets.sources.jdbc import postgres_jdbc_jar

    if args.only == "delta":
        return "--only delta"
    if postgres_jdbc_jar() is None:
        return "the JDBC driver /usr/share/java/postgresql.jar is missing (make jdbc)"
    try:
        import psycopg

        with psycopg.connect(pg_conninfo(args, "postgres"), connect_timeout=5):
            pass
    except Exception as error:  # psycopg.OperationalError, ImportError
        return f"PostgreSQL at {args.pg_host}:{args.pg_port} is not reachable ({error})"
    return None


def build_setup(args: argparse.Namespace, work: Path) -> Setup:
    from watermark_assets.core.column.watermark import ColumnWatermark

    rows = args.rows
    changed_count = max(1, round(rows * args.changed_pct / 100))
    started = time.perf_counter()
    print(f"[setup] generating {rows} orders, {changed_count} of them changed ...", flush=True)
    table = orders_table(rows)
    changed = changed_rows(table, changed_count, random.Random(7))
    import pyarrow.compute as pc

    def watermark(column: Any) -> str:
        return ColumnWatermark.of({"updated_at": pc.max(column).as_py()}).to_json()

    before, after = watermark(table["updated_at"]), watermark(changed["updated_at"])
    full_rows: dict[str, int] = {}
    database = url = None
    reason = postgres_unavailable(args)
    if reason is None:
        print("[setup] PostgreSQL: CREATE DATABASE, COPY, indexes, UPDATE ...", flush=True)
        database, url = setup_postgres(args, table, changed)
        full_rows["postgres"] = rows
    else:
        print(f"[setup] PostgreSQL skipped: {reason}", flush=True)
    delta_uri = str(work / "orders_delta")
    if args.only != "postgres":
        print(
            f"[setup] Delta: {args.commits} commits, then the change ({args.delta_change}) ...",
            flush=True,
        )
        try:
            full_rows["delta"] = setup_delta(
                delta_uri, table, changed, args.commits, args.delta_change
            )
        except BaseException:
            if database:
                drop_postgres(args, database)
            raise
    print(f"[setup] done in {time.perf_counter() - started:.1f}s", flush=True)
    return Setup(
        rows=rows,
        changed=changed_count,
        full_rows=full_rows,
        database=database,
        jdbc_url=url,
        delta_uri=delta_uri,
        before=before,
        after=after,
        delta_change=args.delta_change,
    )


# --------------------------------------------------------------------------------------------
# One case: the source's read + stage_rows (what a run does before its Delta commit)
# --------------------------------------------------------------------------------------------


def run_case(spark: Any, setup: Setup, case: str, stage_dir: str) -> dict[str, Any]:
    """Read through the source and stage the rows; seconds, rows, details. Checks the result."""
    from watermark_assets.core.column.predicate import predicate
    from watermark_assets.core.column.watermark import ColumnWatermark, GreaterThan
    from watermark_assets.sources.column import ColumnSource, stage_rows
    from watermark_assets.sources.jdbc import JdbcSource
    from watermark_assets.sources.table import DeltaTableSource

    source_name, mode = case.split("_", 1)
    columns = ("updated_at",)
    start = (
        ColumnWatermark.empty(columns)
        if mode == "full"
        else ColumnWatermark.from_json(setup.before)
    )
    started = time.perf_counter()
    source: ColumnSource
    if source_name == "postgres":
        assert setup.jdbc_url is not None
        source = JdbcSource(
            name="orders",
            url=setup.jdbc_url,
            table="orders",
            schema="public",
            watermark_columns=columns,
            num_partitions=2,
        )
    else:
        source = DeltaTableSource(name="orders", uri=setup.delta_uri)
    read = source.read(spark, predicate(start, GreaterThan))
    staged = stage_rows(read, columns=columns, start=start, data_dir=stage_dir)
    elapsed = time.perf_counter() - started
    expected = setup.full_rows[source_name] if mode == "full" else setup.changed
    if staged.rows != expected:
        raise BenchmarkError(f"{case}: {staged.rows} rows read, expected {expected}")
    if staged.next_watermark != ColumnWatermark.from_json(setup.after):
        raise BenchmarkError(
            f"{case}: next watermark {staged.next_watermark}, expected "
            f"{ColumnWatermark.from_json(setup.after)}"
        )
    details = read.details
    if source_name == "delta":
        note = (
            f"{details['files_read']} of {details['files_in_table']} files read, "
            f"{details['files_skipped_by_statistics']} skipped by statistics"
        )
    else:
        parts = details.get("partitioning")
        split = "" if not isinstance(parts, dict) or "lowerBound" in parts else " (one range)"
        note = f"{details.get('num_partitions')} JDBC partitions{split}"
    return {"seconds": elapsed, "rows": staged.rows, "note": note}


def child_main(args: argparse.Namespace) -> int:
    """``--case NAME``: one case in this whole process (Spark start-up included)."""
    from watermark_assets.spark.session import get_spark

    setup = Setup.loads(Path(args.setup).read_text())
    started = time.perf_counter()
    spark = get_spark("local[2]", spark_conf())
    spark_start = time.perf_counter() - started
    result = run_case(spark, setup, args.case, args.stage)
    result["spark_start"] = spark_start
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


# --------------------------------------------------------------------------------------------
# Warm (one session) and cold (a process per case)
# --------------------------------------------------------------------------------------------


def bench_warm(setup: Setup, cases: Sequence[str], reps: int, work: Path) -> dict[str, Any]:
    from watermark_assets.spark.session import get_spark

    print("[warm] starting Spark (once) ...", flush=True)
    started = time.perf_counter()
    spark = get_spark("local[2]", spark_conf())
    spark_start = time.perf_counter() - started
    stage_root = work / "stage_warm"
    counter = 0

    def once(case: str) -> dict[str, Any]:
        nonlocal counter
        counter += 1
        target = stage_root / f"{case}_{counter}"
        try:
            return run_case(spark, setup, case, str(target))
        finally:
            shutil.rmtree(target, ignore_errors=True)

    started = time.perf_counter()
    for case in cases:  # warm-up: JIT, the JDBC driver, the Parquet reader and writer
        once(case)
    warm_up = time.perf_counter() - started
    print(f"[warm]   Spark start {spark_start:.1f}s, warm-up (each case once) {warm_up:.1f}s")
    results: dict[str, list[dict[str, Any]]] = {case: [] for case in cases}
    for rep in range(reps):
        for source in ("postgres", "delta"):
            pair = [c for c in cases if c.startswith(source + "_")]
            for case in pair if rep % 2 == 0 else list(reversed(pair)):
                result = once(case)
                results[case].append(result)
                print(f"[warm] {rep + 1}/{reps} {case}: {result['seconds']:.2f}s", flush=True)
    return {"spark_start": spark_start, "warm_up": warm_up, "results": results}


def bench_cold(
    setup_file: Path, cases: Sequence[str], reps: int, work: Path
) -> dict[str, list[dict[str, Any]]]:
    results: dict[str, list[dict[str, Any]]] = {case: [] for case in cases}
    for rep in range(reps):
        ordered = list(cases) if rep % 2 == 0 else list(reversed(cases))
        for case in ordered:
            stage = work / f"stage_cold_{case}_{rep}"
            command = [
                sys.executable,
                os.path.abspath(__file__),
                "--case",
                case,
                "--setup",
                str(setup_file),
                "--stage",
                str(stage),
            ]
            started = time.perf_counter()
            try:
                done = subprocess.run(
                    command, capture_output=True, text=True, check=False, timeout=COLD_TIMEOUT
                )
            except subprocess.TimeoutExpired as error:
                raise BenchmarkError(f"cold {case} ran over {COLD_TIMEOUT}s") from error
            elapsed = time.perf_counter() - started
            shutil.rmtree(stage, ignore_errors=True)
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith(RESULT_PREFIX)]
            if done.returncode != 0 or not lines:
                raise BenchmarkError(
                    f"cold {case} exited {done.returncode}:\n{done.stdout[-2000:]}"
                    f"\n{done.stderr[-4000:]}"
                )
            result = json.loads(lines[-1][len(RESULT_PREFIX) :])
            result["process"] = elapsed
            results[case].append(result)
            print(
                f"[cold] {rep + 1}/{reps} {case}: process {elapsed:.2f}s "
                f"(Spark start {result['spark_start']:.2f}s, read+stage {result['seconds']:.2f}s)",
                flush=True,
            )
    return results


def load_average() -> str:
    """The 1, 5 and 15 minute load averages (the machine is shared: say how busy it was)."""
    try:
        return " ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def report(
    setup: Setup,
    cases: Sequence[str],
    warm: dict[str, Any],
    cold: dict[str, list[dict[str, Any]]] | None,
    reps: int,
    cold_reps: int,
) -> None:
    headers = [
        "source",
        "rows full",
        "rows incr",
        "warm full s",
        "warm incr s",
        "warm ratio",
        "cold full s",
        "cold incr s",
        "cold ratio",
        "incremental read",
    ]
    rows = []
    for source in ("postgres", "delta"):
        full, incr = f"{source}_full", f"{source}_incremental"
        if full not in cases:
            continue
        w_full = median([r["seconds"] for r in warm["results"][full]])
        w_incr = median([r["seconds"] for r in warm["results"][incr]])
        c_full = median([r["process"] for r in cold[full]]) if cold else None
        c_incr = median([r["process"] for r in cold[incr]]) if cold else None
        rows.append(
            [
                SOURCES[source],
                str(warm["results"][full][-1]["rows"]),
                str(warm["results"][incr][-1]["rows"]),
                secs(w_full),
                secs(w_incr),
                ratio(w_full, w_incr),
                secs(c_full),
                secs(c_incr),
                ratio(c_full, c_incr),
                warm["results"][incr][-1]["note"],
            ]
        )
    cold_text = f"cold: 1 process per case, median of {cold_reps}" if cold else "cold: skipped"
    print_table(
        f"Column watermark: full vs incremental read, {setup.rows} rows, {setup.changed} changed "
        f"(updated_at > watermark; warm: 1 Spark session, median of {reps}; {cold_text}; "
        "times in seconds)",
        headers,
        rows,
    )
    print("  ratio = full / incremental (above 1: the incremental read is faster)")
    print(
        f"  warm excludes Spark start-up ({warm['spark_start']:.1f}s) and a warm-up "
        f"({warm['warm_up']:.1f}s, each case once); cold is the whole process"
    )
    change = f"Delta change: {setup.delta_change}; " if "delta_full" in cases else ""
    print(f"  {change}load average {load_average()}")
    for case in cases:
        each = " ".join(f"{r['seconds']:.2f}" for r in warm["results"][case])
        line = f"  {case:<21} warm runs {each}"
        if cold:
            procs = " ".join(f"{r['process']:.2f}" for r in cold[case])
            starts = " ".join(f"{r['spark_start']:.2f}" for r in cold[case])
            reads = " ".join(f"{r['seconds']:.2f}" for r in cold[case])
            line += f"; cold processes {procs} (Spark start {starts}, read+stage {reads})"
        print(line + f"; {warm['results'][case][-1]['note']}")
    print()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, help="rows in each table (default 1,000,000)")
    parser.add_argument("--changed-pct", type=float, default=1.0, help="rows changed, percent")
    parser.add_argument("--commits", type=int, default=20, help="Delta commits of the load")
    parser.add_argument(
        "--delta-change",
        choices=("append", "delete-append", "merge"),
        default="append",
        help="how the Delta table takes the change (README)",
    )
    parser.add_argument("--quick", action="store_true", help="50,000 rows, 1 repetition each")
    parser.add_argument("--reps", type=int, help="warm repetitions (default 3, --quick 1)")
    parser.add_argument("--cold-reps", type=int, help="cold repetitions (default 2, --quick 1)")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold processes")
    parser.add_argument("--only", choices=("postgres", "delta"), help="one source only")
    parser.add_argument("--keep", action="store_true", help="keep the data (folder, database)")
    parser.add_argument("--pg-host", default="127.0.0.1")
    parser.add_argument("--pg-port", type=int, default=5432)
    parser.add_argument("--pg-user", default="postgres")
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--setup", help=argparse.SUPPRESS)
    parser.add_argument("--stage", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warnings.filterwarnings("ignore", message=".*is currently in beta.*")
    if args.case:
        return child_main(args)
    if args.rows is None:
        args.rows = 50_000 if args.quick else 1_000_000
    reps = args.reps or (1 if args.quick else 3)
    cold_reps = args.cold_reps or (1 if args.quick else 2)

    work = Path(tempfile.mkdtemp(prefix="bench_column_"))
    started = time.perf_counter()
    setup: Setup | None = None
    ok = True
    try:
        setup = build_setup(args, work)
        setup_file = work / "setup.json"
        setup_file.write_text(setup.dumps())
        cases = [c for c in CASES if c.split("_", 1)[0] in setup.full_rows]
        warm = bench_warm(setup, cases, reps, work)
        cold = None if args.no_cold else bench_cold(setup_file, cases, cold_reps, work)
        print()
        report(setup, cases, warm, cold, reps, cold_reps)
    except BenchmarkError as error:
        ok = False
        print(f"WRONG: {error}", file=sys.stderr)
    finally:
        if args.keep:
            print(f"kept {work}" + (f" and database {setup.database}" if setup else ""))
        else:
            shutil.rmtree(work, ignore_errors=True)
            if setup is not None and setup.database:
                drop_postgres(args, setup.database)
    print(f"total wall time {time.perf_counter() - started:.0f}s; exit {'0' if ok else '1'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
