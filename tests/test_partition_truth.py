"""The shared shape of a partition's truth (``defs/partition_truth.py``): times in ISO-8601 UTC,
and a tick's observation written only when the partition's state or reason changed."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from dagster import AssetKey, AssetMaterialization, DagsterInstance

from watermark_assets.defs.partition_truth import PartitionTruth, changed_observations, iso_utc

UTC = timezone.utc


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        pytest.param(datetime(2024, 1, 31, tzinfo=UTC), "2024-01-31T00:00:00Z", id="midnight"),
        pytest.param(
            datetime(2024, 1, 31, 1, 2, 3, 450000, tzinfo=UTC),
            "2024-01-31T01:02:03.450Z",
            id="milliseconds only when not zero",
        ),
        pytest.param(
            datetime(2024, 1, 31, 2, tzinfo=timezone(timedelta(hours=2))),
            "2024-01-31T00:00:00Z",
            id="another zone is turned to UTC",
        ),
    ],
)
def test_times_are_iso_8601_utc(moment: datetime, text: str) -> None:
    assert iso_utc(moment) == text


def test_a_naive_time_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="pass an aware one"):
        iso_utc(datetime(2024, 1, 31))


def test_a_partition_is_observed_only_when_its_state_or_reason_changes() -> None:
    instance = DagsterInstance.ephemeral()
    key = AssetKey("events_5min")
    waiting = PartitionTruth(state="open", reason="open until 2024-02-01T00:00:00Z")

    def tick(truth: PartitionTruth) -> list[str]:
        said = changed_observations(instance, key, {"2024-01-31": truth})
        for observation in said:
            instance.report_runless_asset_event(observation)
        return [o.metadata["partition/reason"].value for o in said]  # type: ignore[attr-defined]

    assert tick(waiting) == ["open until 2024-02-01T00:00:00Z"]
    assert tick(waiting) == [], "the same words: nothing written"
    later = waiting.saying("open", "open until 2024-02-01T00:00:00Z (watermark moved)")
    assert tick(later) == ["open until 2024-02-01T00:00:00Z (watermark moved)"]
    # a materialization saying the same is the partition's latest word too
    closed = PartitionTruth(state="closed", reason="closed")
    instance.report_runless_asset_event(
        AssetMaterialization(asset_key=key, partition="2024-01-31", metadata=closed.metadata())
    )
    assert tick(closed) == []
