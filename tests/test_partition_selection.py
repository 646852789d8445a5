"""The edge: a real Dagster run's partitions turned into a PartitionSelection."""

from datetime import datetime, timezone
from typing import Any

import pytest
from dagster import (
    AssetExecutionContext,
    DailyPartitionsDefinition,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    PartitionsDefinition,
    StaticPartitionsDefinition,
    asset,
    materialize,
)

from watermark_assets.core.partition_selection import PartitionSelection, TimeWindow
from watermark_assets.defs.partitions import partition_selection

UTC = timezone.utc
DAILY = DailyPartitionsDefinition(start_date="2024-01-01")
UNITS = StaticPartitionsDefinition(["eu", "us"])
BOTH = MultiPartitionsDefinition({"date": DAILY, "unit": UNITS})


def selection_of(partitions_def: PartitionsDefinition, key: Any) -> PartitionSelection:
    seen: list[PartitionSelection] = []

    @asset(partitions_def=partitions_def)
    def probe(context: AssetExecutionContext) -> None:
        seen.append(partition_selection(context))

    assert materialize([probe], partition_key=key).success
    return seen[0]


@pytest.mark.parametrize(
    ("partitions_def", "key", "keys", "window", "unit"),
    [
        pytest.param(
            DAILY,
            "2024-01-28",
            ("2024-01-28",),
            TimeWindow(datetime(2024, 1, 28, tzinfo=UTC), datetime(2024, 1, 29, tzinfo=UTC)),
            None,
            id="a daily partition carries its day as a window",
        ),
        pytest.param(UNITS, "eu", ("eu",), None, None, id="a static partition carries its key"),
        pytest.param(
            BOTH,
            MultiPartitionKey({"date": "2024-01-28", "unit": "us"}),
            ("2024-01-28|us",),
            TimeWindow(datetime(2024, 1, 28, tzinfo=UTC), datetime(2024, 1, 29, tzinfo=UTC)),
            ("us",),
            id="time x unit carries each dimension, the window from its time dimension",
        ),
    ],
)
def test_a_runs_partitions_become_one_value(
    partitions_def: PartitionsDefinition,
    key: Any,
    keys: tuple[str, ...],
    window: TimeWindow | None,
    unit: tuple[str, ...] | None,
) -> None:
    selection = selection_of(partitions_def, key)
    assert selection.keys == keys
    assert selection.time_window == window
    if unit is not None:
        assert selection.dimension("unit").keys == unit
        assert selection.key_parts() == [{"date": "2024-01-28", "unit": "us"}]
