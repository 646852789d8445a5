"""`watermark-assets explain PIPELINE [PATH]`: for each landing file, whether it was ingested (in
which Delta version, by which run) or why not.

One landing folder is ingested through the real sensor -> run -> commit loop (real Spark, real
Delta tables); then files land that the pipeline will not ingest, each for its own reason, and
one ingested file is removed. Every verdict is asked of that one world (a cold start with a
lookback has its own, with nothing ingested).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from _landing import FROZEN_NOW, MALFORMED_LINES, ClickWriter, Landing, hour
from _sensor_loop import SensorLoop
from conftest import TEST_SPARK_CONF, pipeline_yaml, project_config
from dagster import DagsterInstance

from watermark_assets.cli import main
from watermark_assets.config import FilePipelineConfig
from watermark_assets.defs import build_definitions
from watermark_assets.defs.partitions import partition_mapper, partitions_definition
from watermark_assets.explain import explain_all, explain_file, gather_evidence, listing_lines
from watermark_assets.verdicts import Evidence, Verdict


@dataclass
class Scene:
    """A pipeline after ingestion, its config file and the paths that landed, by role."""

    pipeline: FilePipelineConfig
    config_file: Path
    paths: dict[str, str]
    instance: DagsterInstance | None = None

    def evidence(self) -> Evidence:
        partition_of = partition_mapper(partitions_definition(self.pipeline), lambda: FROZEN_NOW)
        return gather_evidence(self.pipeline, partition_of, now=FROZEN_NOW)


def write_config(folder: Path, pipeline: dict[str, Any]) -> Path:
    path = folder / "pipelines.yaml"
    document = {"spark": {"master": "local[2]", "conf": TEST_SPARK_CONF}, "pipelines": [pipeline]}
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def touch(root: Path, relative: str) -> str:
    """A landing file written by a producer that broke a rule (its content never matters)."""
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"id": 1}\n', encoding="utf-8")
    return relative


def build_ingested(folder: Path) -> Scene:
    """Days 20 and 28 ingested (late_arrival_days 1: the listing goes back to the 27th, 13:00),
    then the files that will not be."""
    document = pipeline_yaml(
        folder,
        watermark={"late_arrival_days": 1, "sweep": {"days": 1}},
        partitions={"granularity": "daily", "start": "2024-01-10"},
    )
    config = project_config(document)
    pipeline = config.pipeline("events")
    assert isinstance(pipeline, FilePipelineConfig)
    loop = SensorLoop(
        build_definitions(config, clock=lambda: FROZEN_NOW), DagsterInstance.ephemeral()
    )
    landing = Landing(folder / "landing")
    paths = {
        "old": landing.add(hour(20, 10)),
        "ingested": landing.add(hour(28, 10), minute=30),
        "quarantined": landing.add(hour(28, 11), rows=0, malformed=MALFORMED_LINES),
        "partly quarantined": landing.add(hour(28, 12), rows=2, malformed=MALFORMED_LINES[:1]),
        "unreadable": landing.add_bytes(hour(28, 12), b"not gzip at all", minute=30),
        "removed": landing.add(hour(28, 13)),
    }
    for _ in range(3):
        requests = loop.tick().run_requests
        if not requests:
            break
        loop.run_all(requests)
    root = landing.root
    (root / paths["removed"]).unlink()
    paths |= {
        "below": landing.add(hour(28, 10), minute=0),  # sorts below the hour's watermark
        "pending": landing.add(hour(29, 10)),
        "late": landing.add(hour(20, 10), minute=30),  # above its watermark, below the window
        "outside": touch(root, "date=2024-01-05/hour=10/1704448800-000900.ndjson.gz"),
        "mismatch": touch(root, "misc/1706436000-000901.ndjson.gz"),
        "other format": touch(root, "date=2024-01-29/hour=10/1706522400-notes.txt"),
        "hidden": touch(root, "date=2024-01-29/hour=10/_1706522400-tmp.ndjson.gz"),
        "unsortable": touch(root, "date=2024-01-29/hour=10/event-abc123.ndjson.gz"),
        "never there": "date=2024-01-28/hour=10/1706436000-999999.ndjson.gz",
    }
    return Scene(pipeline, write_config(folder, document), paths, loop.instance)


def build_cold_start(folder: Path) -> Scene:
    """Nothing ingested; a one-day lookback from Jan 31st, 12:00 leaves the 28th out."""
    document = pipeline_yaml(folder, watermark={"cold_start": {"lookback_days": 1}})
    pipeline = project_config(document).pipeline("events")
    assert isinstance(pipeline, FilePipelineConfig)
    old = Landing(folder / "landing").add(hour(28, 10))
    return Scene(pipeline, write_config(folder, document), {"before lookback": old})


def build_without_late_window(folder: Path) -> Scene:
    """late_arrival_days: null; the 28th ingested, then a first file lands on the 27th."""
    document = pipeline_yaml(folder, watermark={"late_arrival_days": None})
    config = project_config(document)
    pipeline = config.pipeline("events")
    loop = SensorLoop(
        build_definitions(config, clock=lambda: FROZEN_NOW), DagsterInstance.ephemeral()
    )
    landing = Landing(folder / "landing")
    landing.add(hour(28, 10))
    loop.run_all(loop.tick().run_requests)
    late = landing.add(hour(27, 10))
    return Scene(pipeline, write_config(folder, document), {"new older partition": late})


def build_log_cleaned_up(folder: Path) -> Scene:
    """One file ingested, then the Delta log's older commits cleaned up after a checkpoint (as
    delta.logRetentionDuration does): the commit that names the file is gone."""
    from deltalake import DeltaTable

    document = pipeline_yaml(folder)
    config = project_config(document)
    loop = SensorLoop(
        build_definitions(config, clock=lambda: FROZEN_NOW), DagsterInstance.ephemeral()
    )
    ingested = Landing(folder / "landing").add(hour(28, 10))
    loop.run_all(loop.tick().run_requests)
    table = DeltaTable(config.pipeline("events").table.uri)
    table.alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds"})
    table = DeltaTable(config.pipeline("events").table.uri)
    table.create_checkpoint()
    table.cleanup_metadata()
    assert not (Path(table.table_uri) / "_delta_log" / f"{0:020d}.json").exists()
    return Scene(
        config.pipeline("events"), write_config(folder, document), {"before the log": ingested}
    )


def build_commit_pipeline(folder: Path) -> Scene:
    """A commit pipeline: another writer's Parquet files, added to the table in place."""
    table = folder / "delta" / "clicks"
    document = {
        "name": "clicks",
        "source": {"type": "parquet_commit", "uri": str(table)},
        "watermark": {"partition_template": "date=%Y-%m-%d"},
        "table": {"uri": str(table), "partition_by": ["date"]},
        "checkpoint": {"interval_files": 1, "interval_secs": 0},
    }
    config = project_config(document)
    loop = SensorLoop(
        build_definitions(config, clock=lambda: FROZEN_NOW),
        DagsterInstance.ephemeral(),
        pipeline="clicks",
    )
    writer = ClickWriter(table)
    committed = writer.add(hour(28, 1), rows=5)
    loop.run_all(loop.tick().run_requests)
    return Scene(
        config.pipeline("clicks"),
        write_config(folder, document),
        {"committed parquet": committed},
        loop.instance,
    )


@pytest.fixture(scope="module")
def scenes(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Scene]:
    return {
        "ingested": build_ingested(tmp_path_factory.mktemp("ingested")),
        "cold start": build_cold_start(tmp_path_factory.mktemp("cold")),
        "no late window": build_without_late_window(tmp_path_factory.mktemp("null")),
        "commit pipeline": build_commit_pipeline(tmp_path_factory.mktemp("clicks")),
        "log cleaned up": build_log_cleaned_up(tmp_path_factory.mktemp("cleaned")),
    }


# scene, role of the path, verdict, facts the answer holds, words its reason holds
CASES = [
    pytest.param(
        "ingested",
        "ingested",
        Verdict.INGESTED,
        {"rows": 3, "partition_keys": ["2024-01-28"]},
        "committed in Delta version",
        id="a committed file is ingested, with its Delta version, run and rows",
    ),
    pytest.param(
        "commit pipeline",
        "committed parquet",
        Verdict.INGESTED,
        {"rows": 5, "partition_keys": ["2024-01-28"]},
        "5 rows in the table",
        id="a commit pipeline's Parquet file counts its rows from its add action",
    ),
    pytest.param(
        "log cleaned up",
        "before the log",
        Verdict.INGESTED,
        {"delta_versions": [], "committed_before_version": 1, "rows": 3},
        "a Delta version before 1 (the oldest commit the log still holds",
        id="a file whose commit the log no longer holds is ingested, as its rows show",
    ),
    pytest.param(
        "ingested",
        "partly quarantined",
        Verdict.INGESTED,
        {"rows": 2, "rows_quarantined": 1},
        "1 records quarantined",
        id="a committed file with some malformed records is ingested and says how many",
    ),
    pytest.param(
        "ingested",
        "quarantined",
        Verdict.QUARANTINED,
        {"rows": 0, "rows_quarantined": 2},
        "quarantine table",
        id="a committed file whose every record was malformed is quarantined",
    ),
    pytest.param(
        "ingested",
        "unreadable",
        Verdict.QUARANTINED,
        {"rows": 0, "rows_quarantined": 1},
        "not a gzip file",
        id="a file Spark could not read at all is quarantined whole, with Spark's error",
    ),
    pytest.param(
        "ingested",
        "pending",
        Verdict.PENDING,
        {"partition_key": "2024-01-29", "partition_watermark": None},
        "a coming tick requests a run of partition 2024-01-29",
        id="a new file above its partition's watermark is pending",
    ),
    pytest.param(
        "ingested",
        "below",
        Verdict.BELOW_WATERMARK,
        {"partition_key": "2024-01-28"},
        "The sweep's late runs ingest it with watermark.sweep.ingest: true",
        id="a file that landed below its partition's watermark is not ingested by regular runs",
    ),
    pytest.param(
        "ingested",
        "late",
        Verdict.LATE_PARTITION_CLOSED,
        {"partition_key": "2024-01-20", "late_arrival_days": 1},
        "Backfill partition 2024-01-20",
        id="a late file in a partition older than the late-arrival window waits for a backfill",
    ),
    pytest.param(
        "no late window",
        "new older partition",
        Verdict.LATE_PARTITION_CLOSED,
        {"partition_key": "2024-01-27", "late_arrival_days": None, "listing_horizon": None},
        "the sensor never lists it and no sweep reports it",
        id="without a late-arrival window a new partition older than the newest is never listed",
    ),
    pytest.param(
        "cold start",
        "before lookback",
        Verdict.BEFORE_LOOKBACK,
        {"partition_key": "2024-01-28", "lookback_days": 1},
        "before the cold start's lookback",
        id="a file before the cold start's lookback is not listed while nothing is ingested",
    ),
    pytest.param(
        "ingested",
        "outside",
        Verdict.OUTSIDE_PARTITIONS,
        {"partitions_start": "2024-01-10"},
        "has no Dagster partition",
        id="a file before partitions.start has no partition to go to",
    ),
    pytest.param(
        "ingested",
        "mismatch",
        Verdict.TEMPLATE_MISMATCH,
        {"folder": "misc"},
        "does not match the partition template",
        id="a file in a folder the partition template does not match",
    ),
    pytest.param(
        "ingested",
        "other format",
        Verdict.IGNORED,
        {"suffixes": [".ndjson", ".ndjson.gz", ".json", ".json.gz", ".jsonl", ".jsonl.gz"]},
        "not a ndjson file",
        id="a file of another format is ignored",
    ),
    pytest.param(
        "ingested",
        "hidden",
        Verdict.IGNORED,
        {"hidden": True},
        "hidden",
        id="a hidden file is ignored",
    ),
    pytest.param(
        "ingested",
        "unsortable",
        Verdict.UNSORTABLE_NAME,
        {"file_name_ordering": "auto", "blocks_sensor": True},
        "the sensor holds it back",
        id="a name without a sortable prefix is refused",
    ),
    pytest.param(
        "ingested",
        "removed",
        Verdict.MISSING,
        {"previously_ingested": True, "partition_keys": ["2024-01-28"]},
        "before it was removed",
        id="an ingested file removed from the landing folder is missing, and was ingested",
    ),
    pytest.param(
        "ingested",
        "never there",
        Verdict.MISSING,
        {"previously_ingested": False},
        "no such file",
        id="a file that never landed is missing",
    ),
]


@pytest.mark.parametrize(("scene", "role", "verdict", "facts", "words"), CASES)
def test_explain_says_for_a_path_whether_it_was_ingested_or_why_not(
    scenes: dict[str, Scene],
    scene: str,
    role: str,
    verdict: Verdict,
    facts: dict[str, Any],
    words: str,
) -> None:
    world = scenes[scene]
    answer = explain_file(world.evidence(), world.paths[role])
    assert (answer.path, answer.verdict) == (world.paths[role], verdict), answer.line()
    assert {key: answer.facts.get(key) for key in facts} == facts, answer.facts
    assert words in answer.reason
    assert "\n" not in answer.line()


def test_an_ingested_file_names_its_delta_version_and_dagster_run(
    scenes: dict[str, Scene],
) -> None:
    world = scenes["ingested"]
    answer = explain_file(world.evidence(), world.paths["ingested"])
    [version] = answer.facts["delta_versions"]
    [run_id] = answer.facts["run_ids"]
    assert f"Delta version {version} (run {run_id[:8]})" in answer.reason
    assert world.instance is not None
    run = world.instance.get_run_by_id(run_id)
    assert run is not None and run.tags["dagster/partition"] == "2024-01-28"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param(lambda root, p: str(root / p), "pending", id="an absolute path in the folder"),
        pytest.param(lambda root, p: f"./{p}", "pending", id="a path starting with ./"),
    ],
)
def test_a_path_may_be_given_absolute_or_with_a_leading_dot(
    scenes: dict[str, Scene], given: Callable[[Path, str], str], expected: str
) -> None:
    world = scenes["ingested"]
    root = Path(world.pipeline.source.uri)
    answer = explain_file(world.evidence(), given(root, world.paths[expected]))
    assert (answer.path, answer.verdict) == (world.paths[expected], Verdict.PENDING)


def test_without_a_path_every_landing_file_not_ingested_is_listed_by_verdict(
    scenes: dict[str, Scene],
) -> None:
    world = scenes["ingested"]
    paths = world.paths
    listing = explain_all(world.evidence())

    names = {v.value: [e.path for e in found] for v, found in listing.groups.items()}
    assert names == {
        "quarantined": [paths["quarantined"], paths["unreadable"]],
        "pending": [paths["pending"]],
        "below-watermark": [paths["below"]],
        "late-partition-closed": [paths["late"]],
        "outside-partitions": [paths["outside"]],
        "template-mismatch": [paths["mismatch"]],
        "ignored": [paths["other format"]],
        "unsortable-name": [paths["unsortable"]],
    }, "hidden files are never part of a source; the removed one is not in the folder"
    assert (listing.landing_files, listing.ingested, listing.not_ingested) == (12, 3, 9)


def test_the_listing_caps_the_names_per_verdict(tmp_path: Path) -> None:
    document = pipeline_yaml(tmp_path)
    pipeline = project_config(document).pipeline("events")
    landing = Landing(tmp_path / "landing")
    pending = [landing.add(hour(28, 10), minute=m) for m in range(5)]
    partition_of = partition_mapper(partitions_definition(pipeline), lambda: FROZEN_NOW)

    lines = listing_lines(
        explain_all(gather_evidence(pipeline, partition_of, now=FROZEN_NOW)), limit=2
    )

    assert lines[0].startswith("events: 5 files in ")
    assert lines[0].endswith("0 ingested, 5 not ingested")
    assert lines[1:] == [
        "pending: 5 files",
        *(
            f"  {p}: above its landing partition's watermark (none yet): the sensor lists it, "
            "and a coming tick requests a run of partition 2024-01-28"
            for p in pending[:2]
        ),
        "  ... and 3 more",
    ]


# --- the command line ----------------------------------------------------------------------------


def test_the_command_answers_one_path_in_one_line_and_in_json(
    scenes: dict[str, Scene], capsys: pytest.CaptureFixture[str]
) -> None:
    world = scenes["ingested"]
    config, path = str(world.config_file), world.paths["below"]

    assert main(["--config", config, "explain", "events", path]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: below-watermark: its name sorts at or below the watermark ")
    assert out.count("\n") == 1

    assert main(["--config", config, "explain", "events", path, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert set(answer) == {"schema_version", "pipeline", "path", "verdict", "reason", "facts"}
    assert (answer["schema_version"], answer["pipeline"], answer["path"]) == (1, "events", path)
    assert answer["verdict"] == "below-watermark"
    assert answer["facts"]["partition_key"] == "2024-01-28"


def test_the_command_lists_the_files_not_ingested_in_json(
    scenes: dict[str, Scene], capsys: pytest.CaptureFixture[str]
) -> None:
    world = scenes["ingested"]

    status = main(
        ["--config", str(world.config_file), "explain", "events", "--json", "--limit", "0"]
    )

    assert status == 0
    listing = json.loads(capsys.readouterr().out)
    assert {key: listing[key] for key in ("landing_files", "ingested", "not_ingested")} == {
        "landing_files": 12,
        "ingested": 3,
        "not_ingested": 9,
    }
    pending = next(g for g in listing["groups"] if g["verdict"] == "pending")
    assert (pending["count"], pending["more"]) == (1, 0)
    assert [f["path"] for f in pending["files"]] == [world.paths["pending"]]
    assert set(pending["files"][0]) == {"path", "verdict", "reason", "facts"}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        pytest.param(["explain", "nope"], "no pipeline named 'nope'", id="an unknown pipeline"),
        pytest.param(
            ["explain", "events", "../elsewhere/1706436000-1.ndjson.gz"],
            "is not a file path inside the source folder",
            id="a path that leaves the source folder",
        ),
        pytest.param(
            ["--config", "/nonexistent/pipelines.yaml", "explain", "events"],
            "does not exist",
            id="a configuration file that does not exist",
        ),
    ],
)
def test_the_command_exits_2_with_one_line_for_what_it_cannot_answer(
    scenes: dict[str, Scene],
    capsys: pytest.CaptureFixture[str],
    arguments: list[str],
    message: str,
) -> None:
    config = ["--config", str(scenes["ingested"].config_file)]
    argv = arguments if arguments[0] == "--config" else [*config, *arguments]

    assert main(argv) == 2

    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("watermark-assets: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err
