"""The Delta metadata provider (the default): the watermark travels in the data commit itself.

The watermark of a dataflow is an entry of the ``commitInfo`` custom metadata of the Delta commit
that writes the dataflow's rows::

    "watermark_assets.column_watermark/orders": "{\"watermark\": \"{\\\"updated_at\\\": ...}\",
                                                  \"job_id\": \"orders_job\",
                                                  \"dataflow_run_id\": \"...\"}"

so data and progress are ONE atomic commit: there is no moment where rows are committed and the
watermark is not, or the reverse. Consequently ``update_watermark`` does not exist here: there is
nothing to write after the commit. :func:`commit_metadata_entry` (and
:meth:`DeltaMetadataProvider.commit_metadata`) turns ``(dataflow_id, text, job_id, run id)`` into
the entry that the committer adds to ``CommitProperties(custom_metadata=...)``;
``WatermarkManager.commit_then_save`` hands it to the commit.

Reading (:meth:`DeltaMetadataProvider.get_watermark`): the newest commit of the table's log that
carries an entry for the dataflow, walking back from the latest version (commits of other
dataflows, OPTIMIZE or VACUUM in between are skipped). No table, or no such commit down to version
0: None (nothing read yet). If the walk reaches commits that the log cleaned up after a Delta
checkpoint (``delta.logRetentionDuration``, 30 days by default) before finding one, the watermark
is unknown and :class:`~watermark_assets.core.errors.WatermarkHistoryLostError` is raised: "read
everything" would duplicate rows. A dataflow that commits at least once per retention period never
meets it; the generic checkpoint (issue 7, step 1) will make it a fast path too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import pyarrow.compute as pc
from deltalake import DeltaTable

from watermark_assets import names, storage
from watermark_assets.core.errors import WatermarkProviderError
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.delta.log import CommitRecord
from watermark_assets.delta.read import read_columns
from watermark_assets.providers.base import WatermarkRecord
from watermark_assets.state.snapshot import StateLog, pipeline_txn_prefix

if TYPE_CHECKING:
    from watermark_assets.config import ColumnPipelineConfig

KEY_PREFIX = names.COLUMN_WATERMARK_PREFIX
"""The custom metadata key of a dataflow's watermark is this prefix + the dataflow id."""


def metadata_key(dataflow_id: str) -> str:
    """The commitInfo key that holds ``dataflow_id``'s watermark."""
    if not dataflow_id:
        raise WatermarkProviderError(
            "a dataflow id is needed to key its watermark in the commit; got ''",
            provider=DeltaMetadataProvider.name,
        )
    return names.column_watermark_key(dataflow_id)


def commit_metadata_entry(
    dataflow_id: str,
    watermark_value: str,
    *,
    job_id: str | None,
    dataflow_run_id: str | None,
    boundary: str | None = None,
) -> dict[str, str]:
    """The custom metadata entry that makes a Delta commit carry this watermark (and, when
    given, the boundary rows of that watermark: :mod:`watermark_assets.core.column.boundary`)."""
    envelope: dict[str, str | None] = {
        "watermark": watermark_value,
        "job_id": job_id,
        "dataflow_run_id": dataflow_run_id,
    }
    if boundary is not None:
        envelope["boundary"] = boundary
    return {metadata_key(dataflow_id): json.dumps(envelope)}


def with_boundary(
    entries: Mapping[str, str], dataflow_id: str, boundary: Callable[[str], str | None]
) -> dict[str, str]:
    """``entries`` with ``boundary(watermark text)`` added to the dataflow's watermark entry
    (the watermark the commit carries decides which boundary belongs to it; None adds none)."""
    key = metadata_key(dataflow_id)
    if key not in entries:
        return dict(entries)
    envelope = json.loads(entries[key])
    text = boundary(envelope["watermark"])
    if text is None:
        return dict(entries)
    return {**entries, key: json.dumps({**envelope, "boundary": text})}


def watermark_record(dataflow_id: str, commit: CommitRecord) -> WatermarkRecord | None:
    """The watermark ``commit`` carries for ``dataflow_id``, or None."""
    entry = commit.custom_metadata.get(metadata_key(dataflow_id))
    if entry is None:
        return None
    try:
        envelope = json.loads(entry)
        text = envelope["watermark"]
        if not isinstance(text, str):
            raise TypeError(f"'watermark' is {text!r}, not the watermark's JSON text")
    except (ValueError, KeyError, TypeError) as exc:
        raise WatermarkProviderError(
            f"commit {commit.version} carries an unreadable watermark entry for {dataflow_id!r} "
            f"({exc!r}): {entry!r}. Delta commits are immutable: commit a corrected watermark "
            "with a file or postgres provider, or start a new dataflow id",
            provider=DeltaMetadataProvider.name,
            dataflow_id=dataflow_id,
        ) from exc
    return WatermarkRecord(
        dataflow_id=dataflow_id,
        watermark=text,
        job_id=envelope.get("job_id"),
        dataflow_run_id=envelope.get("dataflow_run_id"),
        updated_at=datetime.fromtimestamp(commit.timestamp_ms / 1000, tz=timezone.utc),
        delta_version=commit.version,
        boundary=_text_or_none(envelope.get("boundary")),
    )


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


class RecordFold:
    """A dataflow's entries folded to the newest one (its state: that record, as JSON)."""

    def __init__(self, dataflow_id: str) -> None:
        self._dataflow_id = dataflow_id

    def empty(self) -> WatermarkRecord | None:
        return None

    def fold(
        self, state: WatermarkRecord | None, entry: str, commit: CommitRecord
    ) -> WatermarkRecord | None:
        return watermark_record(self._dataflow_id, commit)

    def dumps(self, state: WatermarkRecord | None) -> str:
        if state is None:
            return "null"
        return json.dumps(
            {
                "watermark": state.watermark,
                "job_id": state.job_id,
                "dataflow_run_id": state.dataflow_run_id,
                "updated_at_ms": round(state.updated_at.timestamp() * 1000)
                if state.updated_at
                else None,
                "delta_version": state.delta_version,
                "boundary": state.boundary,
            }
        )

    def loads(self, text: str) -> WatermarkRecord | None:
        raw = json.loads(text)
        if raw is None:
            return None
        updated = raw.get("updated_at_ms")
        return WatermarkRecord(
            dataflow_id=self._dataflow_id,
            watermark=raw["watermark"],
            job_id=raw.get("job_id"),
            dataflow_run_id=raw.get("dataflow_run_id"),
            updated_at=None
            if updated is None
            else datetime.fromtimestamp(updated / 1000, tz=timezone.utc),
            delta_version=raw.get("delta_version"),
            boundary=_text_or_none(raw.get("boundary")),
        )


class DeltaMetadataProvider:
    """Reads watermarks from the commits of the Delta table at ``table_uri`` (module docstring).

    ``pipeline``: the pipeline whose commits carry the entries (the recovery command names it;
    its txn app ids decide a gap in the log). Unknown: every pipeline of this project on the
    table counts (a coarser, still safe, decision)."""

    name = "delta_metadata"

    def __init__(
        self,
        table_uri: str,
        *,
        storage_options: Mapping[str, str] | None = None,
        pipeline: str | None = None,
    ) -> None:
        self.table_uri = table_uri
        self._committer = DeltaCommitter(table_uri, storage_options=storage_options)
        self._pipeline = pipeline

    def get_watermark(self, dataflow_id: str) -> str | None:
        record = self.get_record(dataflow_id)
        return None if record is None else record.watermark

    def get_record(self, dataflow_id: str) -> WatermarkRecord | None:
        """The newest record: the state snapshot and the commits after it (StateLog)."""
        return column_state_log(self.table_uri, dataflow_id, self._pipeline).read()

    def commit_metadata(
        self,
        dataflow_id: str,
        watermark_value: str,
        *,
        job_id: str | None,
        dataflow_run_id: str | None,
    ) -> dict[str, str]:
        return commit_metadata_entry(
            dataflow_id, watermark_value, job_id=job_id, dataflow_run_id=dataflow_run_id
        )


def column_state_log(
    table_uri: str, dataflow_id: str, pipeline: str | None
) -> StateLog[WatermarkRecord | None]:
    """The state log of a dataflow's newest watermark record. ``pipeline`` unknown: the provider
    is used on its own, with the caller's commits, which may carry no txn, so no txn proves a
    gap harmless: cleaned commits after the stored state, or before a first read, are lost
    history (WatermarkHistoryLostError), never "read everything"."""
    return StateLog(
        table_uri,
        metadata_key(dataflow_id),
        RecordFold(dataflow_id),
        txn_prefix=names.TXN_ROOT if pipeline is None else pipeline_txn_prefix(pipeline),
        pipeline=pipeline or dataflow_id,
        legacy=lambda committer: _newest_record(committer, dataflow_id),
        txns_mark_commits=pipeline is not None,
    )


def _newest_record(
    committer: DeltaCommitter, dataflow_id: str
) -> tuple[WatermarkRecord | None, int]:
    """A table from before state snapshots: walk back to the newest commit with an entry."""
    commit, latest = committer.log.newest_commit_with(
        metadata_key(dataflow_id), dataflow=dataflow_id
    )
    return (None if commit is None else watermark_record(dataflow_id, commit)), latest


def table_watermark(
    pipeline: ColumnPipelineConfig, kept: WatermarkRecord | None
) -> WatermarkRecord:
    """The record of the greatest watermark value among the table's rows (in the watermark's
    column order): what the rows themselves prove was committed, whatever the log lost."""
    from watermark_assets.core.column.watermark import ColumnWatermark

    columns = list(pipeline.watermark.columns)
    table = DeltaTable(
        pipeline.table.uri, storage_options=storage.delta_options(pipeline.table.uri)
    )
    rows = read_columns(table, columns)
    rows = rows.filter(pc.invert(pc.is_null(rows.column(columns[0]))))
    if rows.num_rows == 0:
        raise WatermarkProviderError(
            f"the table {pipeline.table.uri!r} holds no row with {columns[0]!r}: no watermark can "
            "be recovered from it; delete the state snapshot to read everything again",
            provider=DeltaMetadataProvider.name,
            dataflow_id=pipeline.dataflow_id,
        )
    top = rows.sort_by([(c, "descending") for c in columns]).slice(0, 1).to_pylist()[0]
    value = ColumnWatermark(tuple(columns), tuple(top[c] for c in columns))
    return WatermarkRecord(
        dataflow_id=pipeline.dataflow_id,
        watermark=value.to_json(),
        job_id=None if kept is None else kept.job_id,
        dataflow_run_id="repair-state",
        updated_at=datetime.now(tz=timezone.utc),
        delta_version=None if kept is None else kept.delta_version,
    )
