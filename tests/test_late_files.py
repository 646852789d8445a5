"""The reconciliation sweep names files that landed below their partition's watermark, and with
``sweep.ingest`` ingests them by late runs (own txn ids, watermark unchanged), never twice.

Issue 10: "a reconciliation sweep re-lists recent partitions fully and names every file that
landed below its partition's watermark: it is ingested where the configuration allows it (a
separate, explicit mode with its own txn ids, never a duplicate) and reported in the UI
otherwise, so no file is ever skipped without a trace." Real Spark, Delta and Dagster.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from _landing import FROZEN_NOW, Landing, delta_ids, hour, prefix_of
from _sensor_loop import SensorLoop, requested_files
from conftest import pipeline_yaml, s3_project
from dagster import DagsterInstance, RunRequest
from deltalake import DeltaTable
from maintenance import checkpoint_and_clean
from test_pipeline_dagster import Clock, World, make_world

from watermark_assets import storage
from watermark_assets.defs import build_definitions
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.exceptions import RequestedFileError
from watermark_assets.explain import explain_file, gather_evidence
from watermark_assets.kinds.file_path.assets import LATE_TAG, files_run_config
from watermark_assets.sources.late_files import late_txn_app_id
from watermark_assets.state.commit_metadata import txn_app_id
from watermark_assets.state.load import load_state
from watermark_assets.verdicts import Verdict

SWEEP_EVERY = timedelta(minutes=61)  # the default sweep.interval_minutes is 60


def world_with_a_late_file(tmp_path: Path, *, ingest: bool) -> tuple[World, Clock, str, list[int]]:
    """One file committed at 10:30, then a file landing at 10:00 of the same hour (below the
    hour's watermark); the late file's ids are not in ``landing.ids`` (returned apart)."""
    clock = Clock()
    world = make_world(tmp_path, clock=clock, watermark={"sweep": {"ingest": ingest}})
    loop, landing = world.loop, world.landing
    landing.add(hour(28, 10), minute=30)
    loop.run_all(loop.tick().run_requests)
    on_time = list(landing.ids)
    late = landing.add(hour(28, 10), minute=0)
    late_ids = [i for i in landing.ids if i not in on_time]
    landing.ids[:] = on_time
    return world, clock, late, late_ids


@pytest.mark.parametrize(
    ("ingest", "note"),
    [
        pytest.param(False, "set sweep.ingest: true to ingest them", id="reported only"),
        pytest.param(True, "the sweep's late runs ingest them", id="ingested"),
    ],
)
def test_the_sweep_names_a_file_below_its_partitions_watermark(
    spark: Any, tmp_path: Path, ingest: bool, note: str
) -> None:
    world, clock, late, _ = world_with_a_late_file(tmp_path, ingest=ingest)
    loop = world.loop

    between = loop.tick()  # counted at once; named by the next sweep (off the hot path)
    assert "1 files landed below their partition's watermark" in (between.skip_message or "")
    assert "first [" not in (between.skip_message or "")
    assert between.run_requests == []

    clock.now += SWEEP_EVERY
    swept = loop.tick()
    [observation] = [e for e in swept.asset_events if e.partition is None]
    assert observation.metadata["files/below_watermark_first"].value == [late]
    if ingest:
        [request] = swept.run_requests
        assert request.partition_key == "2024-01-28"
        assert request.tags[LATE_TAG] == "true"
        assert request.run_config == files_run_config("events", [late], late=True)
    else:
        assert swept.run_requests == []
        assert f"first ['{late}']" in (swept.skip_message or "")
        assert note in (swept.skip_message or "")
    world.assert_each_row_once()


def test_a_late_run_ingests_the_file_once_with_its_own_txn_and_keeps_the_watermark(
    spark: Any, tmp_path: Path
) -> None:
    world, clock, late, late_ids = world_with_a_late_file(tmp_path, ingest=True)
    loop = world.loop
    watermark_before = load_state(world.pipeline, now=FROZEN_NOW).watermark
    clock.now += SWEEP_EVERY
    [request] = loop.tick().run_requests
    assert requested_files(request) == [late]

    assert loop.run(request).success
    world.landing.ids.extend(late_ids)
    world.assert_each_row_once()
    state = load_state(world.pipeline, now=clock.now)
    assert (state.watermark.value, state.watermark.partition_watermarks) == (
        watermark_before.value,
        watermark_before.partition_watermarks,
    ), "a late file never moves the watermark"
    versions = DeltaCommitter(world.table).transaction_versions(
        [late_txn_app_id("events", "2024-01-28"), txn_app_id("events", "2024-01-28")]
    )
    assert versions == {
        late_txn_app_id("events", "2024-01-28"): 1,
        txn_app_id("events", "2024-01-28"): 1,
    }, "the late commit has a txn of its own; the regular one did not move"

    assert loop.run(request).success, "the same late run again (a retry) commits nothing"
    world.assert_each_row_once()
    clock.now += SWEEP_EVERY
    after = loop.tick()
    assert after.run_requests == []
    assert "below their partition's watermark" not in (after.skip_message or "")


def test_a_late_run_refuses_a_file_above_the_watermark(spark: Any, tmp_path: Path) -> None:
    world, _, _, _ = world_with_a_late_file(tmp_path, ingest=True)
    above = world.landing.add(hour(28, 10), minute=45)
    [regular] = world.loop.tick().run_requests
    assert requested_files(regular) == [above]
    late_request = RunRequest(
        partition_key=regular.partition_key,
        run_config=files_run_config("events", [above], late=True),
    )
    result = world.loop.run(late_request, raise_on_error=False)
    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    message = str(failure.step_failure_data.error)
    assert RequestedFileError.__name__ in message
    assert f"requested file '{above}' is refused: it is above its partition's watermark" in message
    assert "launch it without 'late: true'" in message


def test_after_log_cleanup_the_tables_lineage_proves_a_late_file_new_and_it_is_ingested_once(
    spark: Any, tmp_path: Path
) -> None:
    world, clock, late, late_ids = world_with_a_late_file(tmp_path, ingest=True)
    world.landing.add(hour(28, 12))
    world.loop.run_all(world.loop.tick().run_requests)
    checkpoint_and_clean(world.table)  # the commit that ingested 10:30 is gone from the log
    the_sweep_ingests_only(world, clock, late, late_ids)


def the_sweep_ingests_only(world: World, clock: Clock, late: str, late_ids: list[int]) -> None:
    """The next sweep requests one late run of exactly ``late``; it commits each row once."""
    clock.now += SWEEP_EVERY
    [request] = world.loop.tick().run_requests
    assert requested_files(request) == [late]
    assert world.loop.run(request).success
    world.landing.ids.extend(late_ids)
    world.assert_each_row_once()


def a_committed_file_with_no_rows_left(tmp_path: Path) -> tuple[World, Clock, str, str, list[int]]:
    """One file committed, then all its rows deleted (e.g. a GDPR deletion), a late file below
    its hour's watermark, a file of a later hour ingested, then the log cleaned: no row and no
    commit names the deleted file any more. (world, clock, the deleted file, the late file, the
    late file's ids)."""
    world, clock, late, late_ids = world_with_a_late_file(tmp_path, ingest=True)
    root = world.landing.root
    [committed] = [
        path
        for path in (str(p.relative_to(root)) for p in root.rglob("*.ndjson.gz"))
        if path != late
    ]
    DeltaTable(world.table).delete(f"_source_file = '{committed}'")
    world.landing.ids.clear()  # its rows are gone for good
    world.landing.add(hour(28, 12))
    world.loop.run_all(world.loop.tick().run_requests)
    checkpoint_and_clean(world.table)  # no commit left names the deleted file
    return world, clock, committed, late, late_ids


def test_a_committed_file_whose_rows_were_all_deleted_stays_committed_after_log_cleanup(
    spark: Any, tmp_path: Path
) -> None:
    """The state records the committed files of the retained landing partitions (their
    signatures): the sweep names only the late file, its late run ingests it once, the deleted
    rows never come back, ``explain`` says the deleted file was ingested and a late run given it
    commits nothing."""
    world, clock, committed, late, late_ids = a_committed_file_with_no_rows_left(tmp_path)
    the_sweep_ingests_only(world, clock, late, late_ids)

    evidence = gather_evidence(world.pipeline, lambda _when: "2024-01-28", now=clock.now)
    found = explain_file(evidence, committed)
    assert (found.verdict, found.facts["rows"]) == (Verdict.INGESTED, 0), found.reason
    version = DeltaTable(world.table).version()
    again = world.loop.job.execute_in_process(
        instance=world.loop.instance,
        partition_key="2024-01-28",
        run_config=files_run_config("events", [committed], late=True),
    )
    assert again.success
    assert DeltaTable(world.table).version() == version, "committed: nothing to ingest"
    world.assert_each_row_once()


def test_a_late_file_is_not_ingested_where_no_record_tells_which_file_was_committed(
    spark: Any, tmp_path: Path
) -> None:
    """A checkpoint written before the committed files were recorded (no ``file_signatures``):
    the lineage and the log are the only evidence, and they hold neither file, so which of
    the two is new cannot be told: reported, nothing ingested."""
    world, clock, committed, late, _ = a_committed_file_with_no_rows_left(tmp_path)
    location = Path(world.pipeline.checkpoint_uri)
    document = json.loads(location.read_text(encoding="utf-8"))
    del document["file_signatures"]
    location.write_text(json.dumps(document), encoding="utf-8")

    clock.now += SWEEP_EVERY
    tick = world.loop.tick()
    assert tick.run_requests == [], "which of the two files is new cannot be told"
    reason = tick.skip_message or ""
    assert f"1 files landed below their partition's watermark ({prefix_of(late)}: 1)" in reason
    assert f"the tables hold no rows of 2 ({late}, {committed})" in reason


@pytest.mark.parametrize(
    "page_keys",
    [
        pytest.param(1, id="more committed files than a page: listed from the watermark on"),
        pytest.param(storage.S3_PAGE_KEYS, id="fewer: listed in full, counted at the tick"),
    ],
)
def test_on_s3_the_sweep_finds_the_late_file_that_listing_from_the_watermark_never_sees(
    spark: Any, s3_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, page_keys: int
) -> None:
    """A tick lists a partition in full only while its committed files fit in one
    ListObjectsV2 page (``storage.S3_PAGE_KEYS``; set to 1 here to act out a bigger one): a
    bigger one is listed from its watermark on, and only the sweep sees a file landed below."""
    monkeypatch.setattr(storage, "S3_PAGE_KEYS", page_keys)
    landing_uri = f"s3://{s3_server.new_bucket()}/landing zone"
    raw = pipeline_yaml(
        tmp_path, source={"uri": landing_uri}, watermark={"sweep": {"ingest": True}}
    )
    with s3_project(s3_server, raw) as config:
        clock = Clock()
        loop = SensorLoop(build_definitions(config, clock=clock), DagsterInstance.ephemeral())
        landing = Landing(tmp_path / "written")  # written here, then put on S3
        fs, root = storage.filesystem(landing_uri)

        def land(path: str) -> str:
            fs.put_file(str(tmp_path / "written" / path), f"{root}/{path}")
            return path

        land(landing.add(hour(28, 10), minute=30))
        loop.run_all(loop.tick().run_requests)
        late = land(landing.add(hour(28, 10), minute=0))

        between = loop.tick()  # no sweep due: only a listing in full counts it
        assert between.run_requests == []
        counted = "1 files landed below their partition's watermark"
        assert (counted in (between.skip_message or "")) == (page_keys > 1)

        clock.now += SWEEP_EVERY
        [request] = loop.tick().run_requests  # the sweep re-lists the partition in full
        assert requested_files(request) == [late]
        assert loop.run(request).success
        assert delta_ids(str(tmp_path / "delta" / "events")) == sorted(landing.ids)
