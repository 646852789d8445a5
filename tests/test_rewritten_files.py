"""A landing file rewritten in place after it was ingested (same name, new rows) is named, never
silently "ingested" (issue 21, item 5).

Each commit records the size and modification time (the ETag on S3) of every file it ingested;
the pipeline's checkpoint keeps them for the retained landing partitions, so they survive the
Delta log's cleanup. The sensor's listing returns the same details anyway: a committed file
listed with other ones is named by the sensor's skip text, its asset observation and ``explain``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from _crash_run import main as run_main
from _landing import FROZEN_NOW, Landing, checkpoint_json, delta_ids, hour, table_version
from _sensor_loop import SensorLoop, requested_files
from conftest import (
    TEST_SPARK_CONF,
    event_records,
    pipeline_yaml,
    project_config,
    s3_project,
    write_ndjson,
)
from dagster import DagsterInstance
from dagster._core.definitions.sensor_definition import SensorExecutionData
from maintenance import checkpoint_and_clean

from watermark_assets import storage
from watermark_assets.config import FilePipelineConfig
from watermark_assets.defs import build_definitions
from watermark_assets.defs.partitions import partition_mapper, partitions_definition
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.exceptions import ConfigError
from watermark_assets.explain import explain_all, explain_file, gather_evidence
from watermark_assets.kinds.file_path.assets import files_run_config
from watermark_assets.runs.faults import CRASH_ENV_VAR
from watermark_assets.sources.file_discovery import rewritten_files
from watermark_assets.sources.late_files import find_late_files
from watermark_assets.state.commit_metadata import CommitMetadata, pipeline_commits
from watermark_assets.state.load import load_state, watermark_of
from watermark_assets.verdicts import Evidence, Verdict

TESTS = Path(__file__).parent

#: a landing name with a space and a '*' (Spark reads it literally: no ':' with it)
ODD_NAME = "date=2024-01-28/hour=10/1706437500-a b*.ndjson.gz"


@dataclass
class Scene:
    """Three files of one hour ingested: ``rewritten`` and ``odd`` (a space and a '*' in its
    name) then rewritten in place with other rows, ``unchanged`` left alone."""

    pipeline: FilePipelineConfig
    loop: SensorLoop
    landing: Landing
    paths: dict[str, str]

    def evidence(self) -> Evidence:
        partition_of = partition_mapper(partitions_definition(self.pipeline), lambda: FROZEN_NOW)
        return gather_evidence(self.pipeline, partition_of, now=FROZEN_NOW)

    def rewrite(self, role: str, *, rows: int, first: int = 900) -> None:
        """Write other rows (ids from ``first``) under the same name, a later mtime."""
        path = self.landing.root / self.paths[role]
        before = path.stat().st_mtime
        records = event_records(first, rows, hour(28, 10))
        write_ndjson(self.landing.root, self.paths[role], records)
        os.utime(path, (before + 60, before + 60))


def ingest(loop: SensorLoop) -> None:
    for _ in range(3):
        requests = loop.tick().run_requests
        if not requests:
            return
        loop.run_all(requests)


def build_scene(folder: Path, **overrides: Any) -> Scene:
    document = pipeline_yaml(folder, **overrides)
    (folder / "landing").mkdir()
    config = project_config(document)
    pipeline = config.pipeline("events")
    assert isinstance(pipeline, FilePipelineConfig)
    loop = SensorLoop(
        build_definitions(config, clock=lambda: FROZEN_NOW), DagsterInstance.ephemeral()
    )
    landing = Landing(folder / "landing")
    paths = {
        "rewritten": landing.add(hour(28, 10)),
        "unchanged": landing.add(hour(28, 10), minute=10),
    }
    write_ndjson(landing.root, ODD_NAME, event_records(500, 2, hour(28, 10)))
    paths["odd"] = ODD_NAME
    ingest(loop)
    return Scene(pipeline, loop, landing, paths)


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Scene:
    """The scene with ``on_rewrite`` left at its default (``report``), files rewritten."""
    scene = build_scene(tmp_path_factory.mktemp("reported"))
    scene.rewrite("rewritten", rows=5)
    scene.rewrite("odd", rows=4)
    return scene


@pytest.mark.spark
def test_each_commit_records_the_size_and_modification_time_of_its_files(
    reported: Scene,
) -> None:
    signatures = checkpoint_json(reported.pipeline)["file_signatures"]
    assert sorted(signatures) == sorted(reported.paths.values())
    path = reported.landing.root / reported.paths["unchanged"]
    stat = path.stat()
    assert signatures[reported.paths["unchanged"]].startswith(f"{stat.st_size}:")


@pytest.mark.spark
def test_the_sensor_names_the_rewritten_files_in_its_skip_text_and_observation(
    reported: Scene,
) -> None:
    tick = reported.loop.tick()
    assert not tick.run_requests, "report: nothing is ingested again"
    text = tick.skip_message or ""
    assert "2 committed files were rewritten in place" in text, text
    assert reported.paths["rewritten"] in text and ODD_NAME in text, text
    assert reported.paths["unchanged"] not in text, text
    [observation] = [e for e in tick.asset_events if e.partition is None]
    metadata = {k: v.value for k, v in observation.metadata.items()}
    assert metadata["files/rewritten"] == 2
    assert metadata["files/rewritten_first"] == sorted(
        [reported.paths["rewritten"], reported.paths["odd"]]
    )


@pytest.mark.spark
@pytest.mark.parametrize(
    ("role", "verdict"),
    [
        pytest.param("rewritten", Verdict.REWRITTEN, id="a rewritten file is 'rewritten'"),
        pytest.param("odd", Verdict.REWRITTEN, id="a name with a space and a star too"),
        pytest.param("unchanged", Verdict.INGESTED, id="an unchanged file stays 'ingested'"),
    ],
)
def test_explain_names_a_committed_file_whose_content_changed(
    reported: Scene, role: str, verdict: Verdict
) -> None:
    evidence = reported.evidence()
    found = explain_file(evidence, reported.paths[role])
    assert found.verdict is verdict, found.reason
    if verdict is Verdict.REWRITTEN:
        assert "rewritten in place" in found.reason
        assert found.facts["signature_committed"] != found.facts["signature_now"]
    listed = explain_all(evidence).groups.get(Verdict.REWRITTEN, ())
    assert (reported.paths[role] in {e.path for e in listed}) == (verdict is Verdict.REWRITTEN)


@pytest.mark.spark
def test_a_rewrite_is_still_named_after_the_commits_were_cleaned_from_the_log(
    tmp_path: Path,
) -> None:
    scene = build_scene(tmp_path)
    checkpoint_and_clean(scene.pipeline.table.uri)
    scene.rewrite("rewritten", rows=1)
    text = scene.loop.tick().skip_message or ""
    assert f"first {[scene.paths['rewritten']]}" in text, text
    found = explain_file(scene.evidence(), scene.paths["rewritten"])
    assert found.verdict is Verdict.REWRITTEN, found.reason


REWRITE_CASES = [
    pytest.param({"a": "10:1"}, {"a": "10:1"}, (), id="the same size and mtime: not rewritten"),
    pytest.param({"a": "10:1"}, {"a": "11:1"}, ("a",), id="another size: rewritten"),
    pytest.param({"a": "10:1"}, {"a": "10:2"}, ("a",), id="another mtime or ETag: rewritten"),
    pytest.param({}, {"a": "10:1"}, (), id="no recorded signature: never named"),
]


@pytest.mark.parametrize(("committed", "listed", "expected"), REWRITE_CASES)
def test_which_listed_files_are_rewritten(
    committed: dict[str, str], listed: dict[str, str], expected: tuple[str, ...]
) -> None:
    assert rewritten_files(listed, committed) == expected


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        pytest.param({"size": 10, "mtime": 1.5}, "10:1.5", id="a local file: size and mtime"),
        pytest.param({"size": 10, "ETag": '"abc"', "mtime": 1.5}, "10:abc", id="S3: the ETag"),
        pytest.param({"Size": 10, "ETag": '"abc"'}, "10:abc", id="a ListObjectsV2 item"),
        pytest.param({"size": 10}, None, id="neither: unknown"),
    ],
)
def test_the_content_signature_of_a_listing_entry(
    entry: dict[str, Any], expected: str | None
) -> None:
    assert storage.content_signature(entry) == expected


# --- on_rewrite: replace ------------------------------------------------------------------------


def table_ids(scene: Scene) -> list[int]:
    return sorted(delta_ids(scene.pipeline.table.uri))


def ids_of(first: int, rows: int) -> list[int]:
    return list(range(first, first + rows))


def rewrite_commits(scene: Scene) -> list[tuple[int, CommitMetadata]]:
    """The pipeline's rewrite commits, with their versions."""
    commits = pipeline_commits(DeltaCommitter(scene.pipeline.table.uri), scene.pipeline, None)
    return [(v, m) for v, m in commits if m.rows_replaced is not None]


def replace_by_sensor(scene: Scene) -> list[str]:
    """One tick, its runs executed; the files its rewrite runs named."""
    requests = scene.loop.tick().run_requests
    for request in requests:
        assert scene.loop.run(request).success
    return [path for r in requests for path in requested_files(r)]


@pytest.fixture
def replacing(spark: Any, tmp_path: Path) -> Scene:
    """The scene with ``on_rewrite: replace``: ids 1-3 in ``rewritten``, 4-6 in ``unchanged``,
    500-501 in ``odd``."""
    return build_scene(tmp_path, on_rewrite="replace")


@pytest.mark.spark
@pytest.mark.parametrize("role", ["rewritten", "odd"], ids=["a file", "a name with ' ' and '*'"])
def test_replace_removes_the_old_rows_and_adds_the_new_ones_once_in_one_commit(
    replacing: Scene, role: str
) -> None:
    before = table_ids(replacing)
    old = {"rewritten": ids_of(1, 3), "odd": ids_of(500, 2)}[role]
    version = table_version(replacing.pipeline.table.uri)
    replacing.rewrite(role, rows=4)

    assert replace_by_sensor(replacing) == [replacing.paths[role]]

    expected = sorted([*(i for i in before if i not in old), *ids_of(900, 4)])
    assert table_ids(replacing) == expected, "old rows gone, new rows in, once"
    assert table_version(replacing.pipeline.table.uri) == version + 1, "ONE commit"
    [(_, commit)] = rewrite_commits(replacing)
    assert commit.source_files == (replacing.paths[role],)
    assert commit.rows_replaced == len(old) and commit.rows_committed == 4
    assert not replace_by_sensor(replacing), "replaced: no longer rewritten"
    assert "rewritten" not in (replacing.loop.tick().skip_message or "")
    found = explain_file(replacing.evidence(), replacing.paths[role])
    assert found.verdict is Verdict.INGESTED, found.reason


@pytest.mark.spark
def test_a_file_rewritten_twice_is_replaced_twice_and_an_unchanged_file_never(
    replacing: Scene,
) -> None:
    replacing.rewrite("rewritten", rows=4)
    assert replace_by_sensor(replacing) == [replacing.paths["rewritten"]]
    replacing.rewrite("rewritten", rows=2, first=950)
    assert replace_by_sensor(replacing) == [replacing.paths["rewritten"]]

    assert table_ids(replacing) == sorted([*ids_of(4, 3), *ids_of(500, 2), *ids_of(950, 2)])
    assert [m.source_files for _, m in rewrite_commits(replacing)] == [
        (replacing.paths["rewritten"],)
    ] * 2
    rows = load_state(replacing.pipeline, now=FROZEN_NOW).partition_rows
    assert sum(rows.values()) == len(table_ids(replacing)), "row counts follow the replaces"


@pytest.mark.spark
def test_a_rewrite_run_of_an_unchanged_file_replaces_nothing(replacing: Scene) -> None:
    version = table_version(replacing.pipeline.table.uri)
    result = replacing.loop.job.execute_in_process(
        instance=replacing.loop.instance,
        partition_key="2024-01-28",
        run_config=files_run_config("events", [replacing.paths["unchanged"]], rewrite=True),
    )
    assert result.success
    assert table_version(replacing.pipeline.table.uri) == version
    assert not rewrite_commits(replacing)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize(
    "crash_at",
    [
        pytest.param("after_data_written", id="killed after Spark wrote the new rows"),
        pytest.param("after_commit", id="killed after the replace commit, before the checkpoint"),
    ],
)
def test_a_replace_killed_mid_way_and_run_again_replaces_exactly_once(
    replacing: Scene, tmp_path: Path, crash_at: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "pipelines.yaml"
    document = pipeline_yaml(tmp_path, on_rewrite="replace")
    config.write_text(
        yaml.safe_dump(
            {"spark": {"master": "local[2]", "conf": TEST_SPARK_CONF}, "pipelines": [document]}
        ),
        encoding="utf-8",
    )
    replacing.rewrite("rewritten", rows=4)
    path = replacing.paths["rewritten"]
    env = {
        **os.environ,
        "WATERMARK_ASSETS_CONFIG": str(config),
        CRASH_ENV_VAR: crash_at,
        "PYSPARK_PYTHON": sys.executable,
    }
    command = [sys.executable, str(TESTS / "_crash_run.py"), "events", "2024-01-28", "--rewrite"]
    crashed = subprocess.run(
        [*command, path], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert crashed.returncode == -9, crashed.stderr

    # The same run again (a re-execution: the same command's code and configuration), in THIS
    # process on the shared Spark session: the killed process is gone, and all a re-execution
    # can know of it is on disk (a fresh process would only add a Python and JVM start, ~10
    # CPU-s). Then the sensor.
    monkeypatch.setenv("WATERMARK_ASSETS_CONFIG", str(config))
    assert run_main(["events", "2024-01-28", "--rewrite", path]) == 0
    assert replace_by_sensor(replacing) == [], "replaced: the sensor names it no more"

    expected = sorted([*ids_of(4, 3), *ids_of(500, 2), *ids_of(900, 4)])
    assert table_ids(replacing) == expected
    assert len(rewrite_commits(replacing)) == 1


# --- files committed before their signatures were recorded: a signature at first sight -----------


def without_recorded_signatures(scene: Scene) -> None:
    """The checkpoint as one written before the signatures were recorded (or by repair-state),
    and the log cleaned: no signature of any committed file is known."""
    checkpoint_and_clean(scene.pipeline.table.uri)
    location = Path(scene.pipeline.checkpoint_uri)
    document = json.loads(location.read_text(encoding="utf-8"))
    del document["file_signatures"]
    location.write_text(json.dumps(document), encoding="utf-8")
    assert not load_state(scene.pipeline, now=FROZEN_NOW).file_signatures


def sweep(scene: Scene) -> SensorExecutionData:
    """A tick whose sweep is due (the scene's clock stands still: its cursor forgets the last)."""
    cursor = json.loads(scene.loop.cursor or "{}")
    scene.loop.cursor = json.dumps({**cursor, "swept_at": None})
    return scene.loop.tick()


@pytest.mark.spark
def test_committed_files_with_no_recorded_signature_get_one_at_the_sweeps_first_sight(
    tmp_path: Path,
) -> None:
    """The sweep lists the partitions whose committed files the state has no signature of, and
    records the signatures of the files the table's lineage proves committed; a later rewrite
    is named. A rewrite before that first sight cannot be told (its content is what is seen)."""
    scene = build_scene(tmp_path)
    without_recorded_signatures(scene)
    scene.rewrite("odd", rows=4)  # before the first sight: not told

    assert "rewritten" not in (sweep(scene).skip_message or "")
    recorded = checkpoint_json(scene.pipeline)["file_signatures"]
    assert sorted(recorded) == sorted(scene.paths.values()), "every committed file, first seen"
    assert recorded == storage.file_signatures(scene.pipeline.source.uri, list(recorded))

    scene.rewrite("rewritten", rows=5)
    text = scene.loop.tick().skip_message or ""
    assert f"first {[scene.paths['rewritten']]}" in text, text
    found = explain_file(scene.evidence(), scene.paths["rewritten"])
    assert found.verdict is Verdict.REWRITTEN, found.reason


# --- S3: the ETag tells a rewrite of the same size apart ----------------------------------------


def test_on_s3_a_rewrite_of_the_same_size_is_found_by_the_sweeps_full_listing(
    s3_server: Any, tmp_path: Path
) -> None:
    """On S3 the regular listing starts after each partition's watermark (it never returns the
    committed files); the sweep lists those partitions in full, and its listing's ETags name
    the rewrite, at no extra request."""
    bucket = s3_server.new_bucket()
    client = s3_server.client()
    key = "landing/date=2024-01-28/hour=10/1706436000-000001.ndjson"
    client.put_object(Bucket=bucket, Key=key, Body=b'{"id": 1}\n')
    document = pipeline_yaml(tmp_path)
    document["source"] = {**document["source"], "uri": f"s3://{bucket}/landing"}
    with s3_project(s3_server, document) as config:
        pipeline = config.pipeline("events")
        assert isinstance(pipeline, FilePipelineConfig)
        path = key.removeprefix("landing/")
        watermark = watermark_of([path])
        committed = dict(storage.file_signatures(pipeline.source.uri, [path]))
        client.put_object(Bucket=bucket, Key=key, Body=b'{"id": 2}\n')  # same size

        listed: dict[str, str] = {}
        find_late_files(
            pipeline,
            watermark,
            ["date=2024-01-28/hour=10"],
            {"date=2024-01-28/hour=10": 1},
            table_files=None,
            signatures=listed,
        )
        assert rewritten_files(listed, committed) == (path,)
        assert listed[path].split(":")[0] == committed[path].split(":")[0], "the same size"


@pytest.mark.spark
def test_on_s3_a_tick_names_a_rewrite_and_replaces_it_as_on_a_local_disk(
    spark: Any, s3_server: Any, tmp_path: Path
) -> None:
    """A tick lists a landing partition that holds fewer committed files than one
    ListObjectsV2 page in full (the one request StartAfter costs anyway): the listing's ETag
    names a committed file rewritten in place at the next tick, with no sweep due, as on a
    local disk; ``explain`` names it too, and ``on_rewrite: replace`` replaces its rows."""
    landing_uri = f"s3://{s3_server.new_bucket()}/landing"
    raw = pipeline_yaml(tmp_path, source={"uri": landing_uri}, on_rewrite="replace")
    with s3_project(s3_server, raw) as config:
        pipeline = config.pipeline("events")
        assert isinstance(pipeline, FilePipelineConfig)
        loop = SensorLoop(
            build_definitions(config, clock=lambda: FROZEN_NOW), DagsterInstance.ephemeral()
        )
        written = Landing(tmp_path / "written")  # written here, then put on S3
        fs, root = storage.filesystem(landing_uri)

        def put(path: str) -> str:
            fs.put_file(str(written.root / path), f"{root}/{path}")
            return path

        kept = put(written.add(hour(28, 10)))
        rewritten = put(written.add(hour(28, 10), minute=10))
        ingest(loop)
        assert delta_ids(pipeline.table.uri) == ids_of(1, 6)

        write_ndjson(written.root, rewritten, event_records(900, 3, hour(28, 10)))
        put(rewritten)
        partition_of = partition_mapper(partitions_definition(pipeline), lambda: FROZEN_NOW)
        evidence = gather_evidence(pipeline, partition_of, now=FROZEN_NOW)
        assert explain_file(evidence, rewritten).verdict is Verdict.REWRITTEN
        assert explain_file(evidence, kept).verdict is Verdict.INGESTED
        listed = explain_all(evidence).groups.get(Verdict.REWRITTEN, ())
        assert [e.path for e in listed] == [rewritten]

        [request] = loop.tick().run_requests  # the sweep ran at the first tick: not due
        assert requested_files(request) == [rewritten]
        assert loop.run(request).success
        assert delta_ids(pipeline.table.uri) == sorted([*ids_of(1, 3), *ids_of(900, 3)])
        assert loop.tick().run_requests == [], "replaced: no longer rewritten"


def test_on_rewrite_defaults_to_report_and_replace_needs_a_files_source(tmp_path: Path) -> None:
    pipeline = project_config(pipeline_yaml(tmp_path)).pipeline("events")
    assert isinstance(pipeline, FilePipelineConfig) and pipeline.on_rewrite == "report"
    table = tmp_path / "delta" / "clicks"
    committed_in_place = {
        "name": "clicks",
        "source": {"type": "parquet_commit", "uri": str(table)},
        "watermark": {"partition_template": "date=%Y-%m-%d"},
        "table": {"uri": str(table), "partition_by": ["date"]},
        "on_rewrite": "replace",
    }
    with pytest.raises(ConfigError, match=r"only the rows of a 'files' source name"):
        project_config(committed_in_place)
