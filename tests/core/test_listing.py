from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watermark_assets.core.filepath.listing import ListingPlan, plan_listing, select_files_above
from watermark_assets.core.filepath.watermark import FileWatermark, WatermarkState

from .strategies import PREFIXES, paths, watermarks

# The seed's "Efficient Partition Scanning" example, verbatim.
SEED_SCAN_WATERMARK = "date=2024-01-28/file2.parquet"
SEED_SCAN_FILES = [
    "date=2024-01-26/file1.parquet",
    "date=2024-01-26/file3.parquet",
    "date=2024-01-27/file1.parquet",
    "date=2024-01-27/file3.parquet",
    "date=2024-01-28/file1.parquet",
    "date=2024-01-28/file2.parquet",
    "date=2024-01-28/file3.parquet",
    "date=2024-01-29/file1.parquet",
    "date=2024-01-29/file2.parquet",
]

SEED_PER_PARTITION = """
{
  "watermark": {"state": "Active", "value": "date=2024-01-28/hour=14/file500.ndjson.gz"},
  "partition_watermarks": {
    "date=2024-01-28/hour=13": "file950.ndjson.gz",
    "date=2024-01-28/hour=14": "file500.ndjson.gz"
  }
}
"""


def seed_scan_plan() -> ListingPlan:
    watermark = FileWatermark.initial().advance(["date=2024-01-28/file2.parquet"])
    assert watermark.value == SEED_SCAN_WATERMARK
    return plan_listing(watermark, horizon=None)


@pytest.mark.parametrize(
    ("directory", "descend"),
    [
        pytest.param("date=2024-01-26", False, id="date=2024-01-26 is skipped (before watermark)"),
        pytest.param("date=2024-01-27", False, id="date=2024-01-27 is skipped (before watermark)"),
        pytest.param(
            "date=2024-01-28", True, id="date=2024-01-28 is scanned (watermark partition)"
        ),
        pytest.param("date=2024-01-29", True, id="date=2024-01-29 is scanned (after watermark)"),
    ],
)
def test_seed_partition_scanning(directory: str, descend: bool) -> None:
    assert seed_scan_plan().should_descend(directory) is descend


def test_seed_partition_scanning_files() -> None:
    assert select_files_above(seed_scan_plan(), reversed(SEED_SCAN_FILES)) == [
        "date=2024-01-28/file3.parquet",  # watermark partition, files > file2
        "date=2024-01-29/file1.parquet",  # after the watermark partition, all files
        "date=2024-01-29/file2.parquet",
    ]


def test_seed_five_file_example_through_a_listing() -> None:
    watermark = FileWatermark(
        WatermarkState.ACTIVE,
        "date=2024-01-28/1706450400-01926abc.parquet",
        {"date=2024-01-28": "1706450400-01926abc.parquet"},
    )
    files = [
        "date=2024-01-28/1706450100-01926ab0.parquet",
        "date=2024-01-28/1706450200-01926ab5.parquet",
        "date=2024-01-28/1706450400-01926abc.parquet",
        "date=2024-01-28/1706450500-01926abd.parquet",
        "date=2024-01-29/1706536800-01926b00.parquet",
    ]
    assert select_files_above(plan_listing(watermark, None), files) == files[3:]


@pytest.mark.parametrize(
    ("directory", "descend"),
    [
        pytest.param("date=2024-01-27", False, id="an older day without entries is skipped"),
        pytest.param("date=2024-01-28", True, id="the watermark's day is descended"),
        pytest.param("date=2024-01-28/hour=12", False, id="an older hour without entry is skipped"),
        pytest.param(
            "date=2024-01-28/hour=13",
            True,
            id="an older hour with an entry is descended (late files are found)",
        ),
        pytest.param("date=2024-01-28/hour=14", True, id="the watermark's hour is descended"),
        pytest.param("date=2024-01-28/hour=15", True, id="a newer hour is descended"),
        pytest.param("date=2024-01-29", True, id="a newer day is descended"),
        pytest.param("date=2024-01-29/hour=00", True, id="a newer day's first hour is descended"),
    ],
)
def test_seed_per_partition_directories(directory: str, descend: bool) -> None:
    plan = plan_listing(FileWatermark.from_dict(**json.loads(SEED_PER_PARTITION)), None)
    assert plan.floor == "date=2024-01-28/hour=14"
    assert plan.should_descend(directory) is descend


def test_seed_per_partition_listing_finds_the_older_hours_files() -> None:
    plan = plan_listing(FileWatermark.from_dict(**json.loads(SEED_PER_PARTITION)), None)
    hour13 = [f"date=2024-01-28/hour=13/file{n:03d}.ndjson.gz" for n in range(1000)]
    hour14 = [f"date=2024-01-28/hour=14/file{n:03d}.ndjson.gz" for n in range(1, 502)]
    assert select_files_above(plan, hour13 + hour14) == [*hour13[951:], hour14[-1]]


def test_seed_problem_a_global_watermark_alone_ignores_the_older_hour() -> None:
    """The seed's "The Problem": with only a global watermark in hour=14, hour=13 is ignored."""
    global_only = FileWatermark(
        WatermarkState.ACTIVE, "date=2024-01-28/hour=14/file500.ndjson.gz", {}
    )
    plan = plan_listing(global_only, None)
    assert not plan.should_descend("date=2024-01-28/hour=13")
    assert not plan.accepts("date=2024-01-28/hour=13/file951.ndjson.gz")


@pytest.mark.parametrize(
    ("watermark", "horizon", "floor"),
    [
        pytest.param(
            FileWatermark.initial(),
            None,
            None,
            id="cold start without a partition filter is a full scan",
        ),
        pytest.param(
            FileWatermark.initial(),
            "date=2024-01-21",
            "date=2024-01-21",
            id="cold start with a lookback starts at the horizon",
        ),
        pytest.param(
            FileWatermark.initial().advance(["date=2024-01-28/a"]),
            None,
            "date=2024-01-28",
            id="the floor is the global watermark's partition",
        ),
        pytest.param(
            FileWatermark.initial().advance(["date=2024-01-28/a"]),
            "date=2024-01-21",
            "date=2024-01-21",
            id="an earlier horizon lowers the floor",
        ),
        pytest.param(
            FileWatermark.initial().advance(["date=2024-01-28/a"]),
            "date=2024-01-30",
            "date=2024-01-28",
            id="a later horizon does not raise the floor",
        ),
        pytest.param(
            FileWatermark.initial().advance(["date=2024-01-28/hour=14/a"]),
            "date=2024-01-28",
            "date=2024-01-28",
            id="a day horizon below an hour partition keeps the whole day",
        ),
    ],
)
def test_plan_listing(watermark: FileWatermark, horizon: str | None, floor: str | None) -> None:
    assert plan_listing(watermark, horizon).floor == floor


def test_cold_start_full_scan_descends_everywhere_and_accepts_everything() -> None:
    plan = plan_listing(FileWatermark.initial(), None)
    assert all(plan.should_descend(d) for d in ["date=2000-01-01", "a/b/c"])
    assert select_files_above(plan, SEED_SCAN_FILES) == SEED_SCAN_FILES


def test_cold_start_filtered_scan_skips_partitions_before_the_lookback() -> None:
    plan = plan_listing(FileWatermark.initial(), "date=2024-01-27")
    assert not plan.should_descend("date=2024-01-26")
    assert plan.should_descend("date=2024-01-27")
    assert select_files_above(plan, SEED_SCAN_FILES) == SEED_SCAN_FILES[2:]


def test_a_late_new_partition_within_the_lookback_is_found() -> None:
    watermark = FileWatermark.initial().advance(["date=2024-01-28/1706450400-a.gz"])
    late = "date=2024-01-25/1706191200-late.gz"
    assert not plan_listing(watermark, None).accepts(late)
    assert plan_listing(watermark, "date=2024-01-22").accepts(late)


def test_root_level_files_are_one_partition() -> None:
    watermark = FileWatermark.initial().advance(["1706450400-a.parquet"])
    plan = plan_listing(watermark, None)
    assert select_files_above(plan, ["1706450300-a.parquet", "1706450500-a.parquet"]) == [
        "1706450500-a.parquet"
    ]


# Properties.


@given(watermarks(), st.one_of(st.none(), st.sampled_from(PREFIXES)), paths())
def test_an_accepted_file_is_in_a_descended_directory(
    watermark: FileWatermark, horizon: str | None, path: str
) -> None:
    """The storage walker must reach every accepted file: all its ancestors are descended."""
    plan = plan_listing(watermark, horizon)
    if plan.accepts(path):
        components = path.split("/")[:-1]
        for depth in range(1, len(components) + 1):
            assert plan.should_descend("/".join(components[:depth]))


@given(watermarks(), st.one_of(st.none(), st.sampled_from(PREFIXES)), paths())
def test_a_listing_may_start_each_directory_at_its_lowest_child(
    watermark: FileWatermark, horizon: str | None, path: str
) -> None:
    """Every folder a walk descends into, and every file it accepts inside a partition folder,
    is named at or above its parent's lowest child: an S3 listing may start there (StartAfter),
    whatever the number of older day folders."""
    plan = plan_listing(watermark, horizon)
    components = path.split("/")
    for depth in range(1, len(components)):
        parent, child = "/".join(components[: depth - 1]), components[depth - 1]
        lowest = plan.lowest_child(parent)
        if lowest is not None and child < lowest:
            assert not plan.should_descend("/".join(components[:depth]))
            assert not plan.accepts(path)


@pytest.mark.parametrize(
    ("horizon", "directory", "lowest"),
    [
        pytest.param("date=2024-01-28", "", "date=2024-01-28", id="the root of a day layout"),
        pytest.param(
            "date=2024-01-28/hour=13", "date=2024-01-28", "hour=13", id="the horizon's own day"
        ),
        pytest.param("date=2024-01-28/hour=13", "date=2024-01-29", None, id="a later day"),
        pytest.param("date=2024-01-28", "date=2024-01-28", None, id="below the horizon's depth"),
        pytest.param(None, "", None, id="no horizon: a full scan"),
    ],
)
def test_the_lowest_child_is_the_horizons_component_on_its_path(
    horizon: str | None, directory: str, lowest: str | None
) -> None:
    plan = plan_listing(FileWatermark.initial().advance(["date=2024-01-30/a"]), horizon)
    assert plan.lowest_child(directory) == lowest


@given(watermarks(), st.one_of(st.none(), st.sampled_from(PREFIXES)), st.lists(paths()))
def test_a_listing_returns_only_files_above_the_watermark(
    watermark: FileWatermark, horizon: str | None, batch: list[str]
) -> None:
    selected = select_files_above(plan_listing(watermark, horizon), batch)
    assert selected == sorted(selected)
    assert all(watermark.is_above(p) for p in selected)
    if watermark.state is WatermarkState.INITIAL and horizon is None:
        assert selected == sorted(batch)


@pytest.mark.parametrize(
    ("directory", "expected"),
    [
        ("date=2024-01-28", True),
        ("date=2024-01-28/hour=13", True),
        ("date=2024-01-28/hour=1", False),
        ("date=2024-01-2", False),
        ("date=2024-01-27", False),
        ("date=2024-01-28-extra", False),
    ],
    ids=[
        "a day that holds an hour with an entry",
        "the hour with the entry itself",
        "a shorter hour that is a string prefix of it",
        "a string prefix of the day that is not a directory of it",
        "a day without entries",
        "a sibling that sorts between the day and its children",
    ],
)
def test_finding_a_partition_with_an_entry_inside_a_directory(
    directory: str, expected: bool
) -> None:
    watermark = FileWatermark.initial().advance(
        ["date=2024-01-28/hour=13/file950.ndjson.gz", "date=2024-01-28-extra2/f.ndjson.gz"]
    )
    assert watermark.has_partition_in(directory) is expected
