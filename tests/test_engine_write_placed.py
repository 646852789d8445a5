"""``engine.write.write(..., placed=)``: files the caller put in the table itself (the file kind
moves its data and quarantine files once for all its attempts; ``parquet_commit`` commits files
by reference) are committed as they are, in every write mode, with the record given; ``write``
never moves nor removes them (a stale attempt leaves them for the caller's next one) and fires
no crash point of its own (the caller's fire where they did)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from test_engine_write import APP, NOW, OLD, SCHEMA, ids, make_table, stage, window

from watermark_assets.delta.committer import TxnVersion, committer_for
from watermark_assets.delta.stats import DataFile, describe_data_files
from watermark_assets.engine import write as engine_write
from watermark_assets.engine.write import Append, Merge, Replace, RunRecord, WriteMode, write

ENTRY = "watermark_assets"


def place(uri: Path, rows: list[tuple[int, str]]) -> list[DataFile]:
    """One Parquet file written straight into the table folder (not committed)."""
    table = pa.Table.from_pylist([{"id": i, "value": v} for i, v in rows], schema=SCHEMA)
    pq.write_table(table, uri / "placed.parquet")
    return describe_data_files(str(uri), ["placed.parquet"], [])


def write_placed(
    uri: Path, mode: WriteMode, files: list[DataFile], txn: TxnVersion
) -> engine_write.Written:
    return write(
        committer_for(str(uri), now=lambda: NOW),
        (),
        mode,
        RunRecord((txn,), {ENTRY: json.dumps({"files": 1})}, records_completion=True),
        schema=SCHEMA,
        partition_by=[],
        now=lambda: NOW,
        placed=(files,),
    )


@pytest.mark.parametrize(
    ("mode", "new", "rows"),
    [
        pytest.param(Append(), 5, {**OLD, 5: "new"}, id="append"),
        pytest.param(Replace((window(1, 2),)), 2, {2: "new", 3: "old", 4: "old"}, id="replace"),
        pytest.param(Merge(("id",)), 2, {**OLD, 2: "new"}, id="merge"),
    ],
)
def test_placed_files_are_committed_as_they_are_with_no_crash_point(
    mode: WriteMode,
    new: int,
    rows: dict[int, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uri = tmp_path / "orders"
    make_table(uri)
    files = place(uri, [(new, "new")])
    points: list[str] = []
    monkeypatch.setattr(engine_write, "crash_point", points.append)

    written = write_placed(uri, mode, files, TxnVersion(APP, 1, None))

    assert written.outcome.version == 1, written.outcome.reason
    assert ids(uri) == rows
    table = DeltaTable(str(uri))
    assert table.transaction_version(APP) == 1
    [info] = table.history(1)
    assert json.loads(info[ENTRY]) == {"files": 1}
    assert any(u.endswith("/placed.parquet") for u in table.file_uris()), "committed in place"
    assert written.files == (tuple(files),)
    assert points == [], "the caller's crash points, not write's"


def test_a_stale_attempt_leaves_the_placed_files_for_the_next(tmp_path: Path) -> None:
    uri = tmp_path / "orders"
    make_table(uri)
    files = place(uri, [(5, "new")])

    stale = write_placed(uri, Append(), files, TxnVersion(APP, 2, 1))  # the table has none
    assert stale.outcome.stale and stale.outcome.version is None
    assert (uri / "placed.parquet").exists(), "the caller's file stays for its next attempt"

    again = write_placed(uri, Append(), files, TxnVersion(APP, 1, None))
    assert again.outcome.version == 1, again.outcome.reason
    assert ids(uri) == {**OLD, 5: "new"}


def test_placed_and_staged_files_are_not_both_given(tmp_path: Path) -> None:
    uri = tmp_path / "orders"
    make_table(uri)
    files = place(uri, [(5, "new")])
    with pytest.raises(ValueError, match="not both"):
        write(
            committer_for(str(uri)),
            stage(uri, [[(6, "x")]]),
            Append(),
            RunRecord((), {}),
            schema=SCHEMA,
            partition_by=[],
            placed=(files,),
        )
    with pytest.raises(ValueError, match="one region per read: 2 region"):
        write_placed(uri, Replace((window(1, 1), window(2, 2))), files, TxnVersion(APP, 1))
