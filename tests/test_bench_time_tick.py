"""Smoke test of benchmarks/bench_time_tick.py: a tiny run prints its tables and exits 0.

Timings are never asserted (benchmarks/README.md); this only proves that the script runs end to
end: the entry sizes, the Delta logs with history, our tick (warm and whole process), the Dagster
baseline and the time x unit cells, each checked for the windows it must request.
"""

from __future__ import annotations

import pytest
from conftest import run_benchmark


@pytest.mark.slow
def test_bench_time_tick_quick_prints_every_table() -> None:
    # the whole-process ticks (ours and Dagster's) at 50% only: the same code at every share
    lines = run_benchmark(
        "bench_time_tick.py", "--quick", "--hours", "120", "--cold-at", "50", timeout=600
    )
    for title in ("A. commitInfo entry", "B/C. one tick over 120 hourly", "D. time x unit"):
        assert any(line.startswith(title) for line in lines), lines
    rows = [line.split() for line in lines if line.startswith(("ours,", "Dagster,"))]
    # Keys to run over 5 days of hourly windows, grace 3 days. Ours: every window at 0%; at 50%
    # too (the cut-off, 2.5 - 3 days, is put at from: the 60 done re-run with the 60 new); at
    # 100% the last 3 days (72). Dagster's listing: the partitions not materialized; then its
    # listing of the cells (5 units x 30 days).
    expected = ["120", "120", "72", "120", "60", "0", "150", "75", "0"]
    assert [row[3] for row in rows] == expected, rows
    assert lines[-1].startswith("total wall time") and lines[-1].endswith("exit 0")
