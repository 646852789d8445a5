"""A column added to a file pipeline's landing files is named, never dropped without a word.

With ``schema.mode: ignore`` a run keeps the rows' columns (``source.schema``, or Parquet
without one: the table's), and a landing file that gained one (``region``) says so: in the run's
``source/columns_ignored`` and ``schema/ignored_columns`` (from every file of the batch: Parquet
footers, CSV header lines, the keys of the first JSON records) and in the sensor's tick, which
reads the newest file of each batch it requests (no Spark in a tick): its text and the
observation ``files/columns_left_out``. (The default mode, fail, stops such a run:
tests/test_schema_policy.py.) One table of formats; a real Spark run, a real Delta table, the
real sensor on a Dagster instance.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _landing import FROZEN_NOW, delta_ids
from _sensor_loop import SensorLoop
from conftest import pipeline_yaml, project_config
from dagster import DagsterInstance
from deltalake import DeltaTable

from watermark_assets.defs import build_definitions
from watermark_assets.kinds.file_path.sensors import SensorCursor
from watermark_assets.sources.file_columns import (
    PROBE_BYTES,
    file_columns,
    left_out,
    sampled_layouts,
)

SCHEMA = "id BIGINT, event_time TIMESTAMP, name STRING"
STAMP = "2024-01-28T10:00:00Z"

#: Writes one landing file (folder, name without suffix, first id, with ``region`` or not).
Writer = Callable[[Path, str, int, bool], str]


def records(first: int, region: bool) -> list[dict[str, Any]]:
    return [
        {"id": i, "event_time": STAMP, "name": f"e{i}", **({"region": "eu"} if region else {})}
        for i in range(first, first + 3)
    ]


def write_ndjson(folder: Path, name: str, first: int, region: bool) -> str:
    lines = [json.dumps(r) for r in records(first, region)]
    (folder / f"{name}.ndjson").write_text("\n".join(lines) + "\n", "utf-8")
    return f"{name}.ndjson"


def write_csv(folder: Path, name: str, first: int, region: bool) -> str:
    """``region`` at the end (read by the header's names: left out, nothing quarantined)."""
    header = "id,event_time,name" + (",region" if region else "")
    lines = [
        f"{r['id']},{r['event_time']},{r['name']}" + (",eu" if region else "")
        for r in records(first, region)
    ]
    (folder / f"{name}.csv").write_text("\n".join([header, *lines]) + "\n", "utf-8")
    return f"{name}.csv"


def write_parquet(folder: Path, name: str, first: int, region: bool) -> str:
    fields = [("id", pa.int64()), ("event_time", pa.timestamp("us", tz="UTC"))]
    fields += [("region", pa.string())] if region else []
    fields += [("name", pa.string())]
    when = datetime(2024, 1, 28, 10, tzinfo=timezone.utc)
    rows = [r | {"event_time": when} for r in records(first, region)]
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema(fields)), folder / f"{name}.parquet")
    return f"{name}.parquet"


@dataclass(frozen=True)
class Format:
    format: str
    write: Writer
    schema: str | None = SCHEMA
    #: rows of the file that gained ``region`` the run quarantines (else: committed without it)
    quarantined: int = 0


FORMATS = [
    pytest.param(Format("ndjson", write_ndjson), id="JSON lines: a key the schema lacks"),
    pytest.param(Format("csv", write_csv), id="CSV: a header column the schema lacks"),
    pytest.param(Format("parquet", write_parquet), id="Parquet with source.schema"),
    pytest.param(
        Format("parquet", write_parquet, schema=None),
        id="Parquet without a schema: a column the table lacks",
    ),
]


@pytest.mark.spark
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_column_a_landing_file_gained_is_named_by_the_tick_and_the_run(
    spark: Any, tmp_path: Path, fmt: Format, capfd: pytest.CaptureFixture[str]
) -> None:
    landing = tmp_path / "landing"
    folder = landing / "date=2024-01-28" / "hour=10"
    folder.mkdir(parents=True)
    source = {"uri": str(landing), "format": fmt.format, "schema": fmt.schema}
    config = project_config(pipeline_yaml(tmp_path, source=source, schema={"mode": "ignore"}))
    loop = SensorLoop(
        build_definitions(config, clock=lambda: FROZEN_NOW), DagsterInstance.ephemeral()
    )

    # Run 1: the files' columns are the schema's (the table's): nothing left out.
    fmt.write(folder, "1706436000-000001", 1, False)
    first = loop.tick()
    (request,) = first.run_requests or []
    assert SensorCursor.from_string(first.cursor).columns_left_out == ()
    assert loop.run(request).success
    assert loop.metadata("2024-01-28")["source/columns_ignored"] == []

    # Run 2: an old-layout file, then one that gained `region`: the newest file of the batch
    # tells the tick; every file of the batch tells the run, whose rows leave it out.
    fmt.write(folder, "1706436060-000004", 4, False)
    fmt.write(folder, "1706436120-000007", 7, True)
    capfd.readouterr()
    second = loop.tick()
    said = capfd.readouterr().err  # the tick's log line (Dagster's console logger)
    assert (
        "columns the schema lacks: ['region'], in the newest file of 1 batch(es) requested: "
        "the runs leave them out (schema.mode ignore)"
    ) in said
    (request,) = second.run_requests or []
    (observation,) = [e for e in second.asset_events if e.partition is None]
    assert observation.metadata["files/columns_left_out"].value == ["region"]
    assert SensorCursor.from_string(second.cursor).columns_left_out == ("region",)
    assert loop.run(request).success
    metadata = loop.metadata("2024-01-28")
    assert metadata["source/columns_ignored"] == ["region"]
    assert metadata["schema/ignored_columns"] == ["region"]
    assert metadata["rows/quarantined"] == fmt.quarantined
    table = str(tmp_path / "delta" / "events")
    assert delta_ids(table) == list(range(1, 10 - fmt.quarantined))
    assert "region" not in [f.name for f in DeltaTable(table).schema().fields]


PROBES = [
    pytest.param("json", ['{"id": 1, "b": 2}', '{"id": 2, "c": 3}'], ("id", "b", "c"), id="json"),
    pytest.param("json", ["not json", '{"id": 1}'], ("id",), id="a malformed line is passed"),
    pytest.param("json", [""], None, id="an empty JSON file names nothing"),
    pytest.param("csv", ["", "# note", "id;name"], ("id", "name"), id="csv: first real line"),
]


@pytest.mark.parametrize(("format", "lines", "expected"), PROBES)
def test_a_files_columns_are_read_without_spark(
    tmp_path: Path, format: str, lines: list[str], expected: tuple[str, ...] | None
) -> None:
    path = tmp_path / f"f.{format}"
    path.write_text("\n".join(lines), "utf-8")
    options = {"header": "true", "sep": ";", "comment": "#"} if format == "csv" else None
    assert file_columns([str(path)], format, options) == [expected]


#: (format, the file's text, reader options, the sampled values per column)
SAMPLES = [
    pytest.param(
        "csv",
        "\n# note\nid;name\nx1;a\n;b\n2;\nNA;c\n3\n4;d;extra\n",
        {"header": "true", "sep": ";", "comment": "#", "nullValue": "NA"},
        {"id": ("x1", "2"), "name": ("a", "b", "c")},
        id="CSV: text after the header; empty and nullValue left out, rows of another width too",
    ),
    pytest.param(
        "csv",
        'id,name\n"1","a,b"\n2,"say \\"hi\\""\n',
        {"header": "true"},
        {"id": ("1", "2"), "name": ("a,b", 'say "hi"')},
        id="CSV: quotes and the reader's escape",
    ),
    pytest.param(
        "json",
        '{"id": "x1", "n": 1}\nnot json\n{"id": null, "n": 2.5}\n{"id": "", "b": true}\n',
        None,
        {"id": ("x1",), "n": (1, 2.5), "b": (True,)},
        id="JSON: values keep their JSON type; a malformed line is passed; null and empty left out",
    ),
]


@pytest.mark.parametrize(("format", "text", "options", "values"), SAMPLES)
def test_a_csv_or_json_files_first_values_are_sampled_without_spark(
    tmp_path: Path,
    format: str,
    text: str,
    options: dict[str, str] | None,
    values: dict[str, tuple[object, ...]],
) -> None:
    path = tmp_path / f"f.{format}.gz"
    path.write_bytes(gzip.compress(text.encode("utf-8")))  # decompressed by its suffix
    ((layout, sample),) = sampled_layouts([str(path)], format, options)
    assert layout == tuple((name, None) for name in values)
    assert sample is not None and sample.text is (format == "csv")
    assert dict(sample.values) == values


def test_only_the_records_in_the_first_probe_bytes_are_sampled(tmp_path: Path) -> None:
    """The records that start in the first PROBE_BYTES, each whole; a record cut at
    PROBE_BYTES of its own is left out (its cut value would read as another); a header is read
    whole, however long; the reader's nanValue is kept for doubles."""
    row = "1," + "y" * 90 + "\n"
    rows = PROBE_BYTES // len(row) + 5
    path = tmp_path / "long.csv"
    path.write_text("id,name\n" + row * rows, "utf-8")
    ((_, sample),) = sampled_layouts([str(path)], "csv", {"header": "true", "nanValue": "NA"})
    assert sample is not None
    starting = -(-(PROBE_BYTES - len("id,name\n")) // len(row))
    assert len(sample.values["id"]) == starting < rows
    assert set(sample.values["name"]) == {"y" * 90}
    assert sample.float_words == {"NA"}
    cut = tmp_path / "cut.ndjson"
    cut.write_text(json.dumps({"id": "x" * PROBE_BYTES}) + "\n" + '{"id": 1}\n', "utf-8")
    assert sampled_layouts([str(cut)], "json") == [(None, None)]  # as file_columns: none
    wide = tmp_path / "wide.csv"
    names = [f"column_{i}" for i in range(PROBE_BYTES // 8)]
    wide.write_text(",".join(names) + "\n" + ",".join("1" for _ in names) + "\n", "utf-8")
    ((layout, sample),) = sampled_layouts([str(wide)], "csv", {"header": "true"})
    assert layout == tuple((name, None) for name in names)
    assert sample is not None and not any(sample.values.values())  # no record in the probe


def test_a_broken_file_or_a_headerless_csv_names_no_column(tmp_path: Path) -> None:
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet")
    gone = str(tmp_path / "gone.ndjson.gz")
    assert file_columns([str(broken)], "parquet") == [None]
    assert file_columns([gone], "ndjson") == [None]
    assert file_columns([str(broken)], "csv", {"header": "false"}) == [None]


def test_left_out_is_case_insensitive_first_seen_first_and_skips_files_naming_none() -> None:
    found = [("ID", "Region"), None, ("region", "zone", "id")]
    assert left_out(found, ["id", "name"]) == ("Region", "zone")


#: What happens to a probed file before it is probed again, with the signature the listing gives
#: then (the same, or another) and whether the second probe reads the file.
AGAIN = [
    pytest.param("nothing", "same", False, False, id="unchanged: not read again"),
    pytest.param(
        "rewritten with region", "new", True, True, id="rewritten (new signature): read again"
    ),
    pytest.param("nothing", None, True, False, id="no signature: read every time"),
    pytest.param("readable again", "same", True, False, id="unreadable before: read again"),
]


@pytest.mark.parametrize(
    "write", [pytest.param(write_ndjson, id="json"), pytest.param(write_csv, id="csv")]
)
@pytest.mark.parametrize(("between", "signature", "read", "region"), AGAIN)
def test_a_file_probed_before_is_read_again_only_when_its_signature_changed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    write: Writer,
    between: str,
    signature: str | None,
    read: bool,
    region: bool,
) -> None:
    """The sensor's probe of a file's columns, kept per content signature in the process (a
    name with a space and a `*`)."""
    from watermark_assets.sources import file_columns as module

    fmt = "csv" if write is write_csv else "json"
    options = {"header": "true"} if fmt == "csv" else None
    name = write(tmp_path, "1706436000-north side*", 1, False)
    uri = str(tmp_path / name)
    if between == "readable again":  # it cannot be read (gone for a while): it says nothing
        (tmp_path / name).rename(tmp_path / "away")
        assert sampled_layouts([uri], fmt, options, signatures=["10:1.0"]) == [(None, None)]
        (tmp_path / "away").rename(tmp_path / name)
    else:
        sampled_layouts([uri], fmt, options, signatures=["10:1.0"])
    if between == "rewritten with region":
        write(tmp_path, "1706436000-north side*", 1, True)
    reads: list[str] = []
    sample = module._csv_sample if fmt == "csv" else module._json_sample

    def counted(at: str, lowered: Any) -> Any:
        reads.append(at)
        return sample(at, lowered)

    monkeypatch.setattr(module, f"_{fmt}_sample", counted)
    again = {"same": "10:1.0", "new": "12:2.0", None: None}[signature]
    ((layout, _),) = sampled_layouts([uri], fmt, options, signatures=[again])
    assert reads == ([uri] if read else [])
    assert layout is not None
    assert (("region", None) in layout) is region


def test_a_landing_file_rewritten_before_its_run_is_probed_again_by_the_next_tick(
    tmp_path: Path,
) -> None:
    """The tick's probe is kept per the listing's content signature: a file rewritten in place
    (it gained ``region``) before its run lists another, and the next tick names the column."""
    folder = tmp_path / "landing" / "date=2024-01-28" / "hour=10"
    folder.mkdir(parents=True)
    source = {"uri": str(tmp_path / "landing"), "format": "ndjson", "schema": SCHEMA}
    config = project_config(pipeline_yaml(tmp_path, source=source, schema={"mode": "ignore"}))
    loop = SensorLoop(
        build_definitions(config, clock=lambda: FROZEN_NOW), DagsterInstance.ephemeral()
    )
    write_ndjson(folder, "1706436000-north side*", 1, False)
    assert SensorCursor.from_string(loop.tick().cursor).columns_left_out == ()
    assert SensorCursor.from_string(loop.tick().cursor).columns_left_out == ()
    write_ndjson(folder, "1706436000-north side*", 1, True)
    assert SensorCursor.from_string(loop.tick().cursor).columns_left_out == ("region",)
