"""A landing file rewritten in place after it was ingested (same name, new rows) is named, never
silently "ingested" (issue 21, item 5).

Each commit records the size and modification time (the ETag on S3) of every file it ingested;
the pipeline's checkpoint keeps them for the retained landing partitions, so they survive the
Delta log's cleanup. The sensor's listing returns the same details anyway: a committed file
listed with other ones is named by the sensor's skip text, its asset observation and ``explain``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _landing import FROZEN_NOW, Landing, checkpoint_json, hour
from _sensor_loop import SensorLoop
from conftest import event_records, pipeline_yaml, project_config, write_ndjson
from dagster import DagsterInstance
from maintenance import checkpoint_and_clean

from watermark_assets import storage
from watermark_assets.config import FilePipelineConfig
from watermark_assets.defs import build_definitions
from watermark_assets.defs.partitions import partition_mapper, partitions_definition
from watermark_assets.explain import explain_all, explain_file, gather_evidence
from watermark_assets.sources.file_discovery import rewritten_files
from watermark_assets.verdicts import Evidence, Verdict

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

    def rewrite(self, role: str, *, rows: int) -> None:
        """Write other rows under the same name, with a later modification time."""
        path = self.landing.root / self.paths[role]
        before = path.stat().st_mtime
        write_ndjson(self.landing.root, self.paths[role], event_records(900, rows, hour(28, 10)))
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
    [observation] = tick.asset_events
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
