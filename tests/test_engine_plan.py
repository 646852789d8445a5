"""engine/plan.py and engine/execute.py without Spark: what a plan's parts say, the write mode a
commit is made in, and the one attempt loop (stale outcomes, staging removed, giving up)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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

ID = ("id",)
W1 = ReplaceWindow("id", 1, 1, Interval.CLOSED_CLOSED)
W2 = ReplaceWindow("id", 2, 5, Interval.CLOSED_OPEN)


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


def test_a_run_gives_up_after_the_last_stale_attempt() -> None:
    run = Attempts(MAX_COMMIT_ATTEMPTS, [], [])
    with pytest.raises(DeltaCommitError, match=f"after {MAX_COMMIT_ATTEMPTS} attempts"):
        execute(
            "s",
            run.attempt,
            stage_again=lambda s, _: s,
            staging=lambda _: [],
            table_uri="t",
            pipeline="p",
        )


def test_a_run_that_cannot_read_again_raises_the_stale_outcome() -> None:
    run = Attempts(1, [], [])

    def cannot(staged: str, stale: Stale) -> str:
        raise stale

    with pytest.raises(Stale, match="stale 1"):
        execute(
            "s", run.attempt, stage_again=cannot, staging=lambda _: [], table_uri="t", pipeline="p"
        )
