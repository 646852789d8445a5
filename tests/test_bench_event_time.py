"""Smoke test of benchmarks/bench_event_time.py: a tiny run prints its table and exits 0.

Timings are never asserted (benchmarks/README.md); the script itself exits 1 when the two
engines' output tables differ or their late counts disagree. Without ``--cold`` the script runs
in one process with one Spark session: here it runs in the test's, on the shared session.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import run_benchmark_here


@pytest.mark.slow
def test_bench_event_time_quick_prints_both_engines_and_identical_outputs(
    spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = run_benchmark_here(spark, capsys, "bench_event_time.py", "--quick")
    rows = [line.split() for line in lines if line.startswith("run ") and "(" in line]
    assert [row[-3] for row in rows] == ["batch", "streaming", "batch", "streaming"], lines
    assert any("identical in both engines" in line for line in lines), lines
    assert lines[-1].startswith("total wall time") and lines[-1].endswith("exit 0")
