"""The column checks' judge (defs/column_checks.judge_column_commit): one commit judged alone,
against the watermark its run planned on (the ``column_run`` record's ``watermark_before``),
never by walking the log back to an earlier commit (no Spark).

Table-driven on one commit's entries, then on a real log where other writers' commits sit
between two runs and the earlier run's commit was cleaned up by log retention.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from watermark_assets.core.column.watermark import ColumnWatermark
from watermark_assets.defs.column_checks import judge_column_commit
from watermark_assets.delta.committer import DeltaCommitter, TxnVersion
from watermark_assets.delta.log import CommitRecord
from watermark_assets.providers.delta_metadata import commit_metadata_entry
from watermark_assets.runs.column import RUN_METADATA_KEY

DATAFLOW = "orders"
SCHEMA = pa.schema([("id", pa.int64())])


def wm(value: int | None) -> str:
    """A watermark's JSON over ``id`` (None: empty)."""
    return (
        ColumnWatermark.empty(("id",)) if value is None else ColumnWatermark(("id",), (value,))
    ).to_json()


def run_entries(before: int | None, after: int | None, stored: int | None) -> dict[str, str]:
    """A column engine commit's entries: the run record and, unless None, the stored watermark."""
    record = {
        "pipeline": DATAFLOW,
        "run_id": "r",
        "watermark_before": wm(before),
        "watermark_after": wm(after),
        "rows_read": 0,
        "rows_removed": 0,
        "rows_kept_by_rewrite": 0,
    }
    entries = {RUN_METADATA_KEY: json.dumps(record)}
    if stored is not None:
        entries |= commit_metadata_entry(DATAFLOW, wm(stored), job_id=None, dataflow_run_id="r")
    return entries


@dataclass(frozen=True)
class Case:
    id: str
    before: int | None
    after: int | None
    stored: int | None
    regressions: int


CASES = [
    Case("advances", 10, 20, 20, 0),
    Case("stays", 10, 10, 10, 0),
    Case("after below before", 10, 5, 10, 1),
    Case("stores below what it planned on", 10, 20, 5, 1),
    Case("both below", 10, 5, 5, 2),
    Case("stores nothing (a unit, a window)", None, None, None, 0),
    Case("a replay chunk planned on no watermark of the pipeline", None, 7, 7, 0),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_commit_is_judged_against_the_watermark_its_run_planned_on(case: Case) -> None:
    commit = CommitRecord(3, 0, run_entries(case.before, case.after, case.stored), (), {})
    found = judge_column_commit(DATAFLOW, commit)
    assert found is not None
    assert len(found.regressions) == case.regressions, found.regressions
    assert found.mismatch is None


def test_a_commit_without_a_run_record_is_not_judged() -> None:
    other = CommitRecord(3, 0, {"someone.else": "{}"}, (), {})
    assert judge_column_commit(DATAFLOW, other) is None


def _commit(committer: DeltaCommitter, entries: dict[str, str], app: str, version: int) -> int:
    outcome = committer.commit(
        (),
        schema=SCHEMA,
        partition_by=(),
        txns=[TxnVersion(app, version)],
        custom_metadata=entries,
        read_version=-1 if committer.current_version() is None else None,
    )
    assert outcome.version is not None, outcome.reason
    return outcome.version


@pytest.mark.parametrize("cleaned_up", [False, True], ids=["interleaved", "cleaned up"])
def test_other_writers_commits_and_a_cleaned_up_log_judge_alike(
    tmp_path: Path, cleaned_up: bool
) -> None:
    """v0: a run stores 10; v1, v2: other writers (no watermark of the pipeline); v3: a run that
    planned on 10 stores 5 (a regression), v4: a run that planned on 10 stores 20. With v0's
    JSON removed from the log (retention) the judgement is the same: it reads v3 and v4 alone."""
    committer = DeltaCommitter(str(tmp_path / "t"))
    _commit(committer, run_entries(None, 10, 10), "watermark_assets/orders/column", 1)
    _commit(committer, {"other.writer": "{}"}, "someone/else", 1)
    _commit(committer, {"other.writer": "{}"}, "someone/else", 2)
    regressed = _commit(committer, run_entries(10, 5, 5), "watermark_assets/orders/column", 2)
    advanced = _commit(committer, run_entries(10, 20, 20), "watermark_assets/orders/column", 3)
    if cleaned_up:
        (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").unlink()
    judged = {
        v: judge_column_commit(DATAFLOW, committer.read_commit(v)) for v in (regressed, advanced)
    }
    assert judged[advanced] is not None and judged[advanced].regressions == []
    found = judged[regressed]
    assert found is not None
    assert found.regressions == [
        "v3: id=10 -> id=5",
        "v3 stores id=5, below the id=10 its run read",
    ]
