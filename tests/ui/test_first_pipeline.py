"""README's "Your first pipeline", in a real ``dagster dev`` and headless Chromium: a new folder
with one landing file and a ``pipelines.yaml`` of one's own, ``dagster dev -m
watermark_assets.definitions`` there, the first run launched from the UI (*Materialize…*, the
partition typed in, *Launch 1 run*), and the partition's page shows its watermark.

It also pins what Dagster's UI shows for such a run: *Materialize…* launches Dagster's implicit
asset job (``__ASSET_JOB``, the first of the asset's jobs by name), whose name the partition's
panel hides: its "Job" reads "None" (docs/ui.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .dagster_dev import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS, DagsterDev, ensure_chromium, wait_for
from .test_webui import expect_metadata

pytestmark = pytest.mark.slow

#: README.md, "Your first pipeline", step 2
PIPELINES_YAML = """\
pipelines:
  - name: events
    source:
      type: files
      uri: landing/events
      schema: "id BIGINT, name STRING"
    table: {uri: delta/events}
    partitions: {start: "2024-01-28"}
"""
FIRST_FILE = "date=2024-01-28/1706450400-a.ndjson"


def test_a_first_pipeline_of_ones_own_runs_from_the_ui_and_shows_its_watermark(
    tmp_path: Path,
) -> None:
    reason = ensure_chromium()
    if reason is not None:
        pytest.skip(f"browser tests skipped: {reason}")
    from playwright.sync_api import expect, sync_playwright

    folder = tmp_path / "my pipelines"  # a space: the newcomer's folder may have one
    landing = folder / "landing" / "events" / FIRST_FILE
    landing.parent.mkdir(parents=True)
    landing.write_text('{"id": 1, "name": "first"}\n{"id": 2, "name": "second"}\n')
    (folder / "pipelines.yaml").write_text(PIPELINES_YAML)
    (folder / ".dagster_home").mkdir()
    dev = DagsterDev(
        dagster_home=folder / ".dagster_home",
        config_path=folder / "pipelines.yaml",
        log_path=tmp_path / "dagster_dev.log",
        cwd=folder,
        module="watermark_assets.definitions",
        workspace=None,
    )
    dev.start()
    try:
        dev.wait_until_ready(timeout=240)
        dev.graphql("mutation { setNuxSeen }")  # no first-visit dialog
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
            )
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(30_000)
            expect.set_options(timeout=30_000)
            page.goto(f"{dev.url}/assets/events")
            page.get_by_role("button", name="Materialize…").first.click()
            dialog = page.get_by_role("dialog")
            dialog.get_by_text("Show all partitions").click()  # 2024-01-28 is older than 90 days
            partitions = dialog.locator("input").first
            partitions.fill("2024-01-28")
            partitions.press("Enter")
            dialog.get_by_role("button", name=re.compile("^Launch 1 run$")).click()

            def materialized() -> str | None:
                data = dev.graphql(
                    """{ assetOrError(assetKey: {path: ["events"]}) { ... on Asset {
                         assetMaterializations(limit: 1) { partition runId } } } }"""
                )
                found = data["assetOrError"]["assetMaterializations"]
                return found[0]["runId"] if found else None

            run_id = wait_for("the first run's materialization", materialized, timeout=300)
            page.goto(f"{dev.url}/assets/events?view=partitions&partition=2024-01-28")
            expect_metadata(
                page,
                {
                    "partition/state": "ingested",
                    "partition/watermark": FIRST_FILE,
                    "dagster/partition_row_count": "2",
                },
            )
            job = re.search(r"\bJob\s+(\S+)", page.inner_text("body"))
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "first_pipeline_partition.png"))
            browser.close()
        assert job is not None and job.group(1) == "None", "the implicit asset job's name: hidden"
        run = dev.graphql(
            "query($id: ID!) { runOrError(runId: $id) { ... on Run { jobName status } } }",
            {"id": run_id},
        )["runOrError"]
        assert run == {"jobName": "__ASSET_JOB", "status": "SUCCESS"}
    finally:
        dev.stop()
