"""The storage layer, one suite run against every backend (local disk, fsspec memory://).

S3 joins this suite when s3:// locations arrive (moto's server on loopback).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from watermark_assets import storage
from watermark_assets.core.filepath.listing import plan_listing
from watermark_assets.core.filepath.path import NameOrdering
from watermark_assets.core.filepath.watermark import FileWatermark

SEED_FILES = [
    "date=2024-01-26/1706227200-aaa.ndjson.gz",
    "date=2024-01-27/1706313600-bbb.ndjson.gz",
    "date=2024-01-28/1706450100-01926ab0.ndjson.gz",
    "date=2024-01-28/1706450200-01926ab5.ndjson.gz",
    "date=2024-01-28/1706450400-01926abc.ndjson.gz",
    "date=2024-01-28/1706450500-01926abd.ndjson.gz",
    "date=2024-01-29/1706536800-01926b00.ndjson.gz",
]
SUFFIXES = (".ndjson.gz",)


@pytest.fixture(params=["local", "memory"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty landing root on each backend."""
    if request.param == "local":
        yield str(tmp_path / "landing")
    else:
        uri = f"memory://landing-{uuid.uuid4().hex}"
        yield uri
        fs, path = storage.filesystem(uri)
        if fs.exists(path):
            fs.rm(path, recursive=True)


def put(root: str, *paths: str) -> None:
    fs, base = storage.filesystem(root)
    for path in paths:
        fs.makedirs(f"{base}/{path.rsplit('/', 1)[0]}", exist_ok=True)
        fs.pipe_file(f"{base}/{path}", b"{}\n")


def list_above(
    root: str, watermark: FileWatermark | None = None, horizon: str | None = None, **options: Any
) -> storage.ListingResult:
    """list_files_above with the plan of ``watermark`` (Initial by default) and ndjson.gz files."""
    plan = plan_listing(watermark or FileWatermark.initial(), horizon)
    return storage.list_files_above(
        root, plan, suffixes=SUFFIXES, ordering=NameOrdering.AUTO, **options
    )


def test_a_cold_start_full_scan_lists_every_file(root: str) -> None:
    put(root, *SEED_FILES)
    result = list_above(root)
    assert list(result.files) == SEED_FILES
    assert result.files_seen == len(SEED_FILES)


def test_the_seed_example_lists_only_files_above_the_watermark_and_skips_old_partitions(
    root: str,
) -> None:
    put(root, *SEED_FILES)
    processed = SEED_FILES[2:5]  # up to date=2024-01-28/1706450400-01926abc
    result = list_above(root, FileWatermark.initial().advance(processed))
    assert list(result.files) == [
        "date=2024-01-28/1706450500-01926abd.ndjson.gz",
        "date=2024-01-29/1706536800-01926b00.ndjson.gz",
    ]
    # root + date=2024-01-28 + date=2024-01-29: the 26th and 27th are never listed
    assert result.directories_listed == 3
    assert result.files_seen == 5  # the files of the two scanned partitions, above or not


def test_hidden_entries_and_other_suffixes_are_never_part_of_a_source(root: str) -> None:
    put(
        root,
        "date=2024-01-28/1706450100-a.ndjson.gz",
        "date=2024-01-28/_SUCCESS.ndjson.gz",
        "date=2024-01-28/.1706450100-a.ndjson.gz.crc",
        "_delta_log/00000000000000000000.json",
        "date=2024-01-28/1706450100-a.csv",
    )
    result = list_above(root)
    assert list(result.files) == ["date=2024-01-28/1706450100-a.ndjson.gz"]


def test_a_file_name_that_does_not_sort_chronologically_is_set_apart(root: str) -> None:
    put(root, "date=2024-01-28/event-abc123.ndjson.gz", "date=2024-01-28/1706450100-a.ndjson.gz")
    result = list_above(root)
    assert result.files == ("date=2024-01-28/1706450100-a.ndjson.gz",), "never mis-ordered"
    assert result.unsortable == ("date=2024-01-28/event-abc123.ndjson.gz",)


def test_lookback_prefixes_are_listed_directly(root: str) -> None:
    put(root, *SEED_FILES)
    result = list_above(
        root,
        horizon="date=2024-01-28",
        start_prefixes=["date=2024-01-28", "date=2024-01-29", "date=2024-01-30"],
    )
    assert [p.split("/")[0] for p in result.files] == ["date=2024-01-28"] * 4 + ["date=2024-01-29"]
    assert result.directories_listed == 2  # the missing 30th costs nothing


def test_a_poll_sees_files_that_arrived_after_the_previous_poll(root: str) -> None:
    put(root, SEED_FILES[0])
    first = list_above(root)
    put(root, SEED_FILES[1])
    second = list_above(root)
    assert len(second.files) == len(first.files) + 1


def test_atomic_write_replaces_the_whole_file_and_leaves_no_temporary(root: str) -> None:
    uri = storage.join(root, "_watermarks/p_main_checkpoint.json")
    assert storage.read_text(uri) is None
    storage.write_text_atomic(uri, "first")
    storage.write_text_atomic(uri, "second")
    assert storage.read_text(uri) == "second"
    fs, base = storage.filesystem(root)
    assert [p.rsplit("/", 1)[-1] for p in fs.ls(f"{base}/_watermarks", detail=False)] == [
        "p_main_checkpoint.json"
    ]


def test_a_limit_returns_the_oldest_files_above_the_watermark_and_stops_listing(root: str) -> None:
    put(root, *SEED_FILES)
    result = list_above(root, limit=2)
    assert list(result.files) == SEED_FILES[:2]
    assert result.directories_listed == 3  # root, the 26th, the 27th: the rest is never listed


def test_files_at_or_below_a_partition_watermark_are_counted_not_returned(root: str) -> None:
    put(root, *SEED_FILES, "date=2024-01-28/1706450300-late.ndjson.gz")
    watermark = FileWatermark.initial().advance(SEED_FILES[2:5])
    result = list_above(root, watermark)
    assert "date=2024-01-28/1706450300-late.ndjson.gz" not in result.files
    # three committed files and one that landed below the watermark after it passed
    assert result.at_or_below == {"date=2024-01-28": 4}
