"""Rebuilding a file-path pipeline's state from what survives any log maintenance: the tables.

``watermark-assets repair-state PIPELINE`` is the one recovery when the state cannot be caught up
from the log (:class:`~watermark_assets.exceptions.StateHistoryLostError`: the checkpoint was
deleted, or restored from an old backup, and the commits after it were cleaned up). The table's
current rows name their landing file (the lineage column; for ``parquet_commit`` the add actions
name the file itself), and so does the quarantine table: every such file counts as committed,
each landing partition's watermark is its greatest committed file, the counts are the rows per
file and Dagster partition. The checkpoint written records the table version read, so the next
load reads only the commits after it.

What it cannot know, and says: a committed file none of whose rows are left in the tables (an
empty file, rows deleted since) is not seen. When it was the last of its landing partition, the
rebuilt watermark sits below it and a later run ingests it again (nothing for an empty file; the
deleted rows come back otherwise).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from watermark_assets.config import Pipeline
from watermark_assets.core.checkpoint import Totals
from watermark_assets.core.filepath.path import split_path
from watermark_assets.exceptions import CheckpointError
from watermark_assets.state.horizons import pruned_watermark
from watermark_assets.state.load import (
    PipelineState,
    checkpoint_store,
    table_lineage,
    watermark_of,
)
from watermark_assets.state.store import Stored


@dataclass(frozen=True)
class Rebuilt:
    """What a rebuild found and wrote."""

    state: PipelineState
    files: int
    rows: int
    partitions: int
    outside_partitions: int  # committed files with no Dagster partition (counted in files only)

    def line(self, pipeline: str) -> str:
        version = self.state.delta_version
        return (
            f"{pipeline}: state rebuilt from Delta version {version} of the table: {self.files} "
            f"committed files, {self.rows} rows, {self.partitions} partitions; watermark "
            f"{self.state.watermark.value or '-'}. Files whose rows are all gone from the tables "
            "(empty files, deleted rows) are not known as committed"
        )


def rebuild_state(
    pipeline: Pipeline, key_of: Callable[[str], str | None], *, now: datetime
) -> Rebuilt:
    """Rebuild the state from the tables and write it as the checkpoint (replacing any)."""
    lineage = table_lineage(pipeline)
    if lineage.version is None:
        raise CheckpointError(
            f"pipeline {pipeline.name!r}: there is no table at {pipeline.table.uri!r} to rebuild "
            "the state from; delete the checkpoint to start from the beginning",
            location=pipeline.checkpoint_uri,
        )
    rows: Counter[str] = Counter()
    prefixes: dict[str, str] = {}
    landed: Counter[str] = Counter()
    outside = 0
    for path, count in lineage.rows.items():
        prefix = split_path(path)[0]
        landed[prefix] += 1
        key = key_of(path)
        if key is None:
            outside += 1
            continue
        rows[key] += count
        prefixes[key] = max(prefixes.get(key, prefix), prefix)
    watermark = pruned_watermark(pipeline, watermark_of(lineage.files), now)
    kept = watermark.partition_watermarks
    totals = Totals(len(lineage.rows), sum(lineage.rows.values()), len(rows))
    store = checkpoint_store(pipeline)
    txn_sum = store.exact_txn_sum(lineage.version)
    state = PipelineState(
        watermark=watermark,
        delta_version=lineage.version,
        checkpoint=None,
        files_since_checkpoint=0,
        partition_rows={k: n for k, n in rows.items() if prefixes[k] in kept},
        partition_files={p: n for p, n in landed.items() if p in kept},
        partition_prefixes={k: p for k, p in prefixes.items() if p in kept},
        totals=totals,
        txn_sum=txn_sum,
    )
    checkpoint = state.to_checkpoint(int(now.timestamp()))
    store.write(Stored(checkpoint, lineage.version, txn_sum), force=True)
    return Rebuilt(state, totals.files, totals.rows, totals.partitions, outside)
