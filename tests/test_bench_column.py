"""Smoke test of benchmarks/bench_column.py: a tiny run prints the table with its ratios.

Timings are never asserted (benchmarks/README.md); this only proves that the script runs end to
end (setup, reads through the sources, the checks of rows and watermarks, the table). With
``--no-cold`` the script runs in one process with one Spark session: here it runs in the test's,
on the shared session.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from conftest import run_benchmark_here


@pytest.mark.slow
def test_bench_column_quick_prints_the_table_with_ratios(
    spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = run_benchmark_here(
        spark, capsys, "bench_column.py", "--quick", "--rows", "2000", "--no-cold", "--commits", "5"
    )
    header = next(line for line in lines if line.startswith("source "))
    assert "warm ratio" in header and "cold ratio" in header
    # rows full (Delta: 2000 + the 20 appended versions), rows incremental, warm full s, warm incr
    # s, warm ratio, and the cold columns skipped
    row = re.compile(r"\s20[02]0\s+20\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\dx\s+-\s+-\s+n/a\s")
    sources = [line for line in lines if line.startswith(("Delta", "PostgreSQL"))]
    assert any(line.startswith("Delta") for line in sources), lines
    assert all(row.search(line) for line in sources), sources
    assert "total wall time" in lines[-1] and lines[-1].endswith("exit 0")
