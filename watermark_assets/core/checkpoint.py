"""The checkpoint file (schema_version 1) and when to write it.

The format is the seed's, plus ``delta_version``: the version of the Delta table whose commits the
checkpoint reflects (a reader replays newer commits). It is written only when known, so a
checkpoint without it is byte for byte the seed's example::

    {
      "schema_version": 1,
      "watermark": {"state": "Active", "value": "date=2024-01-28/1706450400-uuid.ndjson.gz"},
      "partition_watermarks": {"date=2024-01-28": "1706450400-uuid.ndjson.gz"},
      "last_update_ts": 1706450500,
      "delta_version": 3
    }

(written with an indent of 2, keys in that order). ``partition_rows`` (rows committed so far per
Dagster partition, for Dagster's ``dagster/partition_row_count``), ``partition_prefixes`` (the
newest landing partition each Dagster partition committed files of: its entry is pruned with that
landing partition's watermark) and ``partition_files`` (files committed so far per landing
partition, to notice files that land below a watermark) follow when there are any, then
``totals`` (files, rows and Dagster partitions committed since the first commit: running numbers,
never pruned), ``txn_sum`` (the sum of the pipeline's txn versions at ``delta_version``, which
the table's own checkpoint keeps: see :mod:`watermark_assets.state.load`) and
``file_signatures`` (per committed file of the retained landing partitions, its size and mtime or
ETag when committed: a listing that returns another finds the file rewritten in place). Then
``own_files`` (where the landing folder is the table's, ``parquet_commit``: the files the table
wrote there itself, OPTIMIZE's and Z-order's output, a DML's rewrite, which are never landing
files, even once the table forgot them; a sorted list). Every map is bounded by the retained
landing partitions, not by the history.
The checkpoint is generic over the watermark kind (:mod:`watermark_assets.core.watermark`): a
file-path watermark is written in the seed's shape above, any other kind as ``"kind"`` plus its
``to_json()`` under ``"watermark"`` (no ``partition_watermarks``). A reader says which kind it
expects; a checkpoint of another kind is refused (it belongs to another pipeline's table).

A checkpoint that cannot be read is never silently reset: it raises
:class:`~watermark_assets.exceptions.CorruptCheckpointError` or
:class:`~watermark_assets.exceptions.UnknownCheckpointSchemaError`. Unknown extra keys are
ignored, so schema 1 can gain optional keys as it gained ``delta_version``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from watermark_assets.core.errors import (
    CorruptCheckpointError,
    UnknownCheckpointSchemaError,
)
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.core.watermark import Watermark

SCHEMA_VERSION = 1

#: The kind written in the seed's shape (no ``"kind"`` key: the seed's files are this kind).
SEED_KIND = FileWatermark.kind

W = TypeVar("W", bound=Watermark[Any])


@dataclass(frozen=True)
class Totals:
    """What a pipeline committed since its first commit: landing files, data rows and Dagster
    partitions (running numbers: they survive the pruning of the per-partition maps)."""

    files: int = 0
    rows: int = 0
    partitions: int = 0

    def plus(self, *, files: int, rows: int, partitions: int) -> Totals:
        return Totals(self.files + files, self.rows + rows, self.partitions + partitions)

    def to_dict(self) -> dict[str, int]:
        return {"files": self.files, "rows": self.rows, "partitions": self.partitions}


def _is_int(value: object) -> bool:
    # bool is an int subclass in Python; true is not a timestamp.
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Checkpoint(Generic[W]):
    """What a checkpoint file holds: the watermark (of any kind), when it was written (Unix
    seconds) and the Delta table version it reflects (None when not known, e.g. the seed's own
    files)."""

    watermark: W
    last_update_ts: int
    delta_version: int | None = None
    partition_rows: Mapping[str, int] = field(default_factory=dict)
    partition_files: Mapping[str, int] = field(default_factory=dict)
    partition_prefixes: Mapping[str, str] = field(default_factory=dict)
    #: None in a checkpoint written before the totals were kept (see :meth:`legacy_totals`)
    totals: Totals | None = None
    #: the sum of the versions of the pipeline's txn app ids at ``delta_version``: tells whether
    #: commits cleaned from the log after that version were the pipeline's (None: not recorded)
    txn_sum: int | None = None
    #: per committed landing file of the retained landing partitions, its content signature
    #: when committed (size and mtime, or ETag): pruned with its partition's watermark
    file_signatures: Mapping[str, str] = field(default_factory=dict)
    #: files the table wrote under its landing folder itself (``parquet_commit``: OPTIMIZE's
    #: output), recorded as the log is read: never landing files, pruned with their partitions
    own_files: frozenset[str] = frozenset()

    def legacy_totals(self) -> Totals:
        """The totals, or for a checkpoint written before they were kept the best it can say:
        its maps were never pruned then except ``partition_files`` (a lower bound of files)."""
        if self.totals is not None:
            return self.totals
        return Totals(
            sum(self.partition_files.values()),
            sum(self.partition_rows.values()),
            len(self.partition_rows),
        )

    def dumps(self) -> str:
        """The checkpoint JSON (see the module docstring)."""
        document: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        if isinstance(self.watermark, FileWatermark):
            document.update(self.watermark.to_dict())
        else:
            document["kind"] = self.watermark.kind
            document["watermark"] = json.loads(self.watermark.to_json())
        document["last_update_ts"] = self.last_update_ts
        if self.delta_version is not None:
            document["delta_version"] = self.delta_version
        if self.partition_rows:
            document["partition_rows"] = dict(sorted(self.partition_rows.items()))
        if self.partition_prefixes:
            document["partition_prefixes"] = dict(sorted(self.partition_prefixes.items()))
        if self.partition_files:
            document["partition_files"] = dict(sorted(self.partition_files.items()))
        if self.totals is not None:
            document["totals"] = self.totals.to_dict()
        if self.txn_sum is not None:
            document["txn_sum"] = self.txn_sum
        if self.file_signatures:
            document["file_signatures"] = dict(sorted(self.file_signatures.items()))
        if self.own_files:
            document["own_files"] = sorted(self.own_files)
        return json.dumps(document, indent=2, ensure_ascii=False)

    @staticmethod
    def loads(text: str, *, location: str, kind: type[W]) -> Checkpoint[W]:
        """Read a checkpoint holding a watermark of ``kind``; ``location`` (its URI) is only used
        in error messages."""
        try:
            document = json.loads(text)
        except ValueError as error:
            raise CorruptCheckpointError(location, f"not JSON: {error}") from error
        if not isinstance(document, dict):
            raise CorruptCheckpointError(location, "the top level is not a JSON object")
        if "schema_version" not in document:
            raise CorruptCheckpointError(location, "no 'schema_version'")
        version = document["schema_version"]
        if not _is_int(version) or version != SCHEMA_VERSION:
            raise UnknownCheckpointSchemaError(location, version)
        stored_kind = document.get("kind", SEED_KIND)
        if stored_kind != kind.kind:
            raise CorruptCheckpointError(
                location, f"it holds a {stored_kind!r} watermark, not a {kind.kind!r} one"
            )
        seed_shape = ("partition_watermarks",) if stored_kind == SEED_KIND else ()
        for key in ("watermark", *seed_shape, "last_update_ts"):
            if key not in document:
                raise CorruptCheckpointError(location, f"no {key!r}")
        last_update_ts = document["last_update_ts"]
        if not _is_int(last_update_ts):
            raise CorruptCheckpointError(
                location, f"'last_update_ts' is {last_update_ts!r}, not Unix seconds"
            )
        delta_version = document.get("delta_version")
        if delta_version is not None and not (_is_int(delta_version) and delta_version >= 0):
            raise CorruptCheckpointError(
                location, f"'delta_version' is {delta_version!r}, not a table version"
            )
        counts = {}
        for key in ("partition_rows", "partition_files"):
            value = document.get(key, {})
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and _is_int(v) and v >= 0 for k, v in value.items()
            ):
                raise CorruptCheckpointError(
                    location, f"{key!r} is {value!r}, not partition -> count"
                )
            counts[key] = value
        prefixes = document.get("partition_prefixes", {})
        if not isinstance(prefixes, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in prefixes.items()
        ):
            raise CorruptCheckpointError(
                location, f"'partition_prefixes' is {prefixes!r}, not partition -> prefix"
            )
        totals = None
        if "totals" in document:
            raw = document["totals"]
            names = ("files", "rows", "partitions")
            if not isinstance(raw, dict) or not all(
                _is_int(raw.get(n)) and raw[n] >= 0 for n in names
            ):
                raise CorruptCheckpointError(
                    location, f"'totals' is {raw!r}, not {{files, rows, partitions}} counts"
                )
            totals = Totals(*(int(raw[n]) for n in names))
        txn_sum = document.get("txn_sum")
        if txn_sum is not None and not (_is_int(txn_sum) and txn_sum >= 0):
            raise CorruptCheckpointError(location, f"'txn_sum' is {txn_sum!r}, not a count")
        signatures = document.get("file_signatures", {})
        if not isinstance(signatures, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in signatures.items()
        ):
            raise CorruptCheckpointError(
                location, f"'file_signatures' is {signatures!r}, not file -> signature"
            )
        own = document.get("own_files", [])
        if not isinstance(own, list) or not all(isinstance(path, str) for path in own):
            raise CorruptCheckpointError(location, f"'own_files' is {own!r}, not a list of files")
        try:
            if seed_shape:
                watermark: Any = FileWatermark.from_dict(
                    document["watermark"], document["partition_watermarks"]
                )
            else:
                watermark = kind.from_json(json.dumps(document["watermark"]))
        except (TypeError, ValueError) as error:
            raise CorruptCheckpointError(location, str(error)) from error
        return Checkpoint(
            watermark,
            last_update_ts,
            delta_version,
            counts["partition_rows"],
            counts["partition_files"],
            prefixes,
            totals,
            txn_sum,
            signatures,
            frozenset(own),
        )


@dataclass(frozen=True)
class CheckpointPolicy:
    """When to write a checkpoint: after ``interval_files`` files or ``interval_secs`` seconds,
    whichever comes first (the seed's ``checkpoint`` settings). ``interval_files`` must be positive;
    ``interval_secs`` may be 0 (write at every commit), as the configuration allows."""

    interval_files: int = 100
    interval_secs: int = 60

    def __post_init__(self) -> None:
        for name, least, expected in (
            ("interval_files", 1, "a positive integer"),
            ("interval_secs", 0, "a positive integer or 0"),
        ):
            value = getattr(self, name)
            if not _is_int(value) or value < least:
                raise ValueError(f"checkpoint {name} is {value!r}; expected {expected}")

    def is_due(self, files_since_write: int, last_update_ts: int | None, now_ts: int) -> bool:
        """Whether to write now: never written yet (``last_update_ts`` None), at least
        ``interval_files`` files since the last write, or at least ``interval_secs`` seconds."""
        if last_update_ts is None:
            return True
        return (
            files_since_write >= self.interval_files
            or now_ts - last_update_ts >= self.interval_secs
        )
