"""Smoke test of benchmarks/bench_event_time.py: a tiny run prints its table and exits 0.

Timings are never asserted (benchmarks/README.md); the script itself exits 1 when the two
engines' output tables differ or their late counts disagree.
"""

from __future__ import annotations

import pytest
from conftest import run_benchmark


@pytest.mark.slow
def test_bench_event_time_quick_prints_both_engines_and_identical_outputs() -> None:
    lines = run_benchmark("bench_event_time.py", "--quick", timeout=600)
    rows = [line.split() for line in lines if line.startswith("run ") and "(" in line]
    assert [row[-3] for row in rows] == ["batch", "streaming", "batch", "streaming"], lines
    assert any("identical in both engines" in line for line in lines), lines
    assert lines[-1].startswith("total wall time") and lines[-1].endswith("exit 0")
