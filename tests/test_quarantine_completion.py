"""A file-path data commit's quarantine, completed exactly once (``kinds/file_path/commit.
complete_quarantine``), and the checkpoint that promises it (``state.checkpoint.save_checkpoint``).

Table-driven, without Spark: each case starts from data commits whose quarantine files are in the
quarantine table's folder (``state.quarantine_pending``) and a quarantine table that completed
none, or up to one of them; completing commits the others once each, in data-version order,
each an ``Append`` through ``engine.write.write`` of the placed files under the txn
``watermark_assets/{pipeline}/quarantine`` = its data version, with one
``watermark_assets_quarantine`` entry. A checkpoint is refused while one is missing."""

from __future__ import annotations

import json
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _landing import FROZEN_NOW
from conftest import pipeline_yaml, project_config
from deltalake import DeltaTable

from watermark_assets.config import Pipeline
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.exceptions import QuarantineIncompleteError
from watermark_assets.kinds.file_path.commit import complete_quarantine
from watermark_assets.state.checkpoint import save_checkpoint
from watermark_assets.state.load import PipelineState
from watermark_assets.state.quarantine import incomplete_quarantine

SCHEMA = pa.schema([("_source_file", pa.string()), ("raw_record", pa.string())])
APP = "watermark_assets/events/quarantine"
KEY = "watermark_assets_quarantine"


def quarantined(pipeline: Pipeline, version: int) -> tuple[str, ...]:
    """The quarantine file a data commit at ``version`` moved into the quarantine folder."""
    folder = Path(pipeline.table.quarantine)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"part-v{version}.parquet"
    rows = [{"_source_file": f"file-{version}", "raw_record": f"bad line {version}"}]
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), folder / name)
    return (name,)


def state_pending(pipeline: Pipeline, versions: list[int]) -> PipelineState:
    pending = tuple((v, quarantined(pipeline, v)) for v in versions)
    return PipelineState(
        FileWatermark.initial(), max(versions), None, 0, quarantine_pending=pending
    )


@pytest.mark.parametrize(
    ("pending", "done_before", "completed"),
    [
        pytest.param([3], [], [3], id="one commit, no quarantine table yet: it creates it"),
        pytest.param([3, 5], [], [3, 5], id="two commits: completed in data-version order"),
        pytest.param([3, 5], [3], [5], id="the first completed before a kill: the second only"),
        pytest.param([3, 5], [3, 5], [], id="both completed (another reader): nothing again"),
    ],
)
def test_a_pending_quarantine_is_completed_once_each_in_version_order(
    pending: list[int], done_before: list[int], completed: list[int], tmp_path: Path
) -> None:
    pipeline = project_config(pipeline_yaml(tmp_path)).pipeline("events")
    state = state_pending(pipeline, pending)
    if done_before:
        complete_quarantine(
            pipeline,
            replace(state, quarantine_pending=state.quarantine_pending[: len(done_before)]),
        )
    assert list(incomplete_quarantine(pipeline, state)) == completed
    with (
        pytest.raises(QuarantineIncompleteError, match=str(completed[0]))
        if completed
        else nullcontext()
    ):
        save_checkpoint(pipeline, state, now=FROZEN_NOW, force=True)

    assert complete_quarantine(pipeline, state) == completed
    assert complete_quarantine(pipeline, state) == [], "exactly once"

    table = DeltaTable(pipeline.table.quarantine)
    assert table.version() == len(pending) - 1
    assert table.transaction_version(APP) == pending[-1]
    commits = sorted(table.history(), key=lambda c: c["version"])
    assert [json.loads(c[KEY])["data_version"] for c in commits] == pending
    assert [c["operationParameters"].get("mode") for c in commits[1:]] == ["Append"] * (
        len(pending) - 1
    )
    rows = table.to_pyarrow_table().sort_by("raw_record").to_pylist()
    assert [r["raw_record"] for r in rows] == [f"bad line {v}" for v in pending]
    assert incomplete_quarantine(pipeline, state) == ()
    assert save_checkpoint(pipeline, state, now=FROZEN_NOW, force=True)


def test_nothing_pending_reads_no_quarantine_table(tmp_path: Path) -> None:
    """A state with nothing pending neither completes nor checks anything (no table read)."""
    pipeline = project_config(pipeline_yaml(tmp_path)).pipeline("events")
    state = PipelineState(FileWatermark.initial(), 2, None, 0)
    assert complete_quarantine(pipeline, state) == []
    assert incomplete_quarantine(pipeline, state) == ()
    assert save_checkpoint(pipeline, state, now=FROZEN_NOW, force=True)
    assert not Path(pipeline.table.quarantine).exists()
