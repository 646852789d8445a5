"""An event-time aggregate in the real ``dagster dev`` and a headless browser (issue 9).

Two runs are made on the instance before ``dagster dev`` starts, as the sensor would request
them. The first closes 12:00. The second, with a late record, closes 13:00. The UI then shows the
asset downstream of its upstream and the partitions the watermark closed. The selected
partition's metadata shows the watermark, the lag and the late count. The screenshot is
docs/event-time.md's (``docs/screenshots/event-time-partitions.png`` when
$WATERMARK_ASSETS_SCREENSHOTS is docs/screenshots).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import yaml
from conftest import TEST_SPARK_CONF
from dagster import DagsterInstance, build_sensor_context
from test_event_window import T0, append, event

from watermark_assets.config import parse_config
from watermark_assets.defs import build_definitions

from .dagster_dev import DagsterDev, instance_yaml
from .test_webui import TALL, TIMEOUT_MS, browser, screenshot

pytestmark = pytest.mark.slow

__all__ = ["browser"]  # the fixture, shared with test_webui


class Clock:
    def __init__(self) -> None:
        self.now = T0 + timedelta(hours=4)

    def __call__(self) -> Any:
        return self.now


@pytest.fixture(scope="module")
def event_time_dev(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Iterator[DagsterDev]:
    root = tmp_path_factory.mktemp("event_time")
    config = {
        "spark": {"master": "local[1]", "conf": TEST_SPARK_CONF},
        "pipelines": [
            {
                "name": "events",
                "description": "Web events (ingested upstream).",
                "source": {"type": "delta_table", "uri": str(root / "source")},
                "watermark": {"columns": ["event_time", "id"]},
                "table": {"uri": str(root / "events")},
            },
            {
                "name": "events_5min",
                "description": "Events and distinct users per 5 minutes of event time.",
                "source": {"type": "pipeline", "pipeline": "events"},
                "watermark": {"kind": "event_time", "column": "event_time", "delay": "10 minutes"},
                "window": {"size": "5 minutes"},
                "aggregates": {"events": "count", "users": "count_distinct(user_id)"},
                "table": {"uri": str(root / "agg" / "events_5min")},
                "partitions": {
                    "granularity": "hourly",
                    "start": "2024-01-30 12:00:00",
                    "end": "2024-01-30 16:00:00",
                },
            },
        ],
    }
    config_path = root / "pipelines.yaml"
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    home = tmp_path_factory.mktemp("event_time_home")
    (home / "dagster.yaml").write_text(instance_yaml())

    # The two runs the sensor would request, on the instance dagster dev then serves.
    parsed = parse_config(config_path.read_text(), env={}, base=root, origin=str(config_path))
    defs = build_definitions(parsed, clock=Clock())
    job = defs.resolve_job_def("events_5min_job")
    with DagsterInstance.from_config(str(home)) as instance:
        append(root / "events", *[event(i, m, i % 4) for i, m in enumerate(range(0, 73, 4))])
        job.execute_in_process(instance=instance, partition_key="2024-01-30-12:00")
        late_and_new = [event(100, 7, 9), *[event(101 + i, 75 + 4 * i, i) for i in range(15)]]
        append(root / "events", *late_and_new)  # 12:07 is late; the newest 14:11 closes 13:00
        job.execute_in_process(instance=instance, partition_key="2024-01-30-13:00")
        # one tick of the sensor, recorded as the daemon records it: the partitions the
        # watermark (14:01) has not closed say so on their own pages
        sensor = defs.resolve_sensor_def("events_5min_sensor")
        with build_sensor_context(instance=instance, definitions=defs) as context:
            for observation in sensor.evaluate_tick(context).asset_events:
                instance.report_runless_asset_event(observation)

    dev = DagsterDev(home, config_path, home / "dagster-dev.log")
    dev.start()
    try:
        dev.wait_until_ready(timeout=120)
        yield dev
    finally:
        dev.stop()


def test_the_aggregates_partitions_show_the_watermark_and_the_late_count(
    event_time_dev: DagsterDev, browser: Any
) -> None:
    dev = event_time_dev
    (latest, *_) = dev.materializations("events_5min")
    assert latest["partition"] == "2024-01-30-13:00"
    metadata = latest["metadata"]
    assert metadata["event_time/late_records"] == 1  # 12:07, after the watermark reached 13:00
    assert {"watermark/after_time", "lag/seconds"} <= set(metadata)

    dev.graphql("mutation { setNuxSeen }")
    context = browser.new_context(viewport=TALL, base_url=dev.url)
    context.set_default_timeout(TIMEOUT_MS)
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    page = context.new_page()
    try:
        page.goto("/assets/events_5min?view=partitions")
        expect(page.get_by_text("Materialized (2)").first).to_be_visible()
        page.get_by_text("2024-01-30-13:00").first.click()
        expect(page.get_by_text("event_time/late_records").first).to_be_visible()
        expect(page.get_by_text("watermark/after_time").first).to_be_visible()
        screenshot(page, "event-time-partitions.png")
    finally:
        context.close()


def test_a_partition_the_watermark_has_not_closed_says_why_on_its_own_page(
    event_time_dev: DagsterDev, browser: Any
) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport=TALL, base_url=dev_url(event_time_dev))
    context.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    page = context.new_page()
    try:
        page.goto("/assets/events_5min?view=partitions&partition=2024-01-30-14:00")
        # Dagster's partition panel shows the latest materialization (none: the partition is
        # missing), and the partition's observations in its history
        expect(page.get_by_text("View all historical events (1)")).to_be_visible()
        page.goto("/assets/events_5min?view=events&partition=2024-01-30-14:00")
        expect(page.get_by_text("partition/reason").first).to_be_visible()
        expect(
            page.get_by_text(
                "once the event-time watermark reaches 2024-01-30T15:00:00Z, i.e. once `events` "
                "holds events at or after 2024-01-30T15:10:00Z",
                exact=False,
            ).first
        ).to_be_visible()
        screenshot(page, "event-time-open-partition.png")
    finally:
        context.close()


def dev_url(dev: DagsterDev) -> str:
    dev.graphql("mutation { setNuxSeen }")
    return dev.url
