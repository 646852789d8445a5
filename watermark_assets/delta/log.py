"""The Delta transaction log, read directly: commit JSON files through fsspec.

:meth:`DeltaLog.read_commits_after` probes ``version + 1``, ``version + 2``... and lists the
``_delta_log`` directory only when those files were cleaned up after a Delta checkpoint; it then
starts at the oldest JSON present. Older commits survive only inside the checkpoint, which keeps the
table state (files, txn versions) but not the ``commitInfo`` metadata.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from fsspec.implementations.local import LocalFileSystem

from watermark_assets import storage
from watermark_assets.core.errors import WatermarkHistoryLostError
from watermark_assets.delta.stats import modification_time_ms
from watermark_assets.exceptions import DeltaCommitError, LogHistoryLostError

COMMIT_INFO_KEYS = frozenset(
    {
        "timestamp",
        "inCommitTimestamp",
        "operation",
        "operationParameters",
        "operationMetrics",
        "readVersion",
        "isolationLevel",
        "isBlindAppend",
        "engineInfo",
        "clientVersion",
        "txnId",
        "userId",
        "userName",
        "userMetadata",
        "job",
        "notebook",
        "clusterId",
        "tags",
        "version",
    }
)
"""commitInfo keys that Delta writers fill in; every other key is custom metadata."""


@dataclass(frozen=True)
class AddedFile:
    """One add action of a commit; ``path`` is unescaped and relative, like ``DataFile.path``."""

    path: str
    size: int
    num_records: int | None
    partition_values: Mapping[str, str | None]
    #: False for a file that only rearranges rows already in the table (OPTIMIZE, compaction)
    data_change: bool = True


@dataclass(frozen=True)
class CommitRecord:
    """One commit of the log: our custom metadata, its add and txn actions."""

    version: int
    timestamp_ms: int
    custom_metadata: Mapping[str, str]
    added: tuple[AddedFile, ...]
    txns: Mapping[str, int]
    #: paths of the files this commit removed with ``dataChange`` (rows deleted or replaced)
    removed_data: tuple[str, ...] = ()


class DeltaLog:
    """Reads the commits of the Delta table whose root is ``root`` on ``fs``."""

    def __init__(self, table_uri: str, fs: fsspec.AbstractFileSystem, root: str) -> None:
        self.table_uri = table_uri
        self._fs = fs
        self._log_dir = f"{str(root).rstrip('/')}/_delta_log"

    def read_commits_after(
        self, version: int | None, *, lost: Literal["raise", "skip"] = "raise"
    ) -> list[CommitRecord]:
        """The commits newer than ``version`` (all when None), ascending (module docstring).

        When some of them were cleaned up: :class:`LogHistoryLostError` (``lost="raise"``), or
        the ones still in the log (``lost="skip"``: the caller knows it reads a partial history).
        """
        start = 0 if version is None else version + 1
        current = start
        text = self._read_log_json(current)
        if text is None:
            oldest = self._oldest_commit_from(start)
            if oldest is None:
                return []
            if lost == "raise":
                raise LogHistoryLostError(self.table_uri, first_missing=start, oldest=oldest)
            current, text = oldest, self._read_log_json(oldest)
        records = []
        while text is not None:
            records.append(self._parse_commit(current, text))
            current += 1
            text = self._read_log_json(current)
        return records

    def read_commit(self, version: int) -> CommitRecord:
        """The commit ``version``; DeltaCommitError when its JSON is not (or no longer) there."""
        text = self._read_log_json(version)
        if text is None:
            raise DeltaCommitError(
                f"commit {version} of table {self.table_uri!r} is not in the log: it was never "
                "made, or it was cleaned up after a checkpoint (delta.logRetentionDuration). Read "
                "a newer version, or the table state from the checkpoint with deltalake",
                table_uri=self.table_uri,
            )
        return self._parse_commit(version, text)

    def latest_version(self) -> int | None:
        """The newest commit's version (None: no table), without loading the table's snapshot.

        From ``_last_checkpoint`` (or -1 without one), the commit JSON files after it are probed
        by galloping then bisecting: versions are dense and the JSON files after the last
        checkpoint are never cleaned up, so this costs one small read and ``O(log n)`` existence
        checks for ``n`` commits since, however long the history and however many files the
        table holds (``DeltaTable(uri).version()`` loads every live file's action first).
        """
        try:
            low = int(json.loads(self._fs.cat_file(f"{self._log_dir}/_last_checkpoint"))["version"])
        except FileNotFoundError:
            low = -1

        def exists(version: int) -> bool:
            return bool(self._fs.exists(f"{self._log_dir}/{version:020d}.json"))

        step = 1
        while exists(low + step):  # low exists (or is -1); gallop until a missing version
            low, step = low + step, step * 2
        high = low + step  # missing: the newest version is in [low, high)
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if exists(middle) else (low, middle)
        return None if low < 0 else low

    def newest_commit_with(self, key: str, *, dataflow: str) -> tuple[CommitRecord | None, int]:
        """The newest commit whose custom metadata holds ``key``, found walking back from the
        latest version (commits without it, another writer's or OPTIMIZE's, are passed), and
        that latest version (-1: no table). None: no commit down to version 0 holds it.

        The walk of a table from before state snapshots (its legacy readers). When it reaches a
        commit the log cleaned up before it finds one, the newest value may have been in it:
        :class:`~watermark_assets.core.errors.WatermarkHistoryLostError` naming ``dataflow``,
        never "no value" (which would read everything again).
        """
        latest = self.latest_version()
        if latest is None:
            return None, -1
        for version in range(latest, -1, -1):
            text = self._read_log_json(version)
            if text is None:
                raise WatermarkHistoryLostError(self.table_uri, dataflow, version + 1)
            commit = self._parse_commit(version, text)
            if key in commit.custom_metadata:
                return commit, latest
        return None, latest

    def checkpoint_txns(self, prefix: str) -> tuple[int, dict[str, int]] | None:
        """The last Delta checkpoint's version and its txn versions of the app ids that start
        with ``prefix`` (None: no checkpoint). A checkpoint keeps every app id's latest txn, so
        this is the state of those app ids at that version, whatever the log cleanup removed."""
        try:
            last = json.loads(self._fs.cat_file(f"{self._log_dir}/_last_checkpoint"))
        except FileNotFoundError:
            return None
        version, parts = int(last["version"]), last.get("parts")
        names = (
            [f"{version:020d}.checkpoint.parquet"]
            if not parts
            else [
                f"{version:020d}.checkpoint.{i:010d}.{parts:010d}.parquet"
                for i in range(1, parts + 1)
            ]
        )
        found: dict[str, int] = {}
        for name in names:
            column = self._read_parquet(f"{self._log_dir}/{name}", ["txn"]).column("txn")
            for txn in column.to_pylist():
                if txn is not None and str(txn["appId"]).startswith(prefix):
                    found[txn["appId"]] = int(txn["version"])
        return version, found

    def _read_parquet(self, path: str, columns: list[str]) -> pa.Table:
        """``columns`` of the Parquet file ``path`` of the log, never through a Python file
        object (:func:`~watermark_assets.storage.arrow_filesystem`: a process ending right
        after such a read could abort): a local file through Arrow's own filesystem, a file
        elsewhere fetched whole first (a checkpoint: one object, read once)."""
        if isinstance(self._fs, LocalFileSystem):
            return pq.read_table(path, columns=columns)
        data = storage.arrow_buffer(self._fs.cat_file(path))
        return pq.read_table(pa.BufferReader(data), columns=columns)

    def _read_log_json(self, version: int) -> str | None:
        try:
            data: bytes = self._fs.cat_file(f"{self._log_dir}/{version:020d}.json")
        except FileNotFoundError:
            return None
        return data.decode("utf-8")

    def _oldest_commit_from(self, start: int) -> int | None:
        """The oldest commit JSON >= ``start`` when ``start`` itself is missing, else None.

        JSON files newer than the last checkpoint are never cleaned up, so a missing ``start`` at
        or above the checkpoint just means "no such commit yet", with no listing needed.
        """
        try:
            last = json.loads(self._fs.cat_file(f"{self._log_dir}/_last_checkpoint"))
        except FileNotFoundError:
            return None
        if int(last["version"]) < start:
            return None
        self._fs.invalidate_cache(self._log_dir)  # s3fs caches listings
        versions = sorted(
            int(name[:-5])
            for name in (p.rsplit("/", 1)[-1] for p in self._fs.ls(self._log_dir, detail=False))
            if name.endswith(".json") and name[:-5].isdigit() and int(name[:-5]) >= start
        )
        return versions[0] if versions else None

    def _parse_commit(self, version: int, text: str) -> CommitRecord:
        info: dict[str, Any] = {}
        added: list[AddedFile] = []
        removed: list[str] = []
        txns: dict[str, int] = {}
        for line in text.splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "commitInfo" in action:
                info = action["commitInfo"]
            elif "add" in action:
                add = action["add"]
                stats = json.loads(add["stats"]) if add.get("stats") else {}
                added.append(
                    AddedFile(
                        unquote(add["path"]),
                        int(add["size"]),
                        stats.get("numRecords"),
                        add.get("partitionValues", {}),
                        bool(add.get("dataChange", True)),
                    )
                )
            elif "remove" in action and action["remove"].get("dataChange", True):
                removed.append(unquote(action["remove"]["path"]))
            elif "txn" in action:
                txns[action["txn"]["appId"]] = int(action["txn"]["version"])
        timestamp = info.get("inCommitTimestamp", info.get("timestamp"))
        if timestamp is None:
            timestamp = modification_time_ms(self._fs.info(f"{self._log_dir}/{version:020d}.json"))
        custom = {
            key: value if isinstance(value, str) else json.dumps(value)
            for key, value in info.items()
            if key not in COMMIT_INFO_KEYS
        }
        return CommitRecord(version, int(timestamp), custom, tuple(added), txns, tuple(removed))


def table_row_count(table_uri: str) -> int | None:
    """Rows in the table's current version, from the add actions' statistics (no data read)."""
    try:
        table = DeltaTable(table_uri, storage_options=storage.delta_options(table_uri))
    except TableNotFoundError:
        return None
    return rows_in(table)


def rows_in(table: DeltaTable) -> int:
    """Rows in a loaded snapshot, from its add actions' statistics (no data read)."""
    actions = pa.table(table.get_add_actions(flatten=True))
    total = pc.sum(actions.column("num_records")).as_py()
    return int(total or 0)
