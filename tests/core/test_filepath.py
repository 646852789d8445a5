from __future__ import annotations

from datetime import datetime, timezone

import pytest

from watermark_assets.core.filepath.path import (
    NameOrdering,
    check_sortable,
    detect_name_ordering,
    name_time,
    prefix_components,
    split_path,
)
from watermark_assets.exceptions import UnsortableFileNameError


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param(
            "date=2024-01-28/hour=14/f.ndjson.gz",
            ("date=2024-01-28/hour=14", "f.ndjson.gz"),
            id="nested partitions are the prefix, the last component the name",
        ),
        pytest.param(
            "date=2024-01-28/1706450400-01926abc.ndjson.gz",
            ("date=2024-01-28", "1706450400-01926abc.ndjson.gz"),
            id="single partition level",
        ),
        pytest.param(
            "1706450400-uuid.parquet",
            ("", "1706450400-uuid.parquet"),
            id="a file at the root has the empty prefix",
        ),
    ],
)
def test_split_path(path: str, expected: tuple[str, str]) -> None:
    assert split_path(path) == expected


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param("", "empty", id="an empty path is refused"),
        pytest.param("/date=2024-01-28/f.gz", "starts with '/'", id="an absolute path is refused"),
        pytest.param("date=2024-01-28/", "ends with '/'", id="a directory path is refused"),
        pytest.param("date=2024-01-28//f.gz", "empty component", id="a double slash is refused"),
    ],
)
def test_split_path_refuses_malformed_paths(path: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        split_path(path)


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        pytest.param("", (), id="the root prefix has no components"),
        pytest.param("date=2024-01-28/hour=14", ("date=2024-01-28", "hour=14"), id="two levels"),
    ],
)
def test_prefix_components(prefix: str, expected: tuple[str, ...]) -> None:
    assert prefix_components(prefix) == expected


def first_difference(left: str, right: str) -> int:
    return next(i for i, (a, b) in enumerate(zip(left, right, strict=False)) if a != b)


# The seed's "Lexicographic Comparison" examples, verbatim.
@pytest.mark.parametrize(
    ("greater", "smaller", "position", "greater_char", "smaller_char"),
    [
        pytest.param(
            "1706450500-uuid3.parquet",
            "1706450400-uuid2.parquet",
            7,
            "5",
            "4",
            id="file names differ at position 7: '5' > '4'",
        ),
        pytest.param(
            "date=2024-01-29",
            "date=2024-01-28",
            14,
            "9",
            "8",
            id="partitions differ at position 14: '9' > '8'",
        ),
    ],
)
def test_seed_lexicographic_comparison(
    greater: str, smaller: str, position: int, greater_char: str, smaller_char: str
) -> None:
    assert first_difference(greater, smaller) == position
    assert (greater[position], smaller[position]) == (greater_char, smaller_char)
    assert greater > smaller
    assert greater[:16] > smaller[:16]  # "1706450500-uuid3" > "1706450400-uuid2"


# The seed's naming-scheme table, every row.
@pytest.mark.parametrize(
    ("name", "ordering"),
    [
        pytest.param(
            "1706450400-uuid.parquet",
            NameOrdering.UNIX_TIMESTAMP,
            id="Yes: Unix timestamp prefix",
        ),
        pytest.param(
            "01926abc-def0.parquet", NameOrdering.UUIDV7, id="Yes: UUIDv7 is time-ordered"
        ),
        pytest.param(
            "2024-01-28T14:00:00.parquet",
            NameOrdering.ISO8601,
            id="Yes: ISO 8601 sorts correctly",
        ),
        pytest.param("event-abc123.parquet", None, id="No: random, won't work"),
    ],
)
def test_seed_naming_scheme_table(name: str, ordering: NameOrdering | None) -> None:
    assert detect_name_ordering(name) is ordering
    if ordering is None:
        with pytest.raises(UnsortableFileNameError):
            check_sortable(f"date=2024-01-28/{name}", NameOrdering.AUTO)
    else:
        check_sortable(f"date=2024-01-28/{name}", NameOrdering.AUTO)
        check_sortable(f"date=2024-01-28/{name}", ordering)


@pytest.mark.parametrize(
    ("name", "ordering"),
    [
        pytest.param(
            "1706450400-01926abc.parquet",
            NameOrdering.UNIX_TIMESTAMP,
            id="the seed's watermark file starts with a Unix timestamp",
        ),
        pytest.param(
            "1706450400123_part-0.parquet",
            NameOrdering.UNIX_TIMESTAMP,
            id="a millisecond timestamp",
        ),
        pytest.param(
            "1706450400", NameOrdering.UNIX_TIMESTAMP, id="a bare timestamp without an extension"
        ),
        pytest.param("17064504001234-x.parquet", None, id="fourteen digits are not a timestamp"),
        pytest.param("170645040-x.parquet", None, id="nine digits are not a timestamp"),
        pytest.param(
            "01926abc-def0-7abc-8def-0123456789ab.parquet", NameOrdering.UUIDV7, id="a full UUIDv7"
        ),
        pytest.param(
            "01926abc-def0-4abc-8def-0123456789ab.parquet",
            None,
            id="a UUIDv4 is random and refused",
        ),
        pytest.param(
            "deadbeef-cafe.parquet",
            None,
            id="hex words that are not a UUIDv7 time prefix are refused",
        ),
        pytest.param(
            "01926ABC-DEF0.parquet",
            None,
            id="uppercase hex is refused because it does not sort with lowercase",
        ),
        pytest.param("2024-01-28.ndjson.gz", NameOrdering.ISO8601, id="an ISO 8601 date"),
        pytest.param(
            "2024-01-28-0001.ndjson.gz",
            NameOrdering.ISO8601,
            id="an ISO 8601 date followed by a sequence number",
        ),
        pytest.param(
            "2024-01-28T14:00:00.123Z.parquet",
            NameOrdering.ISO8601,
            id="an ISO 8601 UTC timestamp with a fraction",
        ),
        pytest.param(
            "2024-01-28T14.parquet", NameOrdering.ISO8601, id="an ISO 8601 timestamp to the hour"
        ),
        pytest.param(
            "2024-01-28T14:00:00+02:00.parquet",
            None,
            id="an ISO 8601 timestamp with an offset is refused",
        ),
        pytest.param("2024-13-28.parquet", None, id="month 13 is not a date"),
        pytest.param("file950.ndjson.gz", None, id="a counter without padding is refused"),
    ],
)
def test_detect_name_ordering(name: str, ordering: NameOrdering | None) -> None:
    assert detect_name_ordering(name) is ordering


@pytest.mark.parametrize(
    ("path", "ordering", "accepted"),
    [
        pytest.param(
            "d/event-abc123.parquet",
            NameOrdering.LEXICOGRAPHIC,
            True,
            id="lexicographic: the user vouches for any name",
        ),
        pytest.param(
            "d/2024-01-28T14:00:00.parquet",
            NameOrdering.AUTO,
            True,
            id="auto accepts any detected identifier",
        ),
        pytest.param(
            "d/1706450400-uuid.parquet",
            NameOrdering.UNIX_TIMESTAMP,
            True,
            id="a required Unix timestamp is there",
        ),
        pytest.param(
            "d/01926abc-def0.parquet",
            NameOrdering.UNIX_TIMESTAMP,
            False,
            id="a UUIDv7 is refused when Unix timestamps are required",
        ),
        pytest.param(
            "d/1706450400-uuid.parquet",
            NameOrdering.UUIDV7,
            False,
            id="a Unix timestamp is refused when UUIDv7 is required",
        ),
        pytest.param(
            "d/1706450400-uuid.parquet",
            NameOrdering.ISO8601,
            False,
            id="a Unix timestamp is refused when ISO 8601 is required",
        ),
    ],
)
def test_check_sortable(path: str, ordering: NameOrdering, accepted: bool) -> None:
    if accepted:
        check_sortable(path, ordering)
        return
    with pytest.raises(UnsortableFileNameError) as caught:
        check_sortable(path, ordering)
    assert (caught.value.path, caught.value.ordering) == (path, ordering.value)
    assert "file_name_ordering: lexicographic" in str(caught.value)


def test_name_ordering_values_are_the_configuration_spelling() -> None:
    assert [o.value for o in NameOrdering] == [
        "auto",
        "unix_timestamp",
        "uuidv7",
        "iso8601",
        "lexicographic",
    ]
    assert NameOrdering("uuidv7") is NameOrdering.UUIDV7


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("1706450400-uuid.parquet", datetime(2024, 1, 28, 14, 0, tzinfo=timezone.utc)),
        (
            "1706450400500-uuid.parquet",
            datetime(2024, 1, 28, 14, 0, 0, 500000, tzinfo=timezone.utc),
        ),
        ("01926abc-def0.parquet", datetime(2024, 10, 8, 6, 6, 55, 728000, tzinfo=timezone.utc)),
        ("2024-01-28T14:00:00.parquet", datetime(2024, 1, 28, 14, 0, tzinfo=timezone.utc)),
        ("2024-01-28.parquet", datetime(2024, 1, 28, tzinfo=timezone.utc)),
        ("17064504001-x.parquet", None),
        ("event-abc123.parquet", None),
    ],
    ids=[
        "unix seconds",
        "unix milliseconds",
        "the seed's UUIDv7 prefix",
        "an ISO 8601 timestamp",
        "an ISO 8601 date",
        "eleven digits are neither seconds nor milliseconds",
        "a random name encodes no time",
    ],
)
def test_the_time_a_file_name_encodes(name: str, expected: datetime | None) -> None:
    assert name_time(name) == expected
