"""File names and folders that Spark or Hadoop treat specially (issue 6, section 2).

Every landing file is read exactly once by its exact path, or held back before anything is read,
named with its character by the sensor, and never passed by the watermark. Real Spark (the
session fixture) and real Delta tables, through the sensor -> run -> commit loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _landing import FROZEN_NOW, delta_ids, hour
from _sensor_loop import SensorLoop
from conftest import event_records, pipeline_yaml, project_config, write_ndjson
from dagster import AssetKey, AssetRecordsFilter, DagsterInstance
from deltalake import DeltaTable

from watermark_assets.config import FilePipelineConfig
from watermark_assets.defs import build_definitions
from watermark_assets.exceptions import UnreadablePathError, UntracedRowsError
from watermark_assets.sources.file_discovery import hold_back_unreadable
from watermark_assets.spark.batch import ReadSpec, write_batch
from watermark_assets.spark.paths import literal_path, unreadable_character
from watermark_assets.state.load import load_state

PARTITION = "2024-01-28"
HOUR = f"date={PARTITION}/hour=10"
LATER_HOUR = f"date={PARTITION}/hour=11"


@dataclass
class Source:
    """A pipeline whose landing root is ``root_name`` under tmp_path, and the rows written."""

    loop: SensorLoop
    pipeline: FilePipelineConfig
    root: Path
    ids: dict[str, list[int]] = field(default_factory=dict)
    next_id: int = 1

    def add(self, relative: str, rows: int = 2) -> str:
        write_ndjson(self.root, relative, event_records(self.next_id, rows, hour(28, 10)))
        self.ids[relative] = list(range(self.next_id, self.next_id + rows))
        self.next_id += rows
        return relative

    def ingest(self) -> str:
        """Tick and run until the sensor requests nothing; the last skip reason."""
        for _ in range(5):
            tick = self.loop.tick()
            if not tick.run_requests:
                return tick.skip_message or ""
            self.loop.run_all(tick.run_requests)
        raise AssertionError("the sensor kept requesting runs")

    def committed(self) -> dict[str, list[int]]:
        """Per ``_source_file``: the ids committed from it (duplicates kept)."""
        if not DeltaTable.is_deltatable(self.pipeline.table.uri):
            return {}
        table = DeltaTable(self.pipeline.table.uri).to_pyarrow_table(
            columns=["_source_file", "_dagster_partition", "id"]
        )
        assert set(table.column("_dagster_partition").to_pylist()) == {PARTITION}
        out: dict[str, list[int]] = {}
        for row in table.to_pylist():
            out.setdefault(row["_source_file"], []).append(row["id"])
        return {path: sorted(ids) for path, ids in out.items()}

    def partition_watermarks(self) -> dict[str, str]:
        return dict(load_state(self.pipeline, now=FROZEN_NOW).watermark.partition_watermarks)

    def observation(self, partition: str | None = None) -> dict[str, Any]:
        """The latest observation of the asset (``partition``: of that partition's page)."""
        records = self.loop.instance.fetch_observations(
            AssetRecordsFilter(asset_key=AssetKey("events")), limit=50
        ).records
        mine = [r.asset_observation for r in records if r.partition_key == partition]
        assert mine, "the sensor recorded no observation"
        observation = mine[0]
        assert observation is not None
        return {k: v.value for k, v in observation.metadata.items()}


def make_source(
    tmp_path: Path, root_name: str = "landing", partition_by: list[str] | None = None
) -> Source:
    root = tmp_path / root_name
    table = {} if partition_by is None else {"table": {"partition_by": partition_by}}
    raw = pipeline_yaml(tmp_path, source={"uri": str(root)}, **table)
    config = project_config(raw)
    pipeline = config.pipeline("events")
    assert isinstance(pipeline, FilePipelineConfig)
    defs = build_definitions(config, clock=lambda: FROZEN_NOW)
    return Source(SensorLoop(defs, DagsterInstance.ephemeral()), pipeline, root)


# (special file names, neighbours that a glob or a naive decoding would confuse with them, the
# source root's folder name)
READ_LITERALLY = [
    pytest.param(["1706436060-a b.ndjson.gz"], [], "landing", id="a space in the name"),
    pytest.param(["1706436060-a%b.ndjson.gz"], [], "landing", id="a percent sign in the name"),
    pytest.param(
        ["1706436060-a%20b.ndjson.gz"],
        ["1706436060-a b.ndjson.gz"],
        "landing",
        id="a literal '%20' next to a name with a space",
    ),
    pytest.param(
        ["1706436060-a+b.ndjson.gz"],
        ["1706436060-a b.ndjson.gz"],
        "landing",
        id="a plus sign next to a name with a space (url_decode reads '+' as a space)",
    ),
    pytest.param(["1706436060-a#b.ndjson.gz"], [], "landing", id="a hash in the name"),
    pytest.param(
        ["1706436060-a?b.ndjson.gz"], ["1706436060-aZb.ndjson.gz"], "landing", id="a question mark"
    ),
    pytest.param(
        ["1706436060-a*b.ndjson.gz"],
        ["1706436060-aXYb.ndjson.gz"],
        "landing",
        id="a star next to a neighbour it would match as a glob",
    ),
    pytest.param(["1706436060-a[b.ndjson.gz"], [], "landing", id="an opening bracket"),
    pytest.param(["1706436060-a]b.ndjson.gz"], [], "landing", id="a closing bracket"),
    pytest.param(
        ["1706436060-a[xy]b.ndjson.gz"],
        ["1706436060-axb.ndjson.gz"],
        "landing",
        id="a bracket pair next to a name the class would match",
    ),
    pytest.param(["1706436060-a{b.ndjson.gz"], [], "landing", id="an opening brace"),
    pytest.param(["1706436060-a}b.ndjson.gz"], [], "landing", id="a closing brace"),
    pytest.param(
        ["1706436060-{x,y}.ndjson.gz"],
        ["1706436060-x.ndjson.gz"],
        "landing",
        id="a brace alternation next to a name it would match",
    ),
    pytest.param(["1706436060-a:b.ndjson.gz"], [], "landing", id="a colon in the name"),
    pytest.param(
        ["2024-01-28T10:01:00Z-a.ndjson.gz"], [], "landing", id="an ISO 8601 name with colons"
    ),
    pytest.param(["1706436060-a\\b.ndjson.gz"], [], "landing", id="a backslash in the name"),
    pytest.param(
        ["1706436060-é,;='b.ndjson.gz"], [], "landing", id="non-ASCII and URI punctuation"
    ),
    pytest.param(
        ["1706436060-a b*.ndjson.gz", "1706436060-a%2Bb.ndjson.gz"],
        ["1706436060-a bZ.ndjson.gz", "1706436060-a+b.ndjson.gz"],
        "land ing %20+#[x]",
        id="a source root holding a space, '%20', '+', '#' and brackets, with special names",
    ),
]


@pytest.mark.parametrize(("special", "neighbours", "root_name"), READ_LITERALLY)
def test_a_special_name_is_read_once_by_its_exact_path(
    spark: Any, tmp_path: Path, special: list[str], neighbours: list[str], root_name: str
) -> None:
    source = make_source(tmp_path, root_name)
    names = sorted(["1706436000-000001.ndjson.gz", *special, *neighbours])
    names.append("1706436120-000009.ndjson.gz")  # after every special name
    for name in names:
        source.add(f"{HOUR}/{name}")

    skip = source.ingest()

    assert skip.startswith("Idle:"), skip
    assert source.committed() == source.ids, "each file's rows once, traced to that file"
    assert sorted(delta_ids(source.pipeline.table.uri)) == sorted(
        i for ids in source.ids.values() for i in ids
    )
    assert source.partition_watermarks() == {HOUR: max(names)}


def test_a_source_root_with_a_space_loses_no_file(spark: Any, tmp_path: Path) -> None:
    source = make_source(tmp_path, "my landing")
    files = [source.add(f"{HOUR}/1706436000-000001.ndjson.gz")]
    files.append(source.add(f"{LATER_HOUR}/1706439600-000002.ndjson.gz"))

    assert source.ingest().startswith("Idle:")

    assert source.committed() == source.ids
    assert source.partition_watermarks() == {
        HOUR: files[0].rsplit("/", 1)[1],
        LATER_HOUR: files[1].rsplit("/", 1)[1],
    }


@pytest.mark.parametrize(
    "partition_by",
    [
        pytest.param(["_dagster_partition"], id="by _dagster_partition"),
        pytest.param(["event_date", "_dagster_partition"], id="by event_date, _dagster_partition"),
    ],
)
def test_a_table_partitioned_by_a_column_named_with_an_underscore_commits_every_row(
    spark: Any, tmp_path: Path, partition_by: list[str]
) -> None:
    """Spark names the partition folders ``_dagster_partition=2024-01-28``: they hold the
    table's data, not hidden files, and are committed (they were skipped: the run committed
    no row, passed its files and only the rows_reconcile check said so)."""
    source = make_source(tmp_path, partition_by=partition_by)
    source.add(f"{HOUR}/1706436000-000001.ndjson.gz")
    source.add(f"{LATER_HOUR}/1706439600-000002.ndjson.gz", rows=3)

    assert source.ingest().startswith("Idle:")

    assert source.committed() == source.ids
    table = DeltaTable(source.pipeline.table.uri)
    assert table.metadata().partition_columns == partition_by
    assert all(f"_dagster_partition={PARTITION}/" in path for path in table.file_uris())


UNREADABLE = "1706436060-a:b*.ndjson.gz"


def test_a_name_spark_cannot_read_is_held_back_named_and_never_passed(
    spark: Any, tmp_path: Path
) -> None:
    source = make_source(tmp_path)
    before = source.add(f"{HOUR}/1706436000-000001.ndjson.gz")
    source.add(f"{HOUR}/{UNREADABLE}")
    after = source.add(f"{HOUR}/1706436120-000003.ndjson.gz")
    other_hour = source.add(f"{LATER_HOUR}/1706439600-000004.ndjson.gz")

    skip = source.ingest()

    assert source.committed() == {before: source.ids[before], other_hour: source.ids[other_hour]}
    assert source.partition_watermarks() == {
        HOUR: before.rsplit("/", 1)[1],
        LATER_HOUR: other_hour.rsplit("/", 1)[1],
    }, "the watermark stops below the held-back file"
    assert f"'{HOUR}/{UNREADABLE}' (':')" in skip
    assert "2 in all" in skip, "the file after it in its landing partition waits"
    observed = source.observation()
    assert observed["files/unreadable"] == 1
    assert observed["files/unreadable_first"] == [f"{HOUR}/{UNREADABLE}"]
    on_page = source.observation(PARTITION)  # and on the partition's own page, with the fix
    assert on_page["partition/state"] == "files not ingested"
    assert on_page["partition/reason"].startswith(
        f"1 file(s) Spark cannot read by their exact path (':' with a glob character): rename "
        f"them without ':' (first {HOUR}/{UNREADABLE})"
    )

    assert source.loop.run_partition(PARTITION).success, "a run that discovers holds it back too"
    assert set(source.committed()) == {before, other_hour}

    with pytest.raises(UnreadablePathError, match=r"':'.*'\*'") as refused:
        source.loop.run_partition(PARTITION, [after])  # a requested list must include it
    assert refused.value.path == f"{HOUR}/{UNREADABLE}"
    assert refused.value.character == ":"

    renamed = f"{HOUR}/1706436060-a-b*.ndjson.gz"
    (source.root / f"{HOUR}/{UNREADABLE}").rename(source.root / renamed)
    source.ids[renamed] = source.ids.pop(f"{HOUR}/{UNREADABLE}")

    assert source.ingest().startswith("Idle:")
    assert source.committed() == source.ids, "once renamed, it and the files after it commit"
    assert source.partition_watermarks()[HOUR] == after.rsplit("/", 1)[1]
    assert source.observation()["files/unreadable"] == 0


def test_a_name_that_does_not_sort_by_time_is_held_back_named_and_never_passed(
    spark: Any, tmp_path: Path
) -> None:
    """One misnamed file used to fail every sensor tick of the pipeline: now it waits, named,
    with the files after it in its landing partition, and everything else goes on."""
    source = make_source(tmp_path)
    before = source.add(f"{HOUR}/1706436000-000001.ndjson.gz")
    misnamed = source.add(f"{HOUR}/17064360xx-000002.ndjson.gz")
    after = source.add(f"{HOUR}/1706436120-000003.ndjson.gz")
    other_hour = source.add(f"{LATER_HOUR}/1706439600-000004.ndjson.gz")

    skip = source.ingest()

    assert source.committed() == {before: source.ids[before], other_hour: source.ids[other_hour]}
    assert source.partition_watermarks()[HOUR] == before.rsplit("/", 1)[1]
    assert f"1 files whose names do not sort by time (first ['{misnamed}']" in skip
    observed = source.observation()
    assert (observed["files/unsortable"], observed["files/unsortable_first"]) == (1, [misnamed])

    renamed = f"{HOUR}/1706436060-000002.ndjson.gz"
    (source.root / misnamed).rename(source.root / renamed)
    source.ids[renamed] = source.ids.pop(misnamed)

    assert source.ingest().startswith("Idle:")
    assert source.committed() == source.ids, "once renamed, it and the files after it commit"
    assert source.partition_watermarks()[HOUR] == after.rsplit("/", 1)[1]
    assert source.observation()["files/unsortable"] == 0


@pytest.mark.parametrize(
    ("uri", "character"),
    [
        pytest.param("/data/landing/1706436060-a:b.gz", None, id="a colon alone is readable"),
        pytest.param("/data/landing/1706436060-a*b.gz", None, id="a glob character alone"),
        pytest.param("/data/landing/1706436060-a:b*.gz", ":", id="a colon with a glob character"),
        pytest.param("/data/x:y/1706436060-a[b.gz", ":", id="a colon in the root, [ in the name"),
        pytest.param("s3://bucket/in/1706436060-ab.gz", None, id="the scheme's colon is no part"),
        pytest.param("s3://bucket/in/1706436060-a:b?.gz", ":", id="on S3 the same"),
        pytest.param("file:/data/in/1706436060-a*.gz", None, id="a file: URI's colon is no part"),
    ],
)
def test_which_paths_spark_cannot_read_literally(uri: str, character: str | None) -> None:
    assert unreadable_character(uri) == character


@pytest.mark.parametrize(
    ("uri", "literal"),
    [
        pytest.param("file:///d/a b.gz", "/d/a b.gz", id="nothing to escape"),
        pytest.param("/d/a*b?[c]{d}.gz", "/d/a\\*b\\?\\[c\\]\\{d\\}.gz", id="glob characters"),
        pytest.param("/d/a\\b.gz", "/d/a\\\\b.gz", id="a backslash"),
        pytest.param("s3://b/k*.gz", "s3a://b/k\\*.gz", id="S3 through s3a"),
    ],
)
def test_a_literal_path_escapes_hadoop_glob_syntax(uri: str, literal: str) -> None:
    assert literal_path(uri) == literal


# --- the Spark adapter alone: every reader, and the untraced-rows safety net ------------------

STAGE_NAMES = [
    "1706436060-a b",
    "1706436061-a+b",
    "1706436062-a*b",
    "1706436062-aXb",
    "1706436063-a:b",
]


def write_rows(root: Path, relative: str, fmt: str, first_id: int) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        path.write_text(f"id,event_time,name\n{first_id},2024-01-28T10:00:00Z,n\n")
    elif fmt == "parquet":
        pq.write_table(pa.table({"id": [first_id], "name": ["n"]}), path)
    else:
        write_ndjson(root, relative, event_records(first_id, 1, hour(28, 10)))


def read_spec(root: Path, files: list[str], fmt: str, mapped: list[str]) -> ReadSpec:
    return ReadSpec(
        source_uri=str(root),
        files=files,
        file_partitions={f: PARTITION for f in mapped},
        format=fmt,
        schema_ddl=None if fmt == "parquet" else "id BIGINT, event_time TIMESTAMP, name STRING",
        csv_options={"header": "true"},
        derived_columns={},
        partition_by=[],
        ingested_at_iso="2024-01-28T15:00:00+00:00",
    )


@pytest.mark.parametrize(
    ("fmt", "suffix"),
    [("ndjson", ".ndjson"), ("csv", ".csv"), ("parquet", ".parquet")],
    ids=["NDJSON", "CSV", "Parquet"],
)
def test_every_reader_reads_special_names_literally_and_traces_each_row(
    spark: Any, tmp_path: Path, fmt: str, suffix: str
) -> None:
    root = tmp_path / "land ing"
    files = [f"{HOUR}/{name}{suffix}" for name in STAGE_NAMES]
    for number, relative in enumerate(files):
        write_rows(root, relative, fmt, number)
    out = write_batch(
        spark,
        read_spec(root, files, fmt, files),
        data_dir=str(tmp_path / "stage"),
        quarantine_dir=str(tmp_path / "q"),
    )
    rows = pq.read_table(str(tmp_path / "stage")).to_pylist()
    assert sorted((r["_source_file"], r["id"]) for r in rows) == list(zip(files, range(5)))
    assert out.per_partition == {PARTITION: {"rows_read": 5, "rows_quarantined": 0}}


def test_rows_that_trace_to_no_file_of_the_batch_are_refused(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "landing"
    files = [f"{HOUR}/1706436060-a b.ndjson", f"{HOUR}/1706436061-c.ndjson"]
    for number, relative in enumerate(files):
        write_rows(root, relative, "ndjson", number)
    with pytest.raises(UntracedRowsError, match="1 rows read by Spark trace to no") as refused:
        write_batch(
            spark,
            read_spec(root, files, "ndjson", mapped=files[1:]),
            data_dir=str(tmp_path / "stage"),
            quarantine_dir=str(tmp_path / "q"),
        )
    assert refused.value.example is not None and refused.value.example.endswith("a%20b.ndjson")


@pytest.mark.parametrize(
    ("paths", "kept", "unreadable"),
    [
        pytest.param(
            ["h=1/1-a.gz", "h=1/2-a:b*.gz", "h=1/3-c.gz", "h=2/1-d.gz"],
            ["h=1/1-a.gz", "h=2/1-d.gz"],
            {"h=1/2-a:b*.gz": ":"},
            id="the files after an unreadable one in its landing partition wait, others go on",
        ),
        pytest.param(
            ["h=1/1-a:b.gz", "h=1/2-a*b.gz"],
            ["h=1/1-a:b.gz", "h=1/2-a*b.gz"],
            {},
            id="a colon and a glob character in different names are both readable",
        ),
    ],
)
def test_hold_back_unreadable(
    paths: list[str], kept: list[str], unreadable: dict[str, str]
) -> None:
    assert hold_back_unreadable("/data/landing", paths) == (kept, unreadable)
