"""Column sources under bad input and changing files: no row lost, moved or hidden without a word.

One shared suite, a fixture per column source type (folders of Parquet, CSV and JSON-lines files),
each run the pipeline's Dagster job in process on a real Delta table (issue 22, items 1, 2, 6):

1. a malformed record (a JSON line cut short) is quarantined, counted, never silently dropped;
2. a value that does not parse to the declared type (``qty`` becomes ``"seven"``) is quarantined,
   never committed as NULL; a CSV header that gains a column in the middle is read by NAME;
3. a column added to the source (``region``, in the middle; a JSON key too) stops the run under
   ``schema.mode: fail`` (the default), naming its file; under ``ignore`` it is left out and
   reported in the run's metadata (``source/columns_ignored``) (every mode:
   tests/test_column_schema_modes.py);
4. exactly once: a run over the same files again reads nothing, and quarantines nothing again.

The three runs of a source share one pipeline (few Spark jobs; the one Spark session of the tests).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import project_config
from dagster import DagsterInstance
from deltalake import DeltaTable

from watermark_assets.defs import build_definitions
from watermark_assets.exceptions import SchemaChangeError

pytestmark = pytest.mark.spark

BASE = datetime(2026, 4, 3, 9, 0, tzinfo=timezone.utc)
NOW = datetime(2026, 4, 3, 12, 0, tzinfo=timezone.utc)
SCHEMA = "id BIGINT, updated_at TIMESTAMP, qty BIGINT"


def row(i: int) -> dict[str, Any]:
    return {"id": i, "updated_at": BASE + timedelta(minutes=i), "qty": 10 * i}


def stamp(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


#: Writes one source file: (folder, name, rows, extra column ``region`` in the middle or not,
#: raw lines to add to a text file: a malformed one, a value of the wrong type).
Writer = Callable[[Path, str, list[dict[str, Any]], bool, list[str]], None]


def write_parquet(
    folder: Path, name: str, rows: list[dict[str, Any]], region: bool, bad: list[str]
) -> None:
    assert not bad  # a Parquet file holds typed values: no malformed record to write
    fields = [("id", pa.int64()), ("updated_at", pa.timestamp("us", tz="UTC"))]
    fields += [("region", pa.string())] if region else []
    fields += [("qty", pa.int64())]
    records = [{**r, "region": "eu"} if region else r for r in rows]
    pq.write_table(pa.Table.from_pylist(records, schema=pa.schema(fields)), folder / f"{name}.pq")


def write_csv(
    folder: Path, name: str, rows: list[dict[str, Any]], region: bool, bad: list[str]
) -> None:
    header = "id,region,updated_at,qty" if region else "id,updated_at,qty"
    lines = [
        f"{r['id']},eu,{stamp(r['updated_at'])},{r['qty']}"
        if region
        else f"{r['id']},{stamp(r['updated_at'])},{r['qty']}"
        for r in rows
    ]
    (folder / f"{name}.csv").write_text("\n".join([header, *lines, *bad]) + "\n", "utf-8")


def write_json(
    folder: Path, name: str, rows: list[dict[str, Any]], region: bool, bad: list[str]
) -> None:
    lines = [
        json.dumps(
            {"id": r["id"], **({"region": "eu"} if region else {}), "qty": r["qty"]}
            | {"updated_at": stamp(r["updated_at"])}
        )
        for r in rows
    ]
    (folder / f"{name}.json").write_text("\n".join([*lines, *bad]) + "\n", "utf-8")


@dataclass(frozen=True)
class SourceType:
    """A column source type: how its files are written and configured, and what it can hold."""

    type: str
    write: Writer
    #: a malformed record and a record whose qty is not a number (text formats only)
    malformed: str | None
    wrong_type: str | None
    #: read through the fsspec data source (any URI Hadoop cannot read, e.g. s3:// without
    #: hadoop-aws), forced here on local files; else Spark's own readers
    fsspec: bool = False

    @property
    def id(self) -> str:
        return f"{self.type} via fsspec" if self.fsspec else self.type


SOURCES = [
    SourceType("parquet", write_parquet, None, None),
    SourceType(
        "csv",
        write_csv,
        None,  # a CSV line too short is padded with NULLs by every CSV reader: not malformed
        f"98,{stamp(BASE)},seven",
    ),
    SourceType(
        "json",
        write_json,
        '{"id": 97, "updated_at": "2026-04-03T09:00:00Z", "qty": 9',
        json.dumps({"id": 98, "updated_at": stamp(BASE), "qty": "seven"}),
    ),
]


SOURCES += [replace(s, fsspec=True) for s in SOURCES if s.type != "parquet"]


@pytest.fixture(params=SOURCES, ids=lambda s: s.id)
def source(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> SourceType:
    value: SourceType = request.param
    if value.fsspec:
        from watermark_assets.spark import io

        monkeypatch.setattr(io, "is_native", lambda spark, uri: False)
    return value


class Pipeline:
    """A column pipeline ``orders`` over a folder of ``source``'s files."""

    def __init__(self, tmp_path: Path, source: SourceType) -> None:
        self.folder = tmp_path / "source"
        self.folder.mkdir()
        self.source = source
        config: dict[str, Any] = {"type": source.type, "uri": str(self.folder)}
        if source.type != "parquet":
            config["schema"] = SCHEMA
        self.table = str(tmp_path / "delta" / "orders")
        self.raw = {
            "name": "orders",
            "source": config,
            "watermark": {"columns": ["updated_at", "id"]},
            "table": {"uri": self.table},
        }
        self.defs = build_definitions(project_config(self.raw), clock=lambda: NOW)
        self.instance = DagsterInstance.ephemeral()

    def under_mode(self, mode: str) -> None:
        """The same pipeline (same table and Dagster instance) under ``schema.mode``."""
        self.raw["schema"] = {"mode": mode}
        self.defs = build_definitions(project_config(self.raw), clock=lambda: NOW)

    def write(self, name: str, ids: range, *, region: bool = False, bad: list[str]) -> None:
        self.source.write(self.folder, name, [row(i) for i in ids], region, bad)

    def run(self) -> dict[str, Any]:
        job = self.defs.resolve_job_def("orders_job")
        result = job.execute_in_process(instance=self.instance)
        (materialization,) = result.asset_materializations_for_node("orders")
        checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
        assert all(checks.values()), checks
        return {key: value.value for key, value in materialization.metadata.items()}

    def target(self) -> list[dict[str, Any]]:
        rows = DeltaTable(self.table).to_pyarrow_table(columns=["id", "updated_at", "qty"])
        return sorted(rows.to_pylist(), key=lambda r: r["id"])

    def quarantined(self) -> list[str]:
        return sorted(self.quarantine_errors())

    def quarantine_errors(self) -> dict[str, str]:
        """``{raw record: error}`` of the quarantine table."""
        uri = self.table + "_quarantine"
        if not Path(uri).exists():
            return {}
        records = DeltaTable(uri).to_pyarrow_table(columns=["raw_record", "error"]).to_pylist()
        return {r["raw_record"]: r["error"] for r in records}


def test_a_column_source_quarantines_bad_records_reads_by_name_and_reports_added_columns(
    spark: Any, tmp_path: Path, source: SourceType
) -> None:
    pipeline = Pipeline(tmp_path, source)
    bad = [b for b in (source.malformed, source.wrong_type) if b is not None]

    # Run 1: five good rows, and (text formats) a malformed line and a qty that is no number.
    pipeline.write("a", range(0, 5), bad=bad)
    first = pipeline.run()
    assert first["rows/read"] == 5
    assert first["rows/quarantined"] == len(bad)
    assert pipeline.quarantined() == sorted(bad)
    if source.wrong_type is not None:  # the error names the column that did not parse
        assert pipeline.quarantine_errors()[source.wrong_type].endswith("NULL after parsing: qty")
    assert first.get("source/columns_ignored") == []

    # Run 2: a file whose rows gained `region` in the middle. Under `schema.mode: fail` (the
    # default) the run stops naming the file and the column, and commits nothing.
    pipeline.write("0-newer", range(5, 8), region=True, bad=[])
    version = DeltaTable(pipeline.table).version()
    with pytest.raises(SchemaChangeError, match=r"0-newer.*'region'"):
        pipeline.run()
    assert DeltaTable(pipeline.table).version() == version
    # Under `ignore`: read by name, the column left out and reported. Its name sorts before the
    # first file's: the columns read stay the oldest file's.
    pipeline.under_mode("ignore")
    second = pipeline.run()
    assert second["rows/read"] == 3
    assert second["rows/quarantined"] == 0
    assert second.get("source/columns_ignored") == ["region"]  # a JSON key too
    assert pipeline.target() == [row(i) for i in range(8)]  # no NULL, no value in a wrong column

    # Run 3, same files: nothing read, nothing quarantined again.
    third = pipeline.run()
    assert (third["rows/read"], third["rows/quarantined"]) == (0, 0)
    assert pipeline.quarantined() == sorted(bad)
    assert pipeline.target() == [row(i) for i in range(8)]


def test_a_time_pipeline_over_a_json_source_quarantines_a_malformed_line_once_for_all_windows(
    spark: Any, tmp_path: Path
) -> None:
    """Each window reads the whole folder; the line is quarantined by the first window's read,
    and neither the second window nor a re-run of both quarantines it again."""
    folder = tmp_path / "source"
    folder.mkdir()
    days = [row(i) | {"updated_at": BASE + timedelta(days=d)} for d, i in ((0, 1), (1, 2))]
    broken = '{"id": 3, "updated_at": '
    write_json(folder, "a", days, False, [broken])
    table = str(tmp_path / "delta" / "orders")
    raw = {
        "name": "orders",
        "source": {"type": "json", "uri": str(folder), "schema": SCHEMA},
        "watermark": {"kind": "time", "column": "updated_at", "from": "2026-04-03"},
        "table": {"uri": table},
    }
    defs = build_definitions(project_config(raw), clock=lambda: NOW + timedelta(days=3))
    instance = DagsterInstance.ephemeral()
    job = defs.resolve_job_def("orders_job")
    tags = {
        "dagster/asset_partition_range_start": "2026-04-03",
        "dagster/asset_partition_range_end": "2026-04-04",
    }
    for quarantined in (1, 0):  # the range, then the same range again
        result = job.execute_in_process(instance=instance, tags=tags)
        materialization = result.asset_materializations_for_node("orders")[0]  # one a day
        metadata = {key: value.value for key, value in materialization.metadata.items()}
        assert (metadata["rows/read"], metadata["rows/quarantined"]) == (2, quarantined)
        assert metadata["quarantine/table"] == table + "_quarantine"
    rows = DeltaTable(table + "_quarantine").to_pyarrow_table().to_pylist()
    assert [(r["_source_file"], r["raw_record"]) for r in rows] == [("a.json", broken)]
    assert sorted(DeltaTable(table).to_pyarrow_table(columns=["id"])["id"].to_pylist()) == [1, 2]


def test_a_delta_source_that_gained_a_column_stops_the_run_naming_it_and_commits_nothing(
    spark: Any, tmp_path: Path
) -> None:
    """The Delta counterpart of ``source/columns_ignored``: the table's schema is in its log, so
    the run (``schema.mode: fail``, the default) refuses the new column before anything is
    staged, instead of dropping it (the other modes: tests/test_column_schema_modes.py)."""
    from deltalake import write_deltalake

    source, table = str(tmp_path / "source"), str(tmp_path / "delta" / "orders")
    typed = pa.schema([("id", pa.int64()), ("updated_at", pa.timestamp("us", tz="UTC"))])
    write_deltalake(
        source,
        pa.Table.from_pylist([row(0), row(1)], schema=typed.append(pa.field("qty", pa.int64()))),
    )
    raw = {
        "name": "orders",
        "source": {"type": "delta_table", "uri": source},
        "watermark": {"columns": ["updated_at", "id"]},
        "table": {"uri": table},
    }
    defs = build_definitions(project_config(raw), clock=lambda: NOW)
    instance = DagsterInstance.ephemeral()
    job = defs.resolve_job_def("orders_job")
    assert job.execute_in_process(instance=instance).success
    wider = typed.append(pa.field("region", pa.string())).append(pa.field("qty", pa.int64()))
    added = pa.Table.from_pylist([row(2) | {"region": "eu"}], schema=wider)
    write_deltalake(source, added, mode="append", schema_mode="merge")

    with pytest.raises(SchemaChangeError, match="'region'"):
        job.execute_in_process(instance=instance)
    assert DeltaTable(table).version() == 0  # nothing committed


@pytest.mark.slow
def test_a_run_killed_between_its_quarantine_commit_and_its_data_commit_quarantines_once(
    spark: Any, tmp_path: Path
) -> None:
    """``after_data_written``: the rows are staged and the malformed line is committed to the
    quarantine, the data commit is not made. The re-run commits the rows, and finds the line in
    the quarantine already: once in each table."""
    import os
    import signal
    import subprocess
    import sys

    import yaml
    from conftest import TEST_SPARK_CONF

    from watermark_assets.runs.faults import CRASH_ENV_VAR

    source = next(s for s in SOURCES if s.type == "json" and not s.fsspec)
    pipeline = Pipeline(tmp_path, source)
    assert source.malformed is not None
    pipeline.write("a", range(0, 5), bad=[source.malformed])
    config = tmp_path / "pipelines.yaml"
    spark_config = {"master": "local[1]", "conf": TEST_SPARK_CONF}
    config.write_text(yaml.safe_dump({"spark": spark_config, "pipelines": [pipeline.raw]}))
    tests = Path(__file__).resolve().parent
    env = {
        **os.environ,
        "WATERMARK_ASSETS_CONFIG": str(config),
        CRASH_ENV_VAR: "after_data_written",
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join([str(tests.parent), str(tests)]),
    }
    killed = subprocess.run(
        [sys.executable, str(tests / "_crash_run.py"), "orders", "-"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert pipeline.quarantined() == [source.malformed]
    assert not (Path(pipeline.table) / "_delta_log").exists()  # staged only, no commit

    rerun = pipeline.run()
    assert (rerun["rows/read"], rerun["rows/quarantined"]) == (5, 0)
    assert pipeline.quarantined() == [source.malformed]
    assert pipeline.target() == [row(i) for i in range(5)]
