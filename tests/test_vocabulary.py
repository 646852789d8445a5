"""One vocabulary of metadata (``watermark_assets/vocabulary.py``): the formatters, and the one
documented table of every key (``docs/metadata.md``) kept equal to the key constants."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest
from dagster import TableMetadataValue

from watermark_assets import vocabulary as v
from watermark_assets.core.column.watermark import ColumnWatermark
from watermark_assets.core.replace_window import Interval, ReplaceWindow
from watermark_assets.core.time.tick import CutOff

UTC = timezone.utc
DOCS = Path(__file__).resolve().parents[1] / "docs" / "metadata.md"

TIMES = {
    "whole seconds": (datetime(2024, 1, 30, 18, 49, 55, tzinfo=UTC), "2024-01-30T18:49:55Z"),
    "midnight keeps its seconds": (datetime(2024, 1, 31, tzinfo=UTC), "2024-01-31T00:00:00Z"),
    "milliseconds when not zero": (
        datetime(2026, 11, 26, 12, 21, 34, 578000, tzinfo=UTC),
        "2026-11-26T12:21:34.578Z",
    ),
    "microseconds are cut, not rounded": (
        datetime(2024, 1, 30, 18, 49, 55, 999999, tzinfo=UTC),
        "2024-01-30T18:49:55.999Z",
    ),
    "less than a millisecond is no fraction": (
        datetime(2024, 1, 30, 18, 49, 55, 500, tzinfo=UTC),
        "2024-01-30T18:49:55Z",
    ),
    "another zone is turned to UTC": (
        datetime(2024, 1, 31, 2, tzinfo=timezone(timedelta(hours=2))),
        "2024-01-31T00:00:00Z",
    ),
}


@pytest.mark.parametrize(("moment", "text"), TIMES.values(), ids=TIMES.keys())
def test_a_time_has_one_text(moment: datetime, text: str) -> None:
    assert v.time_text(moment) == text


@pytest.mark.parametrize("text", sorted({text for _, text in TIMES.values()}))
def test_a_time_text_reads_back_as_its_instant(text: str) -> None:
    assert v.time_text(v.parse_time_text(text)) == text
    assert v.parse_time_text(text).tzinfo is not None


def test_epoch_milliseconds_read_as_the_same_text() -> None:
    millis = int(datetime(2024, 1, 30, 13, 5, tzinfo=UTC).timestamp() * 1000)
    assert v.millis_text(millis) == "2024-01-30T13:05:00Z"
    assert v.millis_text(millis + 7) == "2024-01-30T13:05:00.007Z"


@pytest.mark.parametrize(
    "call",
    [v.time_text, v.timestamp, lambda moment: v.time_entries("watermark/after", moment)],
    ids=["time_text", "timestamp", "time_entries"],
)
def test_a_naive_time_is_refused_with_the_fix_everywhere(call: object) -> None:
    with pytest.raises(ValueError, match="pass an aware one"):
        call(datetime(2024, 1, 31))  # type: ignore[operator]


def test_a_time_entry_is_the_text_and_a_dagster_timestamp() -> None:
    moment = datetime(2024, 1, 30, 18, 49, 55, tzinfo=UTC)
    entries = v.time_entries(v.WATERMARK_AFTER, moment)
    assert entries[v.WATERMARK_AFTER].value == "2024-01-30T18:49:55Z"
    assert entries[v.WATERMARK_AFTER_TIME].value == moment.timestamp()
    assert {k: e.value for k, e in v.time_entries(v.WATERMARK_AFTER, None).items()} == {
        v.WATERMARK_AFTER: "(none)"
    }


DURATIONS = {
    "0 s": (0, "0 s"),
    "under a second is 0 s": (0.4, "0 s"),
    "59 s": (59, "59 s"),
    "a minute": (60, "1 min"),
    "minutes and seconds": (125, "2 min 5 s"),
    "1 h": (3600, "1 h"),
    "3 h 5 min (seconds left out)": (3 * 3600 + 5 * 60 + 9, "3 h 5 min"),
    "1 day": (86400, "1 day"),
    "days and hours": (2 * 86400 + 3 * 3600, "2 days 3 h"),
    "from 10 days on, days only": (10 * 86400 + 5 * 3600, "10 days"),
    "1,030 days": (1030 * 86400 + 17, "1,030 days"),
    "a raw lag in seconds": (89035305.847, "1,030 days"),
    "negative (a clock ahead)": (-45, "-45 s"),
}


@pytest.mark.parametrize(("seconds", "text"), DURATIONS.values(), ids=DURATIONS.keys())
def test_a_duration_is_said_in_words(seconds: float, text: str) -> None:
    assert v.duration_text(seconds) == text
    assert v.duration_text(timedelta(seconds=seconds)) == text


EXACT_DURATIONS = {
    "minutes": (600_000, "10 min"),
    "an hour": (3_600_000, "1 h"),
    "days": (2 * 86_400_000, "2 days"),
    "a minute and a half": (90_000, "1 min 30 s"),
    "seconds the words would cut": (3_605_000, "3,605 s"),
    "eleven days and an hour": ((11 * 24 + 1) * 3_600_000, "954,000 s"),
    "under a second": (500, "500 ms"),
    "0": (0, "0 s"),
}


@pytest.mark.parametrize(("millis", "text"), EXACT_DURATIONS.values(), ids=EXACT_DURATIONS.keys())
def test_a_configured_duration_is_said_exactly(millis: int, text: str) -> None:
    assert v.exact_duration_text(millis) == text


def test_a_duration_entry_is_words_and_seconds() -> None:
    entries = v.duration_entries(v.LAG, 89035305.8474)
    assert {k: e.value for k, e in entries.items()} == {
        v.LAG: "1,030 days",
        v.LAG_SECONDS: 89035305.847,
    }


def test_an_infinite_duration_is_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        v.duration_text(float("inf"))


TABLES = {
    "a plain table": (
        ["unit", "rows"],
        [["a", 3], ["b", 12000]],
        "| unit | rows |\n| --- | --- |\n| a | 3 |\n| b | 12,000 |",
    ),
    "a | in a cell is escaped": (
        ["cell", "done"],
        [["2024-01-02|a", True]],
        "| cell | done |\n| --- | --- |\n| 2024-01-02\\|a | yes |",
    ),
    "a line break in a cell stays in the row": (
        ["reason"],
        [["one\ntwo"]],
        "| reason |\n| --- |\n| one two |",
    ),
    "times in the one format": (
        ["at"],
        [[datetime(2024, 1, 30, tzinfo=UTC)]],
        "| at |\n| --- |\n| 2024-01-30T00:00:00Z |",
    ),
    "no rows": (["a"], [], "(none)"),
}


@pytest.mark.parametrize(("header", "rows", "text"), TABLES.values(), ids=TABLES.keys())
def test_several_values_are_a_markdown_table(
    header: list[str], rows: list[list[object]], text: str
) -> None:
    assert v.markdown_table(header, rows) == text


RECORDS = {
    "numbers stay numbers, times in the one format, lists joined": (
        {"start": "string", "rows": "int", "done": "bool", "missing": "string"},
        [
            {
                "start": datetime(2024, 1, 30, 18, 49, 55, tzinfo=UTC),
                "rows": 12000,
                "done": True,
                "missing": ["a.csv", "b.csv"],
            }
        ],
        [{"start": "2024-01-30T18:49:55Z", "rows": 12000, "done": True, "missing": "a.csv, b.csv"}],
    ),
    "a value left out is empty, never a repr": (
        {"unit": "string", "high_watermark": "string", "at": "string"},
        [{"unit": "a", "high_watermark": None, "at": date(2024, 1, 2)}, {"unit": "b"}],
        [
            {"unit": "a", "high_watermark": None, "at": "2024-01-02"},
            {"unit": "b", "high_watermark": None, "at": None},
        ],
    ),
    "no rows: the columns are still said": ({"unit": "string"}, [], []),
}


@pytest.mark.parametrize(("columns", "rows", "read"), RECORDS.values(), ids=RECORDS.keys())
def test_several_values_of_one_shape_are_a_dagster_table(
    columns: dict[str, str], rows: list[dict[str, object]], read: list[dict[str, object]]
) -> None:
    value = v.table(columns, rows)
    assert isinstance(value, TableMetadataValue)
    assert [(c.name, c.type) for c in value.schema.columns] == list(columns.items())
    assert v.table_rows(value) == read


PAIRS = {
    "one row per entry, in order, numbers stay numbers": (
        {"app_id": "string", "version": "int"},
        {"watermark_assets/events/2024-01-29": 1, "watermark_assets/events/2024-01-27": 2},
        [
            {"app_id": "watermark_assets/events/2024-01-29", "version": 1},
            {"app_id": "watermark_assets/events/2024-01-27", "version": 2},
        ],
    ),
    "an empty mapping: the columns, no row": (
        {"partition": "string", "watermark": "string"},
        {},
        [],
    ),
}


@pytest.mark.parametrize(("columns", "values", "read"), PAIRS.values(), ids=PAIRS.keys())
def test_a_mapping_is_a_table_of_two_columns(
    columns: dict[str, str], values: dict[str, object], read: list[dict[str, object]]
) -> None:
    value = v.pairs(columns, values)
    assert isinstance(value, TableMetadataValue)
    assert [(c.name, c.type) for c in value.schema.columns] == list(columns.items())
    assert v.table_rows(value) == read
    assert v.table_pairs(value) == values


def test_a_table_of_pairs_has_two_columns() -> None:
    with pytest.raises(ValueError, match="two columns"):
        v.pairs({"unit": "string"}, {"a": 1})


def test_a_table_row_naming_no_column_is_refused() -> None:
    with pytest.raises(ValueError, match=r"no column \['rowz'\] in the table's columns"):
        v.table({"rows": "int"}, [{"rowz": 1}])


VALUES = {
    "aware datetime": (datetime(2026, 4, 3, 11, 45, tzinfo=UTC), "2026-04-03T11:45:00Z"),
    "naive datetime is a wall-clock time, no Z": (
        datetime(2026, 4, 3, 11, 45),
        "2026-04-03T11:45:00",
    ),
    "a string without quotes": ("shipped", "shipped"),
    "a number": (42, "42"),
    "None": (None, "null"),
}


@pytest.mark.parametrize(("value", "text"), VALUES.values(), ids=VALUES.keys())
def test_a_value_is_never_a_python_repr(value: object, text: str) -> None:
    assert v.value_text(value) == text


def test_plain_json_keeps_numbers_and_drops_sentinels() -> None:
    at = datetime(2026, 4, 3, 11, 45, tzinfo=UTC)
    assert v.plain({"files_read": 3, "ratio": 0.5, "at": at, "ids": (1, 2), "x": None}) == {
        "files_read": 3,
        "ratio": 0.5,
        "at": "2026-04-03T11:45:00Z",
        "ids": [1, 2],
        "x": None,
    }
    assert v.plain(float("nan")) == "nan"


def test_a_column_watermark_reads_without_reprs() -> None:
    at = datetime(2026, 4, 3, 11, 45, tzinfo=UTC)
    assert v.column_watermark_text(ColumnWatermark(("updated_at", "id"), (at, 10))) == (
        "updated_at=2026-04-03T11:45:00Z, id=10"
    )
    assert v.column_watermark_text(ColumnWatermark.of(None)).startswith("(empty")


def test_a_replaced_region_reads_without_reprs() -> None:
    one = ReplaceWindow("status", "shipped", "shipped", Interval.CLOSED_CLOSED)
    assert v.region_text(one, none="-") == "status = shipped"
    at = datetime(2026, 4, 3, 15, tzinfo=UTC)
    upto = ReplaceWindow("updated_at", None, at)
    assert v.region_text(upto, none="-") == "updated_at in (-inf, 2026-04-03T15:00:00Z]"
    assert v.region_text((one, upto), none="-") == (
        "status = shipped and updated_at in (-inf, 2026-04-03T15:00:00Z]"
    )
    assert v.region_text(None, none="(none: append)") == "(none: append)"


def test_a_cut_off_says_what_it_comes_from_in_the_one_format() -> None:
    day = datetime(2020, 1, 21, tzinfo=UTC)
    first = CutOff(at=day, highest=None, grace_days=3, abstinent_days=0, from_=day)
    assert v.cut_off_text(first) == "2020-01-21T00:00:00Z (first run: from)"
    later = CutOff(
        at=day - timedelta(days=3), highest=day, grace_days=3, abstinent_days=0, from_=day
    )
    assert v.cut_off_text(later) == (
        "2020-01-18T00:00:00Z (highest watermark 2020-01-21T00:00:00Z + abstinent 0d - grace 3d)"
    )


# --- the one documented table of every key ----------------------------------------------------


def documented_keys() -> list[str]:
    """The first cell of each row of the table under ``## Every key`` in docs/metadata.md (one
    key, or several separated by commas, each in backquotes)."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("\n## Every key\n", 1)[1].split("\n## ", 1)[0]
    keys: list[str] = []
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split(" | ", 1)[0]
        keys += re.findall(r"`([^`]+)`", first)
    return keys


#: The types a key's value may have in docs/metadata.md (the "type" column).
TYPES = {"text", "int", "float", "bool", "timestamp", "path", "table", "markdown", "JSON"}
TYPES |= {"table schema"}


def documented_rows() -> dict[str, list[str]]:
    """Each row of the table under ``## Every key``: its first key -> its cells."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("\n## Every key\n", 1)[1].split("\n## ", 1)[0]
    return {
        re.findall(r"`([^`]+)`", line)[0]: [c.strip() for c in line.strip("|").split(" | ")]
        for line in section.splitlines()
        if line.startswith("| `")
    }


def test_every_documented_key_has_its_kinds_type_and_an_example() -> None:
    header = "| key | kinds | type | what it says | example |"
    assert header in DOCS.read_text(encoding="utf-8")
    for key, cells in documented_rows().items():
        assert len(cells) == 5, (key, cells)
        _, kinds, kind_of_value, what, example = cells
        assert kinds and what and example, (key, cells)
        said = re.sub(r" \(.*\)$", "", kind_of_value)  # "path (event: text)": path
        assert set(said.split(" or ")) <= TYPES, (key, kind_of_value)


#: Keys a run writes as a Dagster table (vocabulary.table): documented as such.
TABLE_KEYS = (
    v.WATERMARK_PARTITIONS_BEFORE,
    v.WATERMARK_PARTITIONS_AFTER,
    v.PARTITION_WATERMARKS,
    v.DELTA_TXNS,
    v.UNITS_REFUSED,
    v.SCHEMA_VALUES_NULLED,
    v.SCHEMA_VALUES_RESCUED,
    v.SCHEMA_ADDED_COLUMNS,
    v.SCHEMA_WIDENED,
    v.WINDOWS,
    v.CELLS,
    v.EVENT_TIME_INPUTS,
    v.EVENT_TIME_LOCAL_WATERMARKS,
    v.EVENT_TIME_PARTITIONS_OPEN,
    v.FILES_BELOW_WATERMARK_BY_PARTITION,
)


@pytest.mark.parametrize("key", TABLE_KEYS)
def test_a_key_written_as_a_table_is_documented_as_one(key: str) -> None:
    assert documented_rows()[key][2] == "table"


def test_every_key_is_documented_once() -> None:
    documented = documented_keys()
    assert sorted(set(documented)) == sorted(documented), "a key documented twice"
    assert sorted(set(v.KEYS) - set(documented)) == [], "keys missing in docs/metadata.md"
    assert sorted(set(documented) - set(v.KEYS)) == [], "docs/metadata.md names no such key"


def test_every_renamed_key_is_listed_with_its_new_name() -> None:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("\n## Renamed keys\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", section, flags=re.MULTILINE)
    assert dict(rows) == dict(v.RENAMED)
    assert set(v.RENAMED.values()) <= set(v.KEYS)
    assert not set(v.RENAMED) & set(v.KEYS), "an old name is still a key"


def test_the_keys_are_unique() -> None:
    assert len(set(v.KEYS)) == len(v.KEYS)


def test_no_user_doc_names_a_key_by_its_old_name() -> None:
    docs = DOCS.parent
    pages = [docs.parent / "README.md", *sorted(docs.glob("*.md"))]
    stale = [
        f"{page.name}: `{old}`"
        for page in pages
        if page.name not in ("metadata.md", "design.md")
        for old in v.RENAMED
        if f"`{old}`" in page.read_text(encoding="utf-8")
    ]
    assert stale == []
