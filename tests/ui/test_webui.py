"""The Dagster UI in a real headless browser: Debian's Chromium driven by Playwright.

The pages a user reads after the scenario in conftest.py (backfill, sensor, backfill again): the
asset graph, the partition view, one materialization's metadata and the sensor page. Each test
asserts what a person must be able to read there and saves a screenshot (see SCREENSHOTS).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import BackfillStage, Scenario, SensorStage
from .dagster_dev import (
    CHROMIUM,
    CHROMIUM_ARGS,
    LOCATION,
    PIPELINE,
    SCREENSHOTS,
    SENSOR,
    DagsterDev,
    ensure_chromium,
)

pytestmark = pytest.mark.slow

VIEWPORT = {"width": 1600, "height": 1000}
TALL = {"width": 1600, "height": 1400}  # metadata tables: every row in the screenshot
TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Debian Chromium (installed with apt-get if missing and possible), never a download.

    Playwright starts it with a new, empty profile directory (--user-data-dir) of its own.
    """
    reason = ensure_chromium()
    if reason is not None:
        pytest.skip(f"browser tests skipped: {reason}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Any, dagster_dev: DagsterDev, second_backfill: BackfillStage) -> Iterator[Any]:
    """A fresh page on the final state of the scenario; the first-visit dialog is dismissed."""
    # The "Join the Dagster community" dialog shows on localhost until the instance has seen it.
    dagster_dev.graphql("mutation { setNuxSeen }")
    context = browser.new_context(viewport=VIEWPORT, base_url=dagster_dev.url)
    context.set_default_timeout(TIMEOUT_MS)
    from playwright.sync_api import expect

    # expect() keeps its own 5 s default; a loaded machine needs the page's (the UI fetches
    # partition counts after the graph is drawn).
    expect.set_options(timeout=TIMEOUT_MS)
    page = context.new_page()
    try:
        yield page
    finally:
        context.close()


def screenshot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name))


def metadata_row(page: Any, label: str) -> Any:
    """The row of the metadata table whose first cell is exactly ``label``."""
    cell = page.locator("td").filter(has_text=re.compile(rf"^\s*{re.escape(label)}\s*$"))
    return page.locator("tr").filter(has=cell).first


def expect_metadata(page: Any, expected: dict[str, str | re.Pattern[str]]) -> None:
    from playwright.sync_api import expect

    for label, value in expected.items():
        row = metadata_row(page, label)
        expect(row, f"metadata row {label!r}").to_be_visible()
        expect(row.locator("td").nth(1), f"value of {label!r}").to_contain_text(value)


def test_asset_graph(page: Any, scenario: Scenario) -> None:
    from playwright.sync_api import expect

    page.set_viewport_size({"width": 1280, "height": 760})  # the one node, not a sea of dots
    page.goto(f"/locations/{LOCATION}/asset-groups/watermark_ingestion/lineage")
    expect(page.get_by_text(re.compile(r"^[\d,]+ partitions$"))).to_be_visible()
    expect(page.get_by_text(re.compile(r"\d+ / \d+ Passed"))).to_be_visible()
    expect(page.get_by_text("Spark", exact=True)).to_be_visible()
    expect(page.get_by_text("delta", exact=True)).to_be_visible()
    screenshot(page, "asset-graph.png")

    # selecting the node shows the asset's description: its pipeline in a paragraph
    page.get_by_text(PIPELINE, exact=True).last.click()
    sidebar = page.get_by_text(re.compile("A file-path watermark per landing partition"))
    expect(sidebar).to_be_visible()
    expect(page.get_by_text(str(scenario.paths.landing)).first).to_be_visible()


def test_partition_view_shows_the_watermark_metadata(
    page: Any, scenario: Scenario, sensor_ingest: SensorStage
) -> None:
    from playwright.sync_api import expect

    file = scenario.sensor_files[-1]  # the one file of day 3, with one malformed record
    page.set_viewport_size(TALL)
    page.goto(f"/assets/{PIPELINE}?view=partitions&partition={file.partition}")
    expect(page.get_by_text(re.compile(r"Materialized \(3\)"))).to_be_visible()
    expect_metadata(
        page,
        {
            "watermark/state": re.compile(r"Active|Idle"),
            "watermark/after": file.path,
            "files": "1",
            "rows/read": str(file.rows + file.malformed),
            "rows/quarantined": str(file.malformed),
            "rows/committed": str(file.rows),
            "delta/version": re.compile(r"^\s*\d+\s*$"),
            "partition/rows_quarantined": str(file.malformed),
            "watermark/partitions_after": file.name,
            "dagster/uri": str(scenario.paths.table),
            "quarantine/table": str(scenario.paths.quarantine),
        },
    )
    expect(metadata_row(page, "watermark/partitions_after")).to_contain_text(file.prefix)
    screenshot(page, "partitions.png")


def test_a_materialization_shows_watermark_files_rows_and_delta_version(
    page: Any, scenario: Scenario, first_backfill: BackfillStage
) -> None:
    from playwright.sync_api import expect

    day1 = scenario.day1.isoformat()
    event = next(m for m in first_backfill.materializations if m["partition"] == day1)
    # asOf = the event's timestamp: the asset's events as of then, this one selected
    page.set_viewport_size(TALL)
    page.goto(f"/assets/{PIPELINE}?view=events&asOf={event['timestamp']}")
    expect(
        page.get_by_text(re.compile(rf"Partition\s*{day1}\s*materialized in run"))
    ).to_be_visible()
    expect(page.get_by_text(event["runId"][:8]).first).to_be_visible()
    newest = max(f.path for f in scenario.first_files)
    expect_metadata(
        page,
        {
            "watermark/state": "Active",
            "watermark/before": "(none",
            "watermark/after": newest,
            "files": "3",
            "rows/read": "15",
            "rows/quarantined": "1",
            "rows/committed": "14",
            "delta/version": "0",
            "dagster/uri": str(scenario.paths.table),
            "quarantine/table": str(scenario.paths.quarantine),
            "partition/files": "2",
            "partition/rows_quarantined": "1",
        },
    )
    screenshot(page, "materialization-metadata.png")


def test_sensor_page_says_why_nothing_ran(
    page: Any, scenario: Scenario, sensor_ingest: SensorStage
) -> None:
    from playwright.sync_api import expect

    page.goto(f"/locations/{LOCATION}/sensors/{SENSOR}")
    expect(
        page.get_by_text(re.compile(r"Polls .* for files above the committed watermarks"))
    ).to_be_visible()
    expect(page.get_by_text(str(scenario.paths.landing)).first).to_be_visible()
    expect(page.get_by_text('"state": "Idle"').first).to_be_visible()  # the cursor
    expect(page.get_by_role("checkbox").first).to_be_checked()  # running
    idle = re.compile(r"Idle: \d+ partitions, no files above their watermarks")
    latest = page.locator("tr").filter(has_text="Latest tick").get_by_text("requested").first
    # the latest tick's skip reason shows on hover; a tick being evaluated shows no reason yet
    tooltip = page.get_by_text(idle).first
    for _attempt in range(10):
        latest.hover()
        try:
            expect(tooltip).to_be_visible(timeout=3_000)
            page.wait_for_timeout(800)  # the tooltip fades in; the page may re-render meanwhile
            if tooltip.is_visible():
                break
        except AssertionError:
            pass
        page.mouse.move(0, 0)
        page.wait_for_timeout(1_000)
    expect(tooltip).to_be_visible()
    screenshot(page, "sensor.png")
