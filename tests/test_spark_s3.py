"""Spark reads and writes files on S3 without s3a: the fsspec data source (spark/fsspec_source.py)
behind spark/io.py, against Spark's own readers and writer on the same local files (the oracle),
and a whole file-path pipeline with its landing folder AND its Delta table on moto's S3."""

from __future__ import annotations

import gzip
import io as stdio
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from _landing import FROZEN_NOW
from _sensor_loop import SensorLoop
from conftest import event_records, pipeline_yaml, s3_project
from dagster import DagsterInstance
from deltalake import DeltaTable
from s3_server import SECRET_ACCESS_KEY

from watermark_assets import storage
from watermark_assets.config import FilePipelineConfig, parse_config
from watermark_assets.defs import build_definitions
from watermark_assets.spark import io
from watermark_assets.spark.fsspec_source import (
    SECRET_OPTION,
    FilesPartition,
    FsspecDataSource,
    FsspecWriter,
    escape_partition_value,
)
from watermark_assets.spark.paths import relative_to_root
from watermark_assets.staging import list_parquet

CORRUPT = "_corrupt_record"


# ---------------------------------------------------------------------------------- the reader


@dataclass(frozen=True)
class ReadCase:
    format: str
    schema: str | None
    files: dict[str, bytes]  # relative name -> content (what both readers are given)
    neighbours: dict[str, bytes]  # present next to them, never requested (a glob would read them)
    options: dict[str, str]
    corrupt: bool


def _parquet(table: pa.Table) -> bytes:
    out = stdio.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


READ_CASES = [
    pytest.param(
        ReadCase(
            "ndjson",
            "id BIGINT, name STRING",
            {
                "a b.json": b'{"id":1,"name":"x"}\n\n{"id":2,\n   \n{"id":"z","name":"y"}\r\n'
                b'{"id":5,"name":"\\u00e9"}',
                "c*.json.gz": gzip.compress(b'{"id":3,"name":"q"}\r{"id":4}\n'),
            },
            {"cXY.json.gz": gzip.compress(b'{"id":99}\n')},
            {},
            True,
        ),
        id="ndjson: malformed, mistyped and blank lines, CR/CRLF, gzip, a space and a star",
    ),
    pytest.param(
        ReadCase(
            "csv",
            "id BIGINT, name STRING",
            {
                "a b.csv": b'id,name\n1,x\nbad,y\n\n4,"q,r"\n3\n',
                "c*.csv": b"id,name\r\n7,z\r\n8,w,extra\r\n",
            },
            {"cXY.csv": b"id,name\n99,no\n"},
            {"header": "true"},
            True,
        ),
        id="csv with a header per file: a bad number, too few and too many fields, quotes",
    ),
    pytest.param(
        ReadCase(
            "parquet",
            "id BIGINT, name STRING, absent STRING",
            {
                "a b.parquet": _parquet(pa.table({"id": [1, 2], "name": ["x", None], "x": [0, 0]})),
                "c*.parquet": _parquet(pa.table({"NAME": ["q"], "id": pa.array([3], pa.int32())})),
            },
            {"cXY.parquet": _parquet(pa.table({"id": [99], "name": ["no"]}))},
            {},
            False,
        ),
        id="parquet: a column the schema lacks, one the file lacks, another case, int widened",
    ),
    pytest.param(
        ReadCase(
            "parquet",
            None,
            {"a b.parquet": _parquet(pa.table({"id": [1, 2], "name": ["x", None]}))},
            {},
            {},
            False,
        ),
        id="parquet without a schema: the footer's",
    ),
]


def _put_local(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _put_s3(root_uri: str, files: dict[str, bytes]) -> None:
    fs, root = storage.filesystem(root_uri)
    for name, data in files.items():
        fs.pipe_file(f"{root}/{name}", data)


def _rows(frame: Any, root: str) -> list[tuple[Any, ...]]:
    """The frame's rows, its file column as the path relative to ``root``, sorted."""
    from pyspark.sql import functions as F

    relative = relative_to_root(F.col("_file"), root).alias("_file")
    frame = frame.select(*[c for c in frame.columns if c != "_file"], relative)
    return sorted((tuple(r) for r in frame.collect()), key=repr)


@pytest.mark.parametrize("case", READ_CASES)
def test_the_fsspec_reader_gives_the_rows_of_sparks_own_reader(
    spark: Any, s3_storage: Any, tmp_path: Path, case: ReadCase
) -> None:
    local = tmp_path / "land ing"
    _put_local(local, {**case.files, **case.neighbours})
    bucket = s3_storage.new_bucket()
    remote = f"s3://{bucket}/land ing"
    _put_s3(remote, {**case.files, **case.neighbours})

    def read(root: str, via: str | None) -> list[tuple[Any, ...]]:
        frame = io.read_files(
            spark,
            [f"{root}/{name}" for name in case.files],
            format=case.format,
            schema=case.schema,
            options=case.options,
            corrupt_column=CORRUPT if case.corrupt else None,
            file_column="_file",
            via=via,
        )
        return _rows(frame, root)

    expected = read(str(local), "native")  # Spark's own reader: the oracle
    assert expected, "the oracle read no row: the case tests nothing"
    assert all(row[-1] in case.files for row in expected)
    assert read(str(local), "fsspec") == expected
    assert read(remote, None) == expected  # s3:// without s3a: fsspec picked


def test_which_path_reads_a_uri(spark: Any) -> None:
    assert io.is_native(spark, "/tmp/x") and io.is_native(spark, "file:///tmp/x")
    assert not io.is_native(spark, "s3://b/x") and not io.is_native(spark, "memory://x")
    spark.conf.set(io.NATIVE_S3_CONF, "true")
    try:
        assert io.is_native(spark, "s3://b/x") and io.is_native(spark, "s3a://b/x")
        assert not io.is_native(spark, "memory://x")
    finally:
        spark.conf.unset(io.NATIVE_S3_CONF)


@pytest.mark.parametrize("format", ["parquet", "ndjson", "csv"])
def test_no_files_read_through_fsspec_give_no_rows(spark: Any, format: str) -> None:
    """Spark reads one default partition when the source has none: it holds no files."""
    frame = io.read_files(spark, [], format=format, schema="id BIGINT", via="fsspec")
    assert frame.collect() == []
    assert frame.columns[0] == "id"


def test_an_undecodable_file_is_named_in_the_error(
    spark: Any, s3_storage: Any, tmp_path: Path
) -> None:
    from watermark_assets.spark.batch import ReadSpec, unreadable_file

    bucket = s3_storage.new_bucket()
    root = f"s3://{bucket}/landing"
    _put_s3(root, {"good.json.gz": gzip.compress(b'{"id":1}\n'), "bad b.json.gz": b"not gzip"})
    spec = ReadSpec(
        root, ["good.json.gz", "bad b.json.gz"], {}, "ndjson", "id BIGINT", {}, {}, [], "x"
    )
    frame = io.read_files(
        spark, [f"{root}/{f}" for f in spec.files], format="ndjson", schema="id BIGINT"
    )
    with pytest.raises(Exception) as raised:
        frame.collect()
    found = unreadable_file(raised.value, spec)
    assert found is not None and found.path == "bad b.json.gz"
    assert "gzip" in found.error.lower()


# ---------------------------------------------------------------------------------- the writer

PARTITION_VALUES = ["a b", "x*y", "s/l", "e=q", "p%c", "c:d", None, "", "é", "#h", "{b}", "^", "+"]


def _written(uri: str) -> tuple[dict[str, list[tuple[Any, ...]]], pa.Schema | None]:
    """{partition folder: sorted rows} of the Parquet files under ``uri`` and one footer's
    schema (without metadata)."""
    fs, root = storage.filesystem(uri)
    out: dict[str, list[tuple[Any, ...]]] = {}
    schema = None
    for path in sorted(fs.find(root)):
        if not path.endswith(".parquet"):
            continue
        folder = posixpath.dirname(path[len(root) :].lstrip("/"))
        with fs.open(path, "rb") as handle:
            table = pq.read_table(handle)
        schema = table.schema.remove_metadata()
        out.setdefault(folder, []).extend(tuple(r.values()) for r in table.to_pylist())
    return {k: sorted(v, key=repr) for k, v in out.items()}, schema


def _frame(spark: Any) -> Any:
    from pyspark.sql import functions as F

    rows = [(n, value, f"r{n}") for n, value in enumerate(PARTITION_VALUES)]
    frame = spark.createDataFrame(rows, "id BIGINT, p STRING, name STRING")
    return frame.withColumn("day", F.to_date(F.lit("2024-01-28"))).withColumn(
        "at", F.to_timestamp(F.lit("2024-01-28 10:00:00"))
    )


@pytest.mark.parametrize(
    "partition_by",
    [
        pytest.param(["p"], id="special values"),
        pytest.param([], id="unpartitioned"),
        pytest.param(["day", "p"], id="a date and a string"),
    ],
)
def test_the_fsspec_writer_lays_out_files_as_sparks_own_writer(
    spark: Any, s3_storage: Any, tmp_path: Path, partition_by: list[str]
) -> None:
    frame = _frame(spark).repartition(2)
    io.write_parquet(frame, str(tmp_path / "native"), partition_by=partition_by, via="native")
    expected = _written(str(tmp_path / "native"))
    assert sum(len(v) for v in expected[0].values()) == len(PARTITION_VALUES)
    io.write_parquet(frame, str(tmp_path / "fsspec"), partition_by=partition_by, via="fsspec")
    assert _written(str(tmp_path / "fsspec")) == expected
    remote = f"s3://{s3_storage.new_bucket()}/out dir"
    io.write_parquet(frame, remote, partition_by=partition_by)
    assert _written(remote) == expected


def test_partition_folders_are_escaped_as_spark_escapes_them() -> None:
    assert escape_partition_value(None) == "__HIVE_DEFAULT_PARTITION__"
    assert escape_partition_value("") == "__HIVE_DEFAULT_PARTITION__"
    assert escape_partition_value("a b/c=d%e:f*") == "a b%2Fc%3Dd%25e%3Af%2A"


def test_an_empty_frame_writes_one_empty_file_with_its_schema(
    spark: Any, s3_storage: Any, tmp_path: Path
) -> None:
    empty = _frame(spark).limit(0)
    io.write_parquet(empty, str(tmp_path / "native"), via="native")
    remote = f"s3://{s3_storage.new_bucket()}/empty"
    io.write_parquet(empty, remote)
    native, native_schema = _written(str(tmp_path / "native"))
    written, schema = _written(remote)
    assert written == native == {"": []}
    assert schema == native_schema and schema is not None and "at" in schema.names


def test_an_existing_folder_is_refused_with_the_fix(spark: Any, s3_storage: Any) -> None:
    remote = f"s3://{s3_storage.new_bucket()}/out"
    io.write_parquet(_frame(spark), remote)
    with pytest.raises(FileExistsError, match=r"already exists.*overwrite"):
        io.write_parquet(_frame(spark), remote)
    io.write_parquet(_frame(spark).limit(1), remote, mode="overwrite")
    assert sum(len(v) for v in _written(remote)[0].values()) == 1


def test_a_failed_write_leaves_no_file_of_its_job(spark: Any, s3_storage: Any) -> None:
    from pyspark.sql import functions as F

    frame = spark.range(0, 1000, numPartitions=4).withColumn(
        "v", F.when(F.col("id") == 999, F.raise_error(F.lit("boom"))).otherwise(F.col("id"))
    )
    remote = f"s3://{s3_storage.new_bucket()}/out"
    with pytest.raises(Exception, match="boom"):
        io.write_parquet(frame, remote)
    assert list_parquet(remote) == ()  # a late task's file could only be in _temporary/{job}


# ---------------------------------------------------------------------------------- secrets


def test_the_secret_is_in_no_plan_and_no_repr(
    spark: Any, s3_storage: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    bucket = s3_storage.new_bucket()
    _put_s3(f"s3://{bucket}/l", {"a.json": b'{"id":1}\n'})
    frame = io.read_files(spark, [f"s3://{bucket}/l/a.json"], format="ndjson", schema="id BIGINT")
    frame.explain(True)
    plan = capsys.readouterr().out
    assert "watermark_assets_fsspec" in plan  # the plan is the fsspec one
    assert SECRET_ACCESS_KEY not in plan
    settings = storage.portable_settings()
    assert SECRET_ACCESS_KEY in settings  # what travels holds it: the reprs must not show it
    source = FsspecDataSource({SECRET_OPTION: settings, "files": '["s3://b/a.json"]'})
    reader = source.reader(spark.createDataFrame([], "x STRING").schema)
    writer = FsspecWriter("s3://b/o", [], "job", "{}", "UTC", settings)
    shown = [repr(source), repr(reader), repr(writer), *map(repr, reader.partitions())]
    assert all(SECRET_ACCESS_KEY not in text for text in shown), shown
    assert isinstance(reader.partitions()[0], FilesPartition)


# ---------------------------------------------------------------------------------- a pipeline


def test_a_pipeline_with_landing_and_table_on_s3_commits_each_row_once(
    spark: Any, s3_server: Any, tmp_path: Path
) -> None:
    bucket = s3_server.new_bucket()
    raw = pipeline_yaml(
        tmp_path,
        source={"uri": f"s3://{bucket}/landing zone"},
        table={"uri": f"s3://{bucket}/lake/events"},
    )
    with s3_project(s3_server, raw) as config:
        pipeline = config.pipeline("events")
        assert isinstance(pipeline, FilePipelineConfig)
        landing = f"s3://{bucket}/landing zone"
        hour = "date=2024-01-28/hour=10"
        lines = [
            *(
                f'{{"id": {n}, "event_time": "2024-01-28T10:00:00Z", "name": "e{n}"}}'
                for n in (1, 2)
            ),
            "{not json",
        ]
        _put_s3(
            landing,
            {
                f"{hour}/1706436000-a b.ndjson.gz": gzip.compress("\n".join(lines).encode()),
                f"{hour}/1706436060-c*.ndjson": "\n".join(
                    __import__("json").dumps(r) for r in event_records(3, 3, FROZEN_NOW)
                ).encode(),
            },
        )
        loop = SensorLoop(
            build_definitions(config, clock=lambda: FROZEN_NOW), DagsterInstance.ephemeral()
        )
        _ingest(loop)
        table_uri = pipeline.table.uri
        options = storage.delta_options(table_uri)
        ids = (
            DeltaTable(table_uri, storage_options=options)
            .to_pyarrow_table(columns=["id", "_source_file"])
            .to_pylist()
        )
        assert sorted(r["id"] for r in ids) == [1, 2, 3, 4, 5]
        assert {r["_source_file"] for r in ids} == {
            f"{hour}/1706436000-a b.ndjson.gz",
            f"{hour}/1706436060-c*.ndjson",
        }
        quarantine = DeltaTable(pipeline.table.quarantine, storage_options=options)
        assert quarantine.to_pyarrow_table(columns=["raw_record"]).to_pylist() == [
            {"raw_record": "{not json"}
        ]
        version = DeltaTable(table_uri, storage_options=options).version()
        _ingest(loop)  # nothing new: nothing committed
        assert DeltaTable(table_uri, storage_options=options).version() == version
        fs, root = storage.filesystem(table_uri)
        assert not [p for p in fs.find(root) if "/_staging/" in p]


def _ingest(loop: SensorLoop) -> None:
    for _ in range(5):
        tick = loop.tick()
        if not tick.run_requests:
            return
        loop.run_all(tick.run_requests)
    raise AssertionError("the sensor kept requesting runs")


@pytest.mark.parametrize(
    ("landing", "conf", "refused"),
    [
        pytest.param("s3://b/landing", {}, True, id="s3 without s3a: refused"),
        pytest.param("s3://b/landing", {io.NATIVE_S3_CONF: "true"}, False, id="s3a: accepted"),
        pytest.param(None, {}, False, id="a local landing folder: accepted"),
    ],
)
def test_the_streaming_engine_needs_s3a_for_an_s3_landing_folder(
    tmp_path: Path, landing: str | None, conf: dict[str, str], refused: bool
) -> None:
    from test_event_time_pipeline import streaming

    from watermark_assets.exceptions import ConfigError

    pipelines = streaming(tmp_path)
    if landing is not None:
        pipelines[0]["source"]["uri"] = landing
    text = yaml.safe_dump({"spark": {"conf": conf}, "pipelines": pipelines})
    if not refused:
        parsed = parse_config(text, env={}, base=tmp_path, origin="x.yaml")
        assert parsed.event_time_pipelines[0].engine == "streaming"
        return
    with pytest.raises(ConfigError) as caught:
        parse_config(text, env={}, base=tmp_path, origin="x.yaml")
    for said in ("s3://b/landing", "use engine: batch", io.NATIVE_S3_CONF):
        assert said in str(caught.value)
