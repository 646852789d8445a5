"""Listing above a watermark on S3: StartAfter per partition against s3fs's recursive find.

moto's S3 server runs on 127.0.0.1 (tests/s3_server.py, in this process, counting every request
it answers). 100,000 keys (``--keys``) in 5 landing partitions (``--partitions``), the last 1,000
(``--new``, spread evenly over the partitions) above each partition's watermark. Two ways to
find the new keys, each repeated (``--repeat``), the median and best reported:

- ``storage.list_files_above`` (the sensor's listing): the root, then each partition with
  ListObjectsV2 ``StartAfter=<partition>/<its last file>``;
- ``s3fs find + set``: ``fs.find(root)`` (every key, 1,000 per request) minus the set of the
  processed paths (what a watermark-less poller keeps).

Both must return exactly the new keys (exit 1 otherwise). Timings are never asserted; compare the
ratios (README's "S3 listing" section).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from s3_server import S3Server, load_keys

from watermark_assets import storage
from watermark_assets.config.storage import StorageConfig
from watermark_assets.core.filepath.listing import plan_listing
from watermark_assets.core.filepath.path import NameOrdering
from watermark_assets.core.filepath.watermark import FileWatermark

SUFFIX = ".ndjson.gz"


def layout(keys: int, partitions: int, new: int) -> tuple[dict[str, list[str]], int]:
    """Partition prefix -> its file names (sorted), and how many of each are processed."""
    per_partition = keys // partitions
    new_each = new // partitions
    names = {
        f"date=2024-01-{10 + p:02d}": [
            f"{1706400000 + n:010d}-{p:02d}{SUFFIX}" for n in range(per_partition)
        ]
        for p in range(partitions)
    }
    return names, per_partition - new_each


def timed(call: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    seconds, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = call()
        seconds.append(time.perf_counter() - started)
    return seconds, result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000, help="keys in total (100,000)")
    parser.add_argument("--new", type=int, default=1_000, help="keys above the watermark")
    parser.add_argument("--partitions", type=int, default=5, help="landing partitions")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each side")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    names, processed_each = layout(args.keys, args.partitions, args.new)
    with S3Server() as server:
        bucket = server.new_bucket("bench")
        root = f"s3://{bucket}/landing"
        storage.configure(StorageConfig.model_validate(server.storage_block()))
        load_started = time.perf_counter()
        loaded = load_keys(
            bucket, (f"landing/{prefix}/{name}" for prefix in names for name in names[prefix])
        )
        load_seconds = time.perf_counter() - load_started
        processed = [f"{p}/{n}" for p in names for n in names[p][:processed_each]]
        expected = sorted(f"{p}/{n}" for p in names for n in names[p][processed_each:])
        watermark = FileWatermark.initial().advance(
            [f"{p}/{names[p][processed_each - 1]}" for p in names]
        )
        plan = plan_listing(watermark, None)
        processed_set = set(processed)

        def ours() -> list[str]:
            result = storage.list_files_above(
                root, plan, suffixes=(SUFFIX,), ordering=NameOrdering.AUTO
            )
            return list(result.files)

        def find_and_set() -> list[str]:
            fs, base = storage.filesystem(root)
            fs.invalidate_cache()
            every = (path[len(base) + 1 :] for path in fs.find(base))
            return sorted(p for p in every if p.endswith(SUFFIX) and p not in processed_set)

        rows = []
        wrong = []
        for label, call in (
            ("list_files_above (StartAfter)", ours),
            ("s3fs find + set", find_and_set),
        ):
            server.reset()
            seconds, found = timed(call, args.repeat)
            requests = server.count("LIST", bucket) // args.repeat
            if found != expected:
                wrong.append(f"{label}: {len(found)} keys found, {len(expected)} expected")
            rows.append((label, requests, statistics.median(seconds), min(seconds), len(found)))
    print(
        f"S3 listing: {loaded:,} keys in {args.partitions} partitions (loaded in "
        f"{load_seconds:.1f}s), {len(expected):,} above the watermark; {args.repeat} repetitions"
    )
    header = ("approach", "LIST requests", "median s", "best s", "keys found")
    table = [header, *[(r[0], str(r[1]), f"{r[2]:.3f}", f"{r[3]:.3f}", f"{r[4]:,}") for r in rows]]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for number, row in enumerate(table):
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip())
        if number == 0:
            print("  ".join("-" * width for width in widths))
    ours_row, find_row = rows
    print(
        f"ratios (find / StartAfter): LIST requests {find_row[1] / max(ours_row[1], 1):.1f}x, "
        f"median time {find_row[2] / max(ours_row[2], 1e-9):.1f}x"
    )
    for problem in wrong:
        print(f"WRONG: {problem}")
    code = 1 if wrong else 0
    print(f"total wall time {time.perf_counter() - started:.0f}s, exit {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
