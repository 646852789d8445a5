"""Smoke test of benchmarks/bench_column.py: a tiny run prints the table with its ratios.

Timings are never asserted (benchmarks/README.md); this only proves that the script runs end to
end (setup, reads through the sources, the checks of rows and watermarks, the table).
"""

from __future__ import annotations

import re

import pytest
from conftest import run_benchmark


@pytest.mark.slow
def test_bench_column_quick_prints_the_table_with_ratios() -> None:
    lines = run_benchmark(
        "bench_column.py", "--quick", "--rows", "2000", "--no-cold", "--commits", "5", timeout=300
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
