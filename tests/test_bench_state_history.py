"""Smoke test of benchmarks/bench_state_history.py: a tiny run prints its table and exits 0.

Timings are never asserted (benchmarks/README.md); this only proves that the script runs end to
end: N commits made by the project's commit path, the state read, the sensor's tick in process
and a whole ``run-sensors`` process, each checked (the totals, no run requested).
"""

from __future__ import annotations

import pytest
from conftest import run_benchmark


@pytest.mark.slow
def test_bench_state_history_quick_prints_its_table() -> None:
    lines = run_benchmark("bench_state_history.py", "--quick", timeout=600)
    headers = [i for i, line in enumerate(lines) if line.split()[:2] == ["N", "commits"]]
    assert len(headers) == 2, lines  # the file-path table and the time-watermark table
    for header in headers:
        assert lines[header + 1].split()[0] == "8", lines
    assert lines[-1].startswith("total wall time") and lines[-1].endswith("exit 0")
