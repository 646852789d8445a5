"""What a replay replays (core/column/replay.ReplayRange), without Spark: the configuration's
``replay:`` block cuts its range by its chunk size; a run of time partitions replays one chunk
per partition (kinds/column/defs.partition_replay), built from the partitions, not from a
configuration made up at run time."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import project_config

from watermark_assets.config import ColumnPipelineConfig
from watermark_assets.core.column.replay import ReplayRange, split_range
from watermark_assets.core.partition_selection import PartitionSelection
from watermark_assets.kinds.column.defs import column_partitions, partition_replay

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # sources not created

HOURLY = {"granularity": "hourly", "start": "2026-04-03T00:00", "end": "2026-04-03T08"}


def pipeline(tmp_path: Path, **more: Any) -> ColumnPipelineConfig:
    (column,) = project_config(
        {
            "name": "orders",
            "source": {"type": "delta_table", "uri": str(tmp_path / "orders")},
            "watermark": {"columns": ["updated_at"]},
            "table": {"uri": str(tmp_path / "delta" / "orders")},
            "destination": {"replace_by_watermark": True},
            **more,
        }
    ).pipelines
    assert isinstance(column, ColumnPipelineConfig)
    return column


def at(hour: int) -> datetime:
    return datetime(2026, 4, 3, hour, tzinfo=UTC)


def keys(replay: ReplayRange) -> list[str]:
    return [chunk.key for chunk in replay.chunks("updated_at")]


def test_the_configurations_replay_cuts_its_range_by_its_chunk_size(tmp_path: Path) -> None:
    replay = {"start": "2026-04-03T00:00:00Z", "end": "2026-04-03T05:00:00Z", "chunk": {"hours": 2}}
    config = pipeline(tmp_path, replay=replay).replay
    assert config is not None
    assert keys(config) == [c.key for c in split_range("updated_at", at(0), at(5), at(2) - at(0))]
    assert keys(config)[-1] == "2026-04-03T04:00:00+00:00..2026-04-03T05:00:00+00:00"


@pytest.mark.parametrize(
    ("run_keys", "save_watermark", "windows"),
    [
        (["2026-04-03-04:00"], False, [(4, 5)]),
        # a backfill's range, its keys in any order: one chunk per partition, in time order
        (
            ["2026-04-03-03:00", "2026-04-03-02:00", "2026-04-03-04:00"],
            False,
            [(2, 3), (3, 4), (4, 5)],
        ),
        (["2026-04-03-06:00", "2026-04-03-07:00"], True, [(6, 7), (7, 8)]),
    ],
)
def test_a_run_of_partitions_replays_one_window_per_partition(
    tmp_path: Path, run_keys: list[str], save_watermark: bool, windows: list[tuple[int, int]]
) -> None:
    more: dict[str, Any] = {"partitions": HOURLY}
    if save_watermark:
        more["replay"] = {
            "start": "2026-04-03T00:00:00Z",
            "end": "2026-04-03T08:00:00Z",
            "chunk": {"hours": 1},
            "save_watermark": True,
        }
    column = pipeline(tmp_path, **more)
    partitions = column_partitions(column)
    assert partitions is not None

    replay = partition_replay(column, partitions, PartitionSelection.of_keys(run_keys))

    expected = [f"{at(a).isoformat()}..{at(b).isoformat()}" for a, b in windows]
    assert keys(replay) == expected
    assert (replay.start, replay.end) == (at(windows[0][0]), at(windows[-1][1]))
    assert replay.save_watermark is save_watermark
    assert replay.target_table is None, "a partition replays into the pipeline's own table"
    assert column.replays_own_table(replay)
