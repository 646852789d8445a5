"""Every row's lineage names the requested file it came from and that file's Dagster partition,
whatever the file's name (``watermark_assets.spark.batch``: the path Spark reports is decoded,
made relative to the source root and looked up among the batch's files by its CRC-32 bucket; a
row whose reported path is one Spark's ``inputFiles()`` lists is looked up by that string as it
is, the same answer without decoding).

Real Spark (the session fixture), real files; neighbours that a naive decoding or a glob would
confuse are requested in ANOTHER partition, so that a row traced to the wrong file shows.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from conftest import event_records, write_ndjson

from watermark_assets.exceptions import UntracedRowsError
from watermark_assets.spark import batch
from watermark_assets.spark.batch import ReadSpec, _crc32, write_batch

WHEN = datetime(2024, 1, 28, 10, tzinfo=UTC)
HOUR = "date=2024-01-28/hour=10"
P1, P2 = "2024-01-28", "2024-01-29"


def read_spec(root: Path, files: list[str], partitions: dict[str, str]) -> ReadSpec:
    return ReadSpec(
        source_uri=str(root),
        files=files,
        file_partitions=partitions,
        format="ndjson",
        schema_ddl="id BIGINT, event_time TIMESTAMP, name STRING",
        csv_options={},
        derived_columns={},
        partition_by=[],
        ingested_at_iso="2024-01-28T15:00:00+00:00",
    )


def land(root: Path, files: list[str]) -> dict[int, str]:
    """Two records in each file, ids unique across files; id -> the file's relative path."""
    owner = {}
    for number, relative in enumerate(files):
        write_ndjson(root, relative, event_records(10 * number, 2, WHEN))
        owner |= {10 * number: relative, 10 * number + 1: relative}
    return owner


def lineage(tmp_path: Path, spark: Any, root: Path, partitions: dict[str, str]) -> Any:
    """The batch of ``partitions``' files written; per id, (_source_file, _dagster_partition)."""
    write_batch(
        spark,
        read_spec(root, list(partitions), partitions),
        data_dir=str(tmp_path / "stage"),
        quarantine_dir=str(tmp_path / "q"),
    )
    rows = pq.read_table(str(tmp_path / "stage")).to_pylist()
    return {r["id"]: (r["_source_file"], r["_dagster_partition"]) for r in rows}


MANY = {f"{HOUR}/17064360{n:02d}-{n:03d}.ndjson.gz": (P1, P2)[n % 2] for n in range(40)}

# (requested file -> its partition, the source root's folder name)
TRICKY = [
    pytest.param({f"{HOUR}/1-a b.ndjson": P1}, "landing", id="a space"),
    pytest.param({f"{HOUR}/1-a%b.ndjson": P1}, "landing", id="a percent sign"),
    pytest.param(
        {f"{HOUR}/1-a%20b.ndjson": P1, f"{HOUR}/1-a b.ndjson": P2},
        "landing",
        id="a literal '%20' and a space, in two partitions",
    ),
    pytest.param(
        {f"{HOUR}/1-a+b.ndjson": P1, f"{HOUR}/1-a b.ndjson": P2},
        "landing",
        id="a plus sign and a space (url_decode reads '+' as a space)",
    ),
    pytest.param(
        {f"{HOUR}/1-a*b.ndjson": P1, f"{HOUR}/1-aXYb.ndjson": P2},
        "landing",
        id="a star and a name it would match as a glob",
    ),
    pytest.param(
        {f"{HOUR}/1-a#b?c.ndjson": P1, f"{HOUR}/1-a[x]{{y,z}}.ndjson": P2},
        "landing",
        id="hash, question mark, brackets and braces",
    ),
    pytest.param({f"{HOUR}/2024-01-28T10:01:00Z.ndjson": P1}, "landing", id="colons"),
    pytest.param({f"{HOUR}/1-a\\b.ndjson": P1}, "landing", id="a backslash"),
    pytest.param(
        {f"{HOUR}/1-é,;='b.ndjson": P1, f"{HOUR}/1-日本.ndjson": P2, f"{HOUR}/1-🙂.ndjson": P1},
        "landing",
        id="two-, three- and four-byte UTF-8 and URI punctuation",
    ),
    pytest.param(
        {f"{HOUR}/1-a b*.ndjson": P1, f"{HOUR}/1-a%2Bb.ndjson": P2},
        "land ing %20+#[x] é",
        id="a source root with a space, '%20', '+', '#', brackets and unicode",
    ),
    pytest.param(MANY, "landing", id="40 files in two partitions, buckets shared"),
]


@pytest.mark.parametrize("lookup", ["by the reported string", "by the decoded path only"])
@pytest.mark.parametrize(("partitions", "root_name"), TRICKY)
def test_each_row_names_its_requested_file_and_that_files_partition(
    spark: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    partitions: dict[str, str],
    root_name: str,
    lookup: str,
) -> None:
    if lookup == "by the decoded path only":  # the lookup every row falls back to
        monkeypatch.setattr(batch, "_reported_entries", lambda *_: {})
    root = tmp_path / root_name
    owner = land(root, list(partitions))

    traced = lineage(tmp_path, spark, root, partitions)

    assert traced == {i: (path, partitions[path]) for i, path in owner.items()}


@pytest.mark.parametrize(("partitions", "root_name"), TRICKY)
def test_every_requested_file_is_found_by_the_string_spark_reports(
    spark: Any, tmp_path: Path, partitions: dict[str, str], root_name: str
) -> None:
    """The fast lookup holds every file of the batch under the spelling Spark reports in
    ``_metadata.file_path``, with its own lineage (else rows would only take the slower path)."""
    root = tmp_path / root_name
    land(root, list(partitions))
    spec = read_spec(root, list(partitions), partitions)
    frame, _ = batch.read_batch(spark, spec)
    reported = {r[0] for r in frame.select(batch._RAW_SOURCE_COLUMN).distinct().collect()}
    entries = {p: {"source": p, "partition": k} for p, k in partitions.items()}

    fast = batch._reported_entries(entries, str(root), frame.inputFiles())

    assert {uri: fast.get(uri) for uri in reported} == {
        uri: entries[path] for uri, path in zip_reported(reported, root)
    }


def zip_reported(reported: set[str], root: Path) -> list[tuple[str, str]]:
    """Each reported URI with the requested path it names (decoded by Python's own parser)."""
    from urllib.parse import unquote, urlsplit

    return [(uri, unquote(urlsplit(uri).path).removeprefix(f"{root}/")) for uri in reported]


def test_many_files_share_buckets() -> None:
    """The case of 40 files looks files up in buckets of more than one (else it proves less)."""
    shared = Counter(_crc32(path) % len(MANY) for path in MANY)
    assert max(shared.values()) >= 2


@pytest.mark.parametrize(
    "mapped",
    [
        pytest.param(1, id="one mapped file: one bucket"),
        pytest.param(11, id="11 mapped files: 11 buckets"),
    ],
)
def test_a_file_missing_from_the_map_is_untraced_even_when_its_bucket_holds_a_file(
    spark: Any, tmp_path: Path, mapped: int
) -> None:
    root = tmp_path / "landing"
    names = [f"{HOUR}/1706436{n:03d}-x.ndjson" for n in range(100)]
    partitions = {path: P1 for path in names[:mapped]}
    filled = {_crc32(path) % mapped for path in partitions}
    missing = next(path for path in names[mapped:] if _crc32(path) % mapped in filled)
    files = [*partitions, missing]
    land(root, files)

    with pytest.raises(UntracedRowsError, match=r"^2 rows read by Spark trace to no") as refused:
        write_batch(
            spark,
            read_spec(root, files, partitions),
            data_dir=str(tmp_path / "stage"),
            quarantine_dir=str(tmp_path / "q"),
        )
    assert refused.value.example is not None
    assert refused.value.example.endswith(missing)


def test_each_partitions_rows_and_malformed_records_are_counted_among_many_partitions(
    spark: Any, tmp_path: Path
) -> None:
    """The observed counts compare each row's partition slot: 12 hourly partitions, a file per
    partition holding the partition's number of records (and, in every third, one malformed
    line), are counted each on its own."""
    root = tmp_path / "landing"
    partitions, expected = {}, {}
    for hour in range(12):
        key = f"2024-01-28-{hour:02d}:00"
        path = f"date=2024-01-28/hour={hour:02d}/1706436000-{hour}.ndjson"
        records: list[Any] = list(event_records(100 * hour, hour + 1, WHEN))
        bad = 1 if hour % 3 == 0 else 0
        write_ndjson(root, path, records + ["{not json"] * bad)
        partitions[path] = key
        expected[key] = {"rows_read": hour + 1 + bad, "rows_quarantined": bad}

    staged = write_batch(
        spark,
        read_spec(root, list(partitions), partitions),
        data_dir=str(tmp_path / "stage"),
        quarantine_dir=str(tmp_path / "q"),
    )

    assert {k: dict(v) for k, v in staged.per_partition.items()} == expected
    assert staged.rows_quarantined == 4
