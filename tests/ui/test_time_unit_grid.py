"""A time x unit grid in the real ``dagster dev`` (webserver + daemon) and a headless browser.

What the UI does when a user backfills one unit over a range of days (Materialize -> the unit's
key and a range of dates): the asset backfill daemon plans it with the asset's single-run policy,
so it is ONE run over the range ``2024-01-02|b...2024-01-06|b``, committing its cells at once.
The partition view then shows the grid (days x units); its screenshot is docs/unit.md's
(``docs/screenshots/time-unit-grid.png`` when $WATERMARK_ASSETS_SCREENSHOTS is docs/screenshots).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable, write_deltalake

from .dagster_dev import SESSION_CONF, DagsterDev, instance_yaml, tag_dict, wait_for
from .test_webui import TIMEOUT_MS, VIEWPORT, browser, screenshot

pytestmark = pytest.mark.slow

__all__ = ["browser"]  # the fixture, shared with test_webui

PIPELINE = "survey_answers"
UNITS = ("a", "b", "c")
DAYS = [f"2024-01-{d:02}" for d in range(1, 8)]
#: A run of five cells starts Spark and commits once: minutes on a loaded machine.
RUN_TIMEOUT = 600.0


@pytest.fixture(scope="module")
def grid_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DagsterDev, Path]]:
    """``dagster dev`` over one time x unit pipeline: 7 days x units a, b, c of answers."""
    root = tmp_path_factory.mktemp("grid")
    source, table = root / "source", root / "delta"
    rows = [
        {
            "survey_id": unit,
            "answer": day * 10 + k,
            "answered_at": datetime(2024, 1, day, 8 + k, tzinfo=timezone.utc),
        }
        for unit in UNITS
        for day in range(1, 8)
        for k in range(2)
    ]
    schema = pa.schema(
        [
            ("survey_id", pa.string()),
            ("answer", pa.int64()),
            ("answered_at", pa.timestamp("us", "UTC")),
        ]
    )
    write_deltalake(str(source), pa.Table.from_pylist(rows, schema=schema))
    config = {
        "spark": {"master": "local[1]", "conf": SESSION_CONF},
        "pipelines": [
            {
                "name": PIPELINE,
                "description": "Answers by day and survey (a time x unit grid).",
                "source": {"type": "delta_table", "uri": str(source)},
                "watermark": {
                    "kind": "unit",
                    "column": "survey_id",
                    "units": ",".join(UNITS),
                    "time": {
                        "column": "answered_at",
                        "from": DAYS[0],
                        "to": "2024-01-08",
                        "partition": "daily",
                        "grace_days": 1,
                    },
                },
                "table": {"uri": str(table)},
            }
        ],
    }
    config_path = root / "pipelines.yaml"
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    home = tmp_path_factory.mktemp("grid_home")
    (home / "dagster.yaml").write_text(instance_yaml())
    dev = DagsterDev(home, config_path, home / "dagster-dev.log")
    dev.start()
    try:
        dev.wait_until_ready(timeout=120)
        yield dev, table
    finally:
        dev.stop()


def test_a_ui_backfill_of_one_unit_over_five_days_is_one_run_and_the_grid_shows_it(
    grid_dev: tuple[DagsterDev, Path], browser: Any
) -> None:
    dev, table = grid_dev
    keys = [f"{day}|b" for day in DAYS[1:6]]
    backfill_id = dev.launch_backfill(PIPELINE, keys)

    def finished() -> dict[str, Any] | None:
        backfill = dev.backfill(backfill_id)
        done = backfill["status"] not in ("REQUESTED",)
        runs = backfill["runs"]
        if done and runs and all(r["status"] in ("SUCCESS", "FAILURE", "CANCELED") for r in runs):
            return backfill
        return None

    backfill = wait_for(
        f"backfill {backfill_id}",
        finished,
        timeout=RUN_TIMEOUT,
        interval=3.0,
        details=lambda: f"{dev.backfill(backfill_id)}\n{dev.log_tail(30)}",
    )
    (run,) = backfill["runs"]  # ONE run for the five cells
    assert run["status"] == "SUCCESS", dev.run_failure(run["runId"])
    tags = tag_dict(run)
    assert tags["dagster/asset_partition_range_start"] == "2024-01-02|b"
    assert tags["dagster/asset_partition_range_end"] == "2024-01-06|b"
    delta = DeltaTable(str(table))
    assert delta.version() == 0, "the five cells in ONE commit"
    assert sorted(delta.to_pyarrow_table(columns=["answer"]).column("answer").to_pylist()) == [
        d * 10 + k for d in range(2, 7) for k in range(2)
    ]

    dev.graphql("mutation { setNuxSeen }")
    context = browser.new_context(viewport=VIEWPORT, base_url=dev.url)
    context.set_default_timeout(TIMEOUT_MS)
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    page = context.new_page()
    try:
        page.goto(f"/assets/{PIPELINE}?view=partitions")
        expect(page.get_by_text("Materialized (5)").first).to_be_visible()
        expect(page.get_by_text("2024-01-06").first).to_be_visible()
        screenshot(page, "time-unit-grid.png")
    finally:
        context.close()
