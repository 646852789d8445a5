"""Smoke test of benchmarks/bench_run_latency.py: a tiny run prints both tables and exits 0.

Timings are never asserted (benchmarks/README.md). It proves the script runs end to end: a
Spark Connect server started and stopped, a one-file run as a whole process under Spark Connect
(checked for its rows in one commit), warm runs, and the asset's run worker and the plain PySpark
process (rows checked), both of which start a local JVM. Part A's local-Spark half is the same
code with another spark section; ``--no-local`` leaves it out here (two JVM starts, about a
third of the test's time on 2 cores). ``--warm-ups 0`` leaves out the uncounted run that warms
the Connect server up: the counted run is the same code (12 s of the test's 70 s alone).
"""

from __future__ import annotations

import pytest
from conftest import run_benchmark


@pytest.mark.slow
def test_bench_run_latency_quick_prints_both_tables() -> None:
    lines = run_benchmark(
        "bench_run_latency.py",
        "--quick",
        "--rows",
        "50",
        "--no-local",
        "--warm-ups",
        "0",
        timeout=900,
    )
    assert any(line.startswith("A. One file of 50 rows") for line in lines), lines
    modes = [line.split("  ")[0] for line in lines if line.startswith(("local Spark", "Spark Co"))]
    assert modes == ["Spark Connect (server up)"], lines
    assert any("target: a one-file Spark Connect run within 2 s" in line for line in lines)
    assert any(line.startswith("B. Ingestion of 4 files (800 rows)") for line in lines), lines
    cases = [line.split("  ")[0] for line in lines if line.startswith(("asset run", "plain "))]
    assert cases == [
        "asset run worker (dagster api execute_run), 1 run",
        "plain PySpark script process",
        "plain script + the asset's Spark tuning",
    ], lines
    assert any("asset / the plain script, start-up included (median)" in line for line in lines)
    assert any("asset / the tuned plain script" in line for line in lines), lines
    assert lines[-1].startswith("total wall time") and lines[-1].endswith("exit 0")
