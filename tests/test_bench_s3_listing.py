"""Smoke test of benchmarks/bench_s3_listing.py: a tiny run prints its table and exits 0.

Timings are never asserted (benchmarks/README.md); the request counts are exact: StartAfter costs
the root plus one LIST per partition, s3fs's find one per 1,000 keys of the whole bucket.
"""

from __future__ import annotations

import pytest
from conftest import run_benchmark


@pytest.mark.slow
def test_bench_s3_listing_small_run_prints_the_table() -> None:
    lines = run_benchmark(
        "bench_s3_listing.py", "--keys", "3000", "--new", "100", "--repeat", "1", timeout=300
    )
    assert lines[0].startswith("S3 listing: 3,000 keys in 5 partitions")
    rows = {
        line.split("  ")[0]: line.split() for line in lines if line.startswith(("list_", "s3fs"))
    }
    assert rows["list_files_above (StartAfter)"][-4:-3] == ["6"], rows  # root + 5 partitions
    assert rows["s3fs find + set"][-4:-3] == ["3"], rows  # 3,000 keys, 1,000 per page
    assert all(row[-1] == "100" for row in rows.values()), rows
    assert lines[-1].startswith("total wall time") and lines[-1].endswith("exit 0")
