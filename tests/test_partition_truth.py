"""The shared shape of a partition's truth (``defs/partition_truth.py``): times in ISO-8601 UTC,
and a tick's observation written only when the partition's state or reason changed."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from dagster import AssetKey, AssetMaterialization, AssetObservation, DagsterInstance

from watermark_assets.defs.partition_truth import (
    PartitionTruth,
    changed_observations,
    iso_utc,
    observations_since,
)

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


OPEN = PartitionTruth(state="open", reason="open until 2024-02-01T00:00:00Z")
#: partition keys of the cache's tests: a plain day, and a name with a space and a `*`
DAY, ODD = "2024-01-31", "north side*"


def _between_ticks(name: str, instance: DagsterInstance, key: AssetKey) -> dict[str, Any]:
    """What happens between two ticks of a sensor saying OPEN on DAY and ODD; the truths the
    second tick says."""
    truths: dict[str, PartitionTruth] = {DAY: OPEN, ODD: OPEN}
    if name == "the words change":
        truths[ODD] = OPEN.saying("open", "open until 2024-02-02T00:00:00Z")
    elif name == "a run materializes a partition":
        closed = PartitionTruth(state="closed", reason="closed by a run")
        instance.report_runless_asset_event(
            AssetMaterialization(asset_key=key, partition=ODD, metadata=closed.metadata())
        )
    elif name == "someone observes another partition":
        instance.report_runless_asset_event(
            AssetObservation(asset_key=key, partition="2024-01-01", metadata={"note": "hand"})
        )
    elif name == "another asset's event":
        instance.report_runless_asset_event(
            AssetMaterialization(asset_key=AssetKey("other"), partition=DAY)
        )
    return truths


@pytest.mark.parametrize(
    ("between", "pages_read", "observed"),
    [
        pytest.param("nothing", False, [], id="nothing: no page read, nothing written"),
        pytest.param("another asset's event", False, [], id="another asset: no page read"),
        pytest.param("the words change", True, [ODD], id="new words: observed"),
        pytest.param(
            "a run materializes a partition",
            True,
            [ODD],
            id="a run's materialization says otherwise: the sensor's words again",
        ),
        pytest.param(
            "someone observes another partition",
            True,
            [],
            id="any event of the asset: every page read again",
        ),
    ],
)
def test_a_tick_reads_the_pages_only_when_the_words_or_the_assets_events_changed(
    between: str, pages_read: bool, observed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    instance = DagsterInstance.ephemeral()
    key = AssetKey("events_5min")
    reads: list[object] = []
    for name in ("fetch_observations", "fetch_materializations"):
        fetch = getattr(instance, name)

        def counted(records_filter: Any, *args: Any, _fetch: Any = fetch, **kwargs: Any) -> Any:
            if records_filter.asset_partitions:  # a page (not the asset's newest events)
                reads.append(records_filter.asset_partitions)
            return _fetch(records_filter, *args, **kwargs)

        monkeypatch.setattr(instance, name, counted)

    def tick(truths: dict[str, PartitionTruth], said: str | None) -> tuple[list[str], str]:
        found, key_said = observations_since(instance, key, truths, said)
        for observation in found:
            instance.report_runless_asset_event(observation)
        return [str(o.partition) for o in found], key_said

    first, said = tick({DAY: OPEN, ODD: OPEN}, None)
    assert first == [DAY, ODD]
    assert said == "", "a tick that writes says nothing yet: the next one reads the pages back"
    assert tick({DAY: OPEN, ODD: OPEN}, said)[0] == []
    _, said = tick({DAY: OPEN, ODD: OPEN}, "")
    assert said, "every page says it: the key of what was compared"
    reads.clear()

    found, _ = tick(_between_ticks(between, instance, key), said)

    assert bool(reads) is pages_read
    assert found == observed
