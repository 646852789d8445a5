from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watermark_assets.core.filepath.watermark import (
    FileWatermark,
    PartitionWatermarks,
    WatermarkState,
)
from watermark_assets.exceptions import WatermarkRegressionError

from .strategies import paths, watermarks

ACTIVE, IDLE, INITIAL = WatermarkState.ACTIVE, WatermarkState.IDLE, WatermarkState.INITIAL

# The seed's "What Is a Watermark?" example, verbatim.
SEED_WATERMARK = "date=2024-01-28/1706450400-01926abc.parquet"
SEED_FILES = [
    ("date=2024-01-28/1706450100-01926ab0.parquet", False),  # Below watermark (already processed)
    ("date=2024-01-28/1706450200-01926ab5.parquet", False),  # Below watermark (already processed)
    ("date=2024-01-28/1706450400-01926abc.parquet", False),  # Watermark (already processed)
    ("date=2024-01-28/1706450500-01926abd.parquet", True),  # Above watermark (new file!)
    ("date=2024-01-29/1706536800-01926b00.parquet", True),  # Above watermark (new file!)
]

# The seed's per-partition checkpoint, verbatim.
SEED_PER_PARTITION = """
{
  "watermark": {"state": "Active", "value": "date=2024-01-28/hour=14/file500.ndjson.gz"},
  "partition_watermarks": {
    "date=2024-01-28/hour=13": "file950.ndjson.gz",
    "date=2024-01-28/hour=14": "file500.ndjson.gz"
  }
}
"""


def seed_watermark() -> FileWatermark:
    """The seed's watermark, reached by processing the first three of its files."""
    return FileWatermark.initial().advance(path for path, _ in SEED_FILES[:3])


@pytest.mark.parametrize(
    ("path", "above"),
    [
        pytest.param(path, above, id=f"{path} is {'above' if above else 'at or below'}")
        for path, above in SEED_FILES
    ],
)
def test_seed_files_above_the_watermark(path: str, above: bool) -> None:
    watermark = seed_watermark()
    assert watermark.value == SEED_WATERMARK
    assert watermark.is_above(path) is above


def test_seed_per_partition_example_finds_late_files_in_the_older_hour() -> None:
    document = json.loads(SEED_PER_PARTITION)
    watermark = FileWatermark.from_dict(**document)
    hour13 = [f"date=2024-01-28/hour=13/file{n:03d}.ndjson.gz" for n in range(1000)]
    hour14 = [f"date=2024-01-28/hour=14/file{n:03d}.ndjson.gz" for n in range(1, 501)]
    # The seed counts 50 unprocessed files after "file #950" of 1000; with its three-digit names
    # file000..file999 those are file951..file999. The point: hour=13 is not ignored although
    # the global watermark is in hour=14.
    assert [p for p in hour13 if watermark.is_above(p)] == hour13[951:]
    assert [p for p in hour14 if watermark.is_above(p)] == []
    assert watermark.is_above("date=2024-01-28/hour=14/file501.ndjson.gz")


def test_a_new_partition_without_an_entry_includes_all_files() -> None:
    watermark = FileWatermark.from_dict(**json.loads(SEED_PER_PARTITION))
    # These partitions sort below the global watermark (hour=14/file500), yet all their files
    # are included: the global watermark is not a fallback.
    for path in [
        "date=2024-01-28/hour=12/file001.ndjson.gz",
        "date=2024-01-27/hour=23/file999.ndjson.gz",
    ]:
        assert watermark.value is not None and path < watermark.value
        assert watermark.is_above(path)
    assert watermark.is_above("date=2024-01-28/hour=15/file001.ndjson.gz")


# The seed's state machine diagram, every arrow (plus the self-loops the diagram implies).
def _advance(watermark: FileWatermark) -> FileWatermark:
    return watermark.advance(["date=2024-01-30/1706623200-new.parquet"])


def _mark_idle(watermark: FileWatermark) -> FileWatermark:
    return watermark.mark_idle()


INITIAL_WM = FileWatermark.initial()
ACTIVE_WM = seed_watermark()
IDLE_WM = ACTIVE_WM.mark_idle()


@pytest.mark.parametrize(
    ("start", "operation", "expected"),
    [
        pytest.param(INITIAL_WM, _advance, ACTIVE, id="Initial -> Active on update_watermark()"),
        pytest.param(ACTIVE_WM, _advance, ACTIVE, id="Active -> Active on update_watermark()"),
        pytest.param(
            ACTIVE_WM, _mark_idle, IDLE, id="Active -> Idle on mark_idle() (no new files)"
        ),
        pytest.param(IDLE_WM, _advance, ACTIVE, id="Idle -> Active when new files appear"),
        pytest.param(IDLE_WM, _mark_idle, IDLE, id="Idle stays Idle on another empty poll"),
        pytest.param(
            INITIAL_WM,
            _mark_idle,
            INITIAL,
            id="Initial stays Initial on mark_idle(): no files at all is not idle",
        ),
    ],
)
def test_seed_state_machine(
    start: FileWatermark,
    operation: Callable[[FileWatermark], FileWatermark],
    expected: WatermarkState,
) -> None:
    assert operation(start).state is expected


def test_mark_idle_keeps_the_position() -> None:
    idle = ACTIVE_WM.mark_idle()
    assert idle.value == ACTIVE_WM.value
    assert idle.partition_watermarks == ACTIVE_WM.partition_watermarks


def test_advance_takes_the_greatest_name_per_partition_and_the_greatest_path() -> None:
    watermark = FileWatermark.initial().advance(
        [
            "date=2024-01-28/hour=14/1706450400-b.gz",
            "date=2024-01-28/hour=13/1706446800-a.gz",
            "date=2024-01-28/hour=14/1706450401-a.gz",
            "date=2024-01-28/hour=13/1706446700-z.gz",
        ]
    )
    assert watermark == FileWatermark(
        ACTIVE,
        "date=2024-01-28/hour=14/1706450401-a.gz",
        {
            "date=2024-01-28/hour=13": "1706446800-a.gz",
            "date=2024-01-28/hour=14": "1706450401-a.gz",
        },
    )


def test_a_late_file_in_an_older_partition_keeps_the_global_value() -> None:
    watermark = FileWatermark.from_dict(**json.loads(SEED_PER_PARTITION))
    advanced = watermark.advance(["date=2024-01-28/hour=13/file951.ndjson.gz"])
    assert advanced.value == "date=2024-01-28/hour=14/file500.ndjson.gz"
    assert advanced.partition_watermarks["date=2024-01-28/hour=13"] == "file951.ndjson.gz"


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("date=2024-01-28/1706450400-01926abc.parquet", id="the watermark itself"),
        pytest.param("date=2024-01-28/1706450100-01926ab0.parquet", id="a file below it"),
    ],
)
def test_advance_refuses_to_move_backwards(path: str) -> None:
    with pytest.raises(WatermarkRegressionError) as caught:
        ACTIVE_WM.advance(["date=2024-01-29/1706536800-01926b00.parquet", path])
    error = caught.value
    assert (error.partition, error.current, error.proposed) == (
        "date=2024-01-28",
        "1706450400-01926abc.parquet",
        path.split("/")[-1],
    )


def test_advancing_with_no_files_changes_nothing() -> None:
    assert IDLE_WM.advance([]) is IDLE_WM
    assert INITIAL_WM.advance(iter(())) is INITIAL_WM


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        pytest.param(INITIAL_WM, INITIAL_WM, INITIAL, id="Initial with Initial is Initial"),
        pytest.param(INITIAL_WM, IDLE_WM, IDLE, id="Initial with Idle is Idle"),
        pytest.param(IDLE_WM, ACTIVE_WM, ACTIVE, id="Idle with Active is Active"),
        pytest.param(INITIAL_WM, ACTIVE_WM, ACTIVE, id="Initial with Active is Active"),
    ],
)
def test_merge_states(left: FileWatermark, right: FileWatermark, expected: WatermarkState) -> None:
    assert left.merge(right).state is expected


def test_merge_of_concurrent_partition_runs_keeps_both() -> None:
    base = FileWatermark.from_dict(**json.loads(SEED_PER_PARTITION))
    run13 = base.advance(["date=2024-01-28/hour=13/file999.ndjson.gz"])
    run14 = base.advance(["date=2024-01-28/hour=14/file600.ndjson.gz"])
    merged = run13.merge(run14)
    assert dict(merged.partition_watermarks) == {
        "date=2024-01-28/hour=13": "file999.ndjson.gz",
        "date=2024-01-28/hour=14": "file600.ndjson.gz",
    }
    assert merged.value == "date=2024-01-28/hour=14/file600.ndjson.gz"


def test_pruning_keeps_state_bounded() -> None:
    """A month of hourly partitions, pruned daily to a 2-day horizon, keeps at most 3 days."""
    watermark = FileWatermark.initial()
    for day in range(1, 31):
        for hour in range(24):
            prefix = f"date=2024-01-{day:02d}/hour={hour:02d}"
            unix = 1704067200 + (day - 1) * 86400 + hour * 3600  # 2024-01-01T00:00Z + ...
            watermark = watermark.advance([f"{prefix}/{unix}-a.gz"])
        watermark = watermark.prune(f"date=2024-01-{day - 2:02d}")
        assert len(watermark.partition_watermarks) <= 3 * 24
    assert min(watermark.partition_watermarks) == "date=2024-01-28/hour=00"
    assert watermark.value == "date=2024-01-30/hour=23/1706655600-a.gz"


@pytest.mark.parametrize(
    ("horizon", "kept"),
    [
        pytest.param(
            "date=2024-01-28",
            {"date=2024-01-28", "date=2024-01-29"},
            id="entries below the horizon are dropped",
        ),
        pytest.param(
            "date=2024-01-31",
            {"date=2024-01-28", "date=2024-01-29"},
            id="the global watermark's partition and above are never dropped",
        ),
        pytest.param(
            "date=2024-01-28/hour=05",
            {"date=2024-01-28", "date=2024-01-29"},
            id="a deeper horizon compares on the common depth",
        ),
        pytest.param(
            "",
            {"date=2024-01-26", "date=2024-01-28", "date=2024-01-29"},
            id="the root horizon drops nothing",
        ),
    ],
)
def test_prune(horizon: str, kept: set[str]) -> None:
    watermark = FileWatermark.from_dict(
        {"state": "Active", "value": "date=2024-01-28/1706450400-uuid.ndjson.gz"},
        {
            "date=2024-01-26": "1706277600-uuid.ndjson.gz",
            "date=2024-01-28": "1706450400-uuid.ndjson.gz",
            "date=2024-01-29": "1706536800-uuid.ndjson.gz",
        },
    )
    pruned = watermark.prune(horizon)
    assert set(pruned.partition_watermarks) == kept
    assert (pruned.state, pruned.value) == (watermark.state, watermark.value)


@pytest.mark.parametrize(
    ("state", "value", "entries", "error"),
    [
        pytest.param(INITIAL, "d/f", {}, ValueError, id="Initial with a value is refused"),
        pytest.param(INITIAL, None, {"d": "f"}, ValueError, id="Initial with entries is refused"),
        pytest.param(ACTIVE, None, {}, ValueError, id="Active without a value is refused"),
        pytest.param(IDLE, "/d/f", {}, ValueError, id="an absolute value is refused"),
        pytest.param(ACTIVE, "d/f", {"d": "a/b"}, ValueError, id="an entry that is a path"),
        pytest.param(ACTIVE, "d/f", {"d/": "f"}, ValueError, id="a prefix with a trailing slash"),
        pytest.param(ACTIVE, "d/f", {"d": 3}, TypeError, id="an entry that is not a string"),
    ],
)
def test_invalid_watermarks_are_refused(
    state: WatermarkState, value: str | None, entries: dict[str, object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        FileWatermark(state, value, entries)  # type: ignore[arg-type]


def test_seed_per_partition_json_round_trips() -> None:
    document = json.loads(SEED_PER_PARTITION)
    watermark = FileWatermark.from_dict(**document)
    assert watermark.state is ACTIVE
    assert watermark.to_dict() == document


def test_watermarks_are_immutable_hashable_and_picklable() -> None:
    watermark = FileWatermark.from_dict(**json.loads(SEED_PER_PARTITION))
    assert isinstance(watermark.partition_watermarks, PartitionWatermarks)
    with pytest.raises(TypeError):
        watermark.partition_watermarks["x"] = "y"  # type: ignore[index]
    assert pickle.loads(pickle.dumps(watermark)) == watermark
    assert copy.deepcopy(watermark) == watermark
    assert {watermark, FileWatermark.from_dict(**json.loads(SEED_PER_PARTITION))} == {watermark}
    assert watermark.partition_watermarks == dict(watermark.partition_watermarks)


# Properties.


@given(watermarks(), watermarks())
def test_merge_is_commutative(a: FileWatermark, b: FileWatermark) -> None:
    assert a.merge(b) == b.merge(a)


@given(watermarks(), watermarks(), watermarks())
def test_merge_is_associative(a: FileWatermark, b: FileWatermark, c: FileWatermark) -> None:
    assert a.merge(b).merge(c) == a.merge(b.merge(c))


@given(watermarks())
def test_merge_is_idempotent(a: FileWatermark) -> None:
    assert a.merge(a) == a
    assert a.merge(FileWatermark.initial()) == a


@given(watermarks(), st.lists(paths(), max_size=6))
def test_advance_only_moves_forward(watermark: FileWatermark, batch: list[str]) -> None:
    new = [p for p in batch if watermark.is_above(p)]
    advanced = watermark.advance(new)
    if new:
        assert watermark.merge(advanced) == advanced  # at or above the old one everywhere
        assert not any(advanced.is_above(p) for p in batch)
        with pytest.raises(WatermarkRegressionError):
            advanced.advance(new)
    else:
        assert advanced is watermark


@given(watermarks(), paths())
def test_a_file_above_stays_above_until_processed(watermark: FileWatermark, path: str) -> None:
    if not watermark.is_above(path):
        assert not watermark.mark_idle().is_above(path)


@given(watermarks())
def test_dict_round_trip(watermark: FileWatermark) -> None:
    assert FileWatermark.from_dict(**watermark.to_dict()) == watermark


@given(watermarks(), st.sampled_from(["", "date=2024-01-28", "date=2024-01-28/hour=14", "z"]))
def test_prune_is_idempotent_and_keeps_the_global_partition(
    watermark: FileWatermark, horizon: str
) -> None:
    pruned = watermark.prune(horizon)
    assert pruned.prune(horizon) == pruned
    assert set(pruned.partition_watermarks) <= set(watermark.partition_watermarks)
    if watermark.value is not None:
        prefix = watermark.value.rpartition("/")[0]
        assert pruned.partition_watermarks.get(prefix) == watermark.partition_watermarks.get(prefix)


# --- the watermark contract (core/watermark.py) -----------------------------------------------


def test_a_file_watermark_implements_the_contract_under_its_kind_name() -> None:
    from typing import Any

    from watermark_assets.core.watermark import Watermark, watermark_kind

    watermark: Watermark[Any] = FileWatermark.initial().advance(["date=2024-01-28/1706450400-a.gz"])
    assert isinstance(watermark, Watermark)
    assert watermark_kind("file_path") is FileWatermark
    assert FileWatermark.initial().is_empty
    assert not watermark.is_empty


@given(watermarks())
def test_json_round_trips(watermark: FileWatermark) -> None:
    assert FileWatermark.from_json(watermark.to_json()) == watermark


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("[]", id="not an object"),
        pytest.param('{"watermark": {"state": "Sleepy"}}', id="an unknown state"),
        pytest.param(
            '{"watermark": {"state": "Active", "value": 3}}', id="a value that is no path"
        ),
    ],
)
def test_malformed_json_is_refused_and_named(text: str) -> None:
    with pytest.raises((TypeError, ValueError)):
        FileWatermark.from_json(text)
