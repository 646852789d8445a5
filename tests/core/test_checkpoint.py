from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watermark_assets.core.checkpoint import Checkpoint, CheckpointPolicy, Totals
from watermark_assets.core.filepath.watermark import FileWatermark, WatermarkState
from watermark_assets.exceptions import CorruptCheckpointError, UnknownCheckpointSchemaError

from .strategies import watermarks


def load(text: str) -> Checkpoint[FileWatermark]:
    return Checkpoint.loads(text, location=LOCATION, kind=FileWatermark)


LOCATION = "s3://my-bucket/events/_watermarks/events_asia_checkpoint.json"

# The seed's "Checkpoint Format" example, verbatim.
SEED_CHECKPOINT = """{
  "schema_version": 1,
  "watermark": {
    "state": "Active",
    "value": "date=2024-01-28/1706450400-uuid.ndjson.gz"
  },
  "partition_watermarks": {
    "date=2024-01-28": "1706450400-uuid.ndjson.gz",
    "date=2024-01-29": "1706536800-uuid.ndjson.gz"
  },
  "last_update_ts": 1706450500
}"""

# The seed's per-partition example, verbatim: a fragment, not a whole checkpoint.
SEED_PER_PARTITION = """
{
  "watermark": {"state": "Active", "value": "date=2024-01-28/hour=14/file500.ndjson.gz"},
  "partition_watermarks": {
    "date=2024-01-28/hour=13": "file950.ndjson.gz",
    "date=2024-01-28/hour=14": "file500.ndjson.gz"
  }
}
"""


def test_the_seed_checkpoint_loads() -> None:
    checkpoint = load(SEED_CHECKPOINT)
    assert checkpoint == Checkpoint(
        FileWatermark(
            WatermarkState.ACTIVE,
            "date=2024-01-28/1706450400-uuid.ndjson.gz",
            {
                "date=2024-01-28": "1706450400-uuid.ndjson.gz",
                "date=2024-01-29": "1706536800-uuid.ndjson.gz",
            },
        ),
        last_update_ts=1706450500,
        delta_version=None,
    )


def test_the_seed_checkpoint_is_written_back_byte_for_byte() -> None:
    assert load(SEED_CHECKPOINT).dumps() == SEED_CHECKPOINT


def test_the_delta_version_is_written_last() -> None:
    checkpoint = load(SEED_CHECKPOINT)
    text = Checkpoint(checkpoint.watermark, 1706450500, delta_version=3).dumps()
    assert list(json.loads(text)) == [
        "schema_version",
        "watermark",
        "partition_watermarks",
        "last_update_ts",
        "delta_version",
    ]
    assert text.endswith('  "last_update_ts": 1706450500,\n  "delta_version": 3\n}')
    assert load(text).delta_version == 3


def test_the_seed_per_partition_fragment_is_not_a_whole_checkpoint() -> None:
    with pytest.raises(CorruptCheckpointError, match="schema_version"):
        load(SEED_PER_PARTITION)
    document = {"schema_version": 1, **json.loads(SEED_PER_PARTITION), "last_update_ts": 0}
    loaded = load(json.dumps(document))
    assert loaded.watermark.partition_watermarks["date=2024-01-28/hour=13"] == "file950.ndjson.gz"


def test_an_initial_watermark_round_trips() -> None:
    checkpoint = Checkpoint(FileWatermark.initial(), 1706450500)
    assert json.loads(checkpoint.dumps())["watermark"] == {"state": "Initial", "value": None}
    assert load(checkpoint.dumps()) == checkpoint


def _seed_with(**changes: object) -> str:
    document = json.loads(SEED_CHECKPOINT)
    for key, value in changes.items():
        if value is ...:
            del document[key]
        else:
            document[key] = value
    return json.dumps(document)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param('{"schema_version": 1, "watermark": ', "not JSON", id="a truncated file"),
        pytest.param("", "not JSON", id="an empty file"),
        pytest.param("[1]", "not a JSON object", id="a JSON array"),
        pytest.param(_seed_with(schema_version=...), "schema_version", id="no schema_version"),
        pytest.param(_seed_with(watermark=...), "'watermark'", id="no watermark"),
        pytest.param(
            _seed_with(partition_watermarks=...),
            "'partition_watermarks'",
            id="no partition_watermarks",
        ),
        pytest.param(_seed_with(last_update_ts=...), "'last_update_ts'", id="no last_update_ts"),
        pytest.param(
            _seed_with(last_update_ts="1706450500"),
            "Unix seconds",
            id="a last_update_ts that is a string",
        ),
        pytest.param(
            _seed_with(last_update_ts=True), "Unix seconds", id="a last_update_ts that is a boolean"
        ),
        pytest.param(_seed_with(delta_version=-1), "table version", id="a negative delta_version"),
        pytest.param(
            _seed_with(watermark={"state": "Busy", "value": "d/f"}), "Busy", id="an unknown state"
        ),
        pytest.param(
            _seed_with(watermark={"value": "d/f"}), "state", id="a watermark without state"
        ),
        pytest.param(
            _seed_with(watermark={"state": "Active", "value": 3}),
            "string path",
            id="a value that is not a string",
        ),
        pytest.param(
            _seed_with(watermark={"state": "Active", "value": None}),
            "needs a value",
            id="an Active watermark without a value",
        ),
        pytest.param(_seed_with(watermark="d/f"), "expected an object", id="a watermark string"),
        pytest.param(
            _seed_with(partition_watermarks=["d"]),
            "expected an object",
            id="partition watermarks that are a list",
        ),
        pytest.param(
            _seed_with(partition_watermarks={"d": 1}),
            "string pair",
            id="a partition watermark that is a number",
        ),
    ],
)
def test_a_corrupt_checkpoint_is_refused_not_reset(text: str, reason: str) -> None:
    with pytest.raises(CorruptCheckpointError, match=reason) as caught:
        load(text)
    assert caught.value.location == LOCATION
    assert "It was not reset" in str(caught.value)


@pytest.mark.parametrize(
    "version",
    [
        pytest.param(2, id="a newer schema"),
        pytest.param(0, id="an older schema"),
        pytest.param("1", id="a schema version that is a string"),
        pytest.param(True, id="a schema version that is a boolean"),
    ],
)
def test_an_unknown_schema_version_is_refused(version: object) -> None:
    with pytest.raises(UnknownCheckpointSchemaError) as caught:
        load(_seed_with(schema_version=version))
    assert (caught.value.location, caught.value.schema_version) == (LOCATION, version)


def test_unknown_extra_keys_are_ignored() -> None:
    loaded = load(_seed_with(written_by="a newer version"))
    assert loaded == load(SEED_CHECKPOINT)


@given(
    watermarks(),
    st.integers(min_value=0, max_value=2**40),
    st.one_of(st.none(), st.integers(min_value=0, max_value=2**31)),
)
def test_checkpoints_round_trip(
    watermark: FileWatermark, last_update_ts: int, delta_version: int | None
) -> None:
    checkpoint = Checkpoint(watermark, last_update_ts, delta_version)
    assert load(checkpoint.dumps()) == checkpoint


# The seed's checkpoint settings: interval_files: 100, interval_secs: 60.
@pytest.mark.parametrize(
    ("files_since_write", "last_update_ts", "now_ts", "due"),
    [
        pytest.param(0, None, 1706450500, True, id="a checkpoint never written is due"),
        pytest.param(99, 1706450500, 1706450559, False, id="99 files after 59 seconds: not yet"),
        pytest.param(100, 1706450500, 1706450501, True, id="after every 100 files processed"),
        pytest.param(1, 1706450500, 1706450560, True, id="or after 60 seconds elapsed"),
    ],
)
def test_checkpoint_policy(
    files_since_write: int, last_update_ts: int | None, now_ts: int, due: bool
) -> None:
    policy = CheckpointPolicy(interval_files=100, interval_secs=60)
    assert policy == CheckpointPolicy()
    assert policy.is_due(files_since_write, last_update_ts, now_ts) is due


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param({"interval_files": 0}, id="zero files"),
        pytest.param({"interval_secs": -5}, id="negative seconds"),
    ],
)
def test_checkpoint_policy_refuses_non_positive_intervals(settings: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="positive integer"):
        CheckpointPolicy(**settings)


def test_rows_per_dagster_partition_round_trip_after_the_delta_version() -> None:
    watermark = FileWatermark.initial().advance(["date=2024-01-28/1706450400-a.ndjson.gz"])
    checkpoint = Checkpoint(
        watermark, 1706450500, 3, {"2024-01-28": 498, "2024-01-27": 2}, {"date=2024-01-28": 1}
    )
    document = json.loads(checkpoint.dumps())
    assert list(document)[-3:] == ["delta_version", "partition_rows", "partition_files"]
    assert document["partition_rows"] == {"2024-01-27": 2, "2024-01-28": 498}
    assert load(checkpoint.dumps()) == checkpoint


@pytest.mark.parametrize(
    "rows",
    [{"2024-01-28": -1}, {"2024-01-28": "many"}, ["2024-01-28"]],
    ids=["a negative count", "a count that is text", "a list instead of a mapping"],
)
def test_bad_partition_rows_are_corrupt(rows: object) -> None:
    text = json.dumps(
        {
            "schema_version": 1,
            "watermark": {"state": "Initial", "value": None},
            "partition_watermarks": {},
            "last_update_ts": 0,
            "partition_rows": rows,
        }
    )
    with pytest.raises(CorruptCheckpointError, match="partition_rows"):
        load(text)


def test_a_checkpoint_holds_any_kind_of_watermark_and_refuses_another_kind() -> None:
    from watermark_assets.core.column import ColumnWatermark

    column = ColumnWatermark.of({"id": 3})
    text = Checkpoint(column, 1706450500, delta_version=2).dumps()

    assert json.loads(text)["kind"] == "column"
    assert "partition_watermarks" not in json.loads(text)
    loaded = Checkpoint.loads(text, location=LOCATION, kind=ColumnWatermark)
    assert (loaded.watermark, loaded.delta_version) == (column, 2)
    with pytest.raises(
        CorruptCheckpointError, match="holds a 'column' watermark, not a 'file_path'"
    ):
        load(text)
    seed = load(SEED_CHECKPOINT)
    with pytest.raises(
        CorruptCheckpointError, match="holds a 'file_path' watermark, not a 'column'"
    ):
        Checkpoint.loads(seed.dumps(), location=LOCATION, kind=ColumnWatermark)


def test_the_totals_txn_sum_prefixes_signatures_and_own_files_round_trip_after_the_maps() -> None:
    watermark = FileWatermark.initial().advance(["date=2024-01-28/1706450400-a.ndjson.gz"])
    checkpoint = Checkpoint(
        watermark,
        1706450500,
        7,
        {"2024-01-28": 3},
        {"date=2024-01-28": 1},
        {"2024-01-28": "date=2024-01-28"},
        Totals(files=51, rows=153, partitions=25),
        txn_sum=52,
        file_signatures={"date=2024-01-28/1706450400-a.ndjson.gz": "12:1706450401.5"},
        own_files=frozenset({"date=2024-01-28/part-1.parquet", "date=2024-01-27/part-0.parquet"}),
    )
    document = json.loads(checkpoint.dumps())
    assert list(document)[-8:] == [
        "delta_version",
        "partition_rows",
        "partition_prefixes",
        "partition_files",
        "totals",
        "txn_sum",
        "file_signatures",
        "own_files",
    ]
    assert document["totals"] == {"files": 51, "rows": 153, "partitions": 25}
    assert document["own_files"] == [
        "date=2024-01-27/part-0.parquet",
        "date=2024-01-28/part-1.parquet",
    ]
    assert load(checkpoint.dumps()) == checkpoint


def test_a_checkpoint_written_before_the_totals_counts_them_from_its_maps() -> None:
    checkpoint = load(
        json.dumps(
            {
                "schema_version": 1,
                "watermark": {"state": "Active", "value": "date=2024-01-28/1-a.ndjson.gz"},
                "partition_watermarks": {"date=2024-01-28": "1-a.ndjson.gz"},
                "last_update_ts": 0,
                "partition_rows": {"2024-01-27": 4, "2024-01-28": 6},
                "partition_files": {"date=2024-01-28": 2},
            }
        )
    )
    assert (checkpoint.totals, checkpoint.txn_sum) == (None, None)
    assert checkpoint.legacy_totals() == Totals(files=2, rows=10, partitions=2)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        pytest.param("totals", {"files": 1, "rows": -1, "partitions": 1}, id="a negative total"),
        pytest.param("totals", {"files": 1, "rows": 2}, id="totals without partitions"),
        pytest.param("txn_sum", "12", id="a txn sum that is text"),
        pytest.param("partition_prefixes", {"2024-01-28": 3}, id="a prefix that is a number"),
        pytest.param("own_files", {"date=2024-01-28/part-1.parquet": 1}, id="own files: a map"),
        pytest.param("own_files", [3], id="an own file that is a number"),
    ],
)
def test_bad_totals_txn_sum_or_prefixes_are_corrupt(key: str, value: object) -> None:
    text = json.dumps(
        {
            "schema_version": 1,
            "watermark": {"state": "Initial", "value": None},
            "partition_watermarks": {},
            "last_update_ts": 0,
            key: value,
        }
    )
    with pytest.raises(CorruptCheckpointError, match=key):
        load(text)
