"""Smoke test of benchmarks/bench_s3_ingest.py: a tiny run commits every row once on both sides
(the script exits 1 otherwise) and prints its table. Timings are never asserted. The script
runs in one process with one Spark session: here it runs in the test's, on the shared session.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import run_benchmark_here


@pytest.mark.slow
def test_bench_s3_ingest_small_run_prints_the_table(
    spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = run_benchmark_here(
        spark,
        capsys,
        "bench_s3_ingest.py",
        *("--days", "1", "--hours", "2", "--files-per-hour", "1", "--rows-per-file", "20"),
        *("--repeat", "1", "--no-warm-up"),  # two files: one run a side, every step of the path
    )
    assert "Ingestion of 2 files (40 rows), one run each" in lines
    rows = {line.split()[0]: line for line in lines if line.startswith(("local  ", "S3  "))}
    assert set(rows) == {"local", "S3"}
    assert "PUT" in rows["S3"] and "LIST" in rows["S3"], "the S3 side went through the server"
    assert lines[-1].startswith("S3 / local (median): ")
