"""The child processes of tests/test_concurrency.py's races, in a module of their own: a
``spawn`` child imports the module of its target, and this one imports only what the children
use (test_concurrency.py imports Dagster and the whole project: ~2 s of CPU per child)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any


def create_at_once(uris: Sequence[str], name: str, start: Any, outcomes: Any) -> None:
    """For each of ``uris`` in turn (a round each): write one Parquet file under it and commit
    it with txn ``p`` = 0 once ``start`` (a barrier of every process) releases them all: each
    finds no table, all race to create it. Puts ``(round, stale)`` on ``outcomes``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from watermark_assets.delta.committer import DeltaCommitter, TxnVersion
    from watermark_assets.delta.stats import describe_data_files

    for round_number, uri in enumerate(uris):
        os.makedirs(uri, exist_ok=True)
        pq.write_table(pa.table({"id": [1, 2, 3]}), f"{uri}/{name}.parquet")
        files = describe_data_files(uri, [f"{name}.parquet"], [])
        start.wait(timeout=120)  # a partner that died breaks the barrier: no hang
        outcome = DeltaCommitter(uri).commit(
            files,
            schema=pa.schema([("id", pa.int64())]),
            partition_by=[],
            txns=[TxnVersion("p", 0, None)],
            custom_metadata={},
        )
        outcomes.put((round_number, outcome.stale))


def replace_slowly(uri: str, version: int, started: Any, pause: float) -> None:
    """Replace the file with ``version`` unless it holds a newer one, pausing ``pause`` seconds
    between reading the current content and writing (a slow writer)."""
    from watermark_assets import storage

    def keep(current: str) -> bool:
        started.set()
        time.sleep(pause)
        return int(current) > version

    storage.replace_text_unless(uri, str(version), keep=keep)
