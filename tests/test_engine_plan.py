"""engine/plan.py and engine/execute.py without Spark: what a plan's parts say, the write mode a
commit is made in, and the one attempt loop (stale outcomes, staging removed, giving up), which
the file kind's commits run on too."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from watermark_assets.core.column.lookback import ReadBound
from watermark_assets.core.column.watermark import (
    ColumnWatermark,
    Equal,
    GreaterOrEqual,
    WatermarkOperator,
)
from watermark_assets.core.replace_window import Interval, ReplaceWindow
from watermark_assets.delta.committer import CommitOutcome, TxnVersion
from watermark_assets.engine.execute import (
    MAX_COMMIT_ATTEMPTS,
    Stale,
    execute,
    write_mode_for,
)
from watermark_assets.engine.plan import PipelineWatermark, ReadSlice, RecordPlan
from watermark_assets.engine.write import Append, Merge, Replace, WriteMode
from watermark_assets.exceptions import DeltaCommitError
from watermark_assets.kinds.file_path.commit import (
    Attempt,
    BatchResult,
    Placement,
    commit_attempts,
)
from watermark_assets.kinds.file_path.stage import StagedBatch
from watermark_assets.state.commit_metadata import CommitMetadata
from watermark_assets.state.load import PipelineState

ID = ("id",)
W1 = ReplaceWindow("id", 1, 1, Interval.CLOSED_CLOSED)
W2 = ReplaceWindow("id", 2, 5, Interval.CLOSED_OPEN)
NOW = datetime(2024, 3, 1, tzinfo=UTC)


def mark(value: int | None) -> ColumnWatermark:
    return ColumnWatermark.empty(ID) if value is None else ColumnWatermark(ID, (value,))


@pytest.mark.parametrize(
    ("read", "text"),
    [
        (ReadSlice(ReadBound(mark(None), WatermarkOperator.GREATER_THAN)), "TRUE"),
        (ReadSlice(ReadBound(mark(3), WatermarkOperator.GREATER_THAN)), "`id` > 3"),
        (ReadSlice(ReadBound(mark(3), GreaterOrEqual), upper=mark(7)), "`id` >= 3 AND `id` < 7"),
        (ReadSlice(ReadBound(mark(4), Equal)), "`id` = 4"),
        (
            ReadSlice(ReadBound(mark(3), GreaterOrEqual), upper=mark(7), within=(("unit", "a"),)),
            "`id` >= 3 AND `id` < 7 AND `unit` = 'a'",
        ),
    ],
)
def test_the_predicate_is_built_from_the_read_slice(read: ReadSlice, text: str) -> None:
    assert read.predicate_text == text
    assert read.operator is read.bound.operator


@pytest.mark.parametrize(
    ("watermark", "saves", "boundary"),
    [
        (PipelineWatermark.UNTOUCHED, False, False),
        (PipelineWatermark.ADVANCED, True, False),
        (PipelineWatermark.ADVANCED_ABOVE, True, True),
    ],
)
def test_the_record_says_what_the_run_does_with_the_watermark(
    watermark: PipelineWatermark, saves: bool, boundary: bool
) -> None:
    record = RecordPlan((TxnVersion("a", 1), TxnVersion("b", 2)), watermark=watermark)
    assert (record.saves_watermark, record.records_boundary) == (saves, boundary)
    assert record.txn == TxnVersion("a", 1)


@pytest.mark.parametrize(
    ("mode", "regions", "expected"),
    [
        (Append(), [None], Append()),
        (Merge(("id",)), [None], Merge(("id",))),
        (Replace.read_range(), [None], Append()),  # the range read found no row
        (Replace.read_range(), [W2], Replace((W2,))),
        (Replace((W1,)), [W1], Replace((W1,))),  # fixed when planning: as planned
        (Replace((W1,)), [W1, W2], Replace((W1, W2))),  # the windows of one run
    ],
)
def test_the_commit_writes_in_the_plans_mode_over_each_reads_region(
    mode: WriteMode, regions: list[ReplaceWindow | None], expected: WriteMode
) -> None:
    assert write_mode_for(mode, regions) == expected


@dataclass
class Attempts:
    """A run whose first ``stale`` attempts are stale."""

    stale: int
    staged: list[str]
    removed: list[str]

    def attempt(self, staged: str, number: int) -> tuple[str, int]:
        if number <= self.stale:
            raise Stale(CommitOutcome(None, True, f"stale {number}"))
        return staged, number


@pytest.mark.parametrize("stale", [0, 1, MAX_COMMIT_ATTEMPTS - 1])
def test_a_stale_attempt_is_staged_again_and_every_staging_removed(
    stale: int, tmp_path: Path
) -> None:
    run = Attempts(stale, [], [])

    def stage_again(earlier: str, outcome: Stale) -> str:
        run.staged.append(outcome.outcome.reason)
        return f"{earlier}+"

    def staging(staged: str) -> list[str]:
        folder = tmp_path / staged
        folder.mkdir()
        run.removed.append(staged)
        return [str(folder)]

    result = execute(
        "s", run.attempt, stage_again=stage_again, staging=staging, table_uri="t", pipeline="p"
    )
    assert result == ("s" + "+" * stale, stale + 1)
    assert run.staged == [f"stale {n}" for n in range(1, stale + 1)]
    assert run.removed == ["s" + "+" * n for n in range(stale + 1)]
    assert not any(tmp_path.iterdir()), "every attempt's staging is removed"


@pytest.mark.parametrize(
    ("contention", "said"),
    [
        (None, "other runs of 'p' kept committing"),
        ("other writers kept replacing the rows of 'a b*.json'", "of 'a b*.json'"),
    ],
)
def test_a_run_gives_up_after_the_last_stale_attempt(contention: str | None, said: str) -> None:
    run = Attempts(MAX_COMMIT_ATTEMPTS, [], [])
    with pytest.raises(DeltaCommitError, match=f"after {MAX_COMMIT_ATTEMPTS} attempts") as error:
        execute(
            "s",
            run.attempt,
            stage_again=lambda s, _: s,
            staging=lambda _: [],
            table_uri="t",
            pipeline="p",
            contention=contention,
        )
    assert said in str(error.value)
    assert "Nothing was committed by this run" in str(error.value)


def _staged_batch(tmp_path: Path) -> StagedBatch:
    """A staged file batch as far as the attempts see it: its pipeline, its staging folders."""
    for name in ("data", "quarantine"):
        (tmp_path / name).mkdir()
    pipeline = SimpleNamespace(name="events", table=SimpleNamespace(uri=str(tmp_path / "t")))
    plan = SimpleNamespace(request=SimpleNamespace(pipeline=pipeline))
    staged = SimpleNamespace(
        plan=plan, data_root=str(tmp_path / "data"), quarantine_root=str(tmp_path / "quarantine")
    )
    return cast(StagedBatch, staged)


@pytest.mark.parametrize(
    ("stale", "decided"),
    [
        (0, "nothing to commit"),
        (2, "nothing to commit"),  # decided again from the log after two stale commits
        (MAX_COMMIT_ATTEMPTS, None),  # gave up: the reason is the file kind's
    ],
)
def test_a_file_batch_commits_through_the_engines_attempts(
    stale: int, decided: str | None, tmp_path: Path
) -> None:
    staged = _staged_batch(tmp_path)
    placements: list[object] = []

    def attempt(placement: Placement) -> Attempt | BatchResult:
        placements.append(placement)
        if len(placements) <= stale:
            stale_outcome = CommitOutcome(None, True, "a txn moved", stale=True)
            return Attempt(stale_outcome, cast(CommitMetadata, None), ())
        outcome = CommitOutcome(None, True, "nothing to commit")
        return BatchResult(staged, outcome, (), 0, cast(PipelineState, None), False)

    gave_up = "other runs kept committing the same partitions"
    if decided is None:
        with pytest.raises(DeltaCommitError, match=gave_up):
            commit_attempts(staged, attempt, now=NOW, gave_up=gave_up)
    else:
        result = commit_attempts(staged, attempt, now=NOW, gave_up=gave_up)
        assert result.outcome.reason == decided
    assert len(placements) == min(stale + 1, MAX_COMMIT_ATTEMPTS)
    assert len({id(p) for p in placements}) == 1, "the files are placed once for every attempt"
    assert not any(tmp_path.iterdir()), "the staging folders are removed"


def test_a_run_that_cannot_read_again_raises_the_stale_outcome() -> None:
    run = Attempts(1, [], [])

    def cannot(staged: str, stale: Stale) -> str:
        raise stale

    with pytest.raises(Stale, match="stale 1"):
        execute(
            "s", run.attempt, stage_again=cannot, staging=lambda _: [], table_uri="t", pipeline="p"
        )
