"""What a file-path commit records in the Delta log, and the log read back.

Every commit of a pipeline carries a ``watermark_assets`` entry in its commitInfo
(:class:`CommitMetadata`): the watermark before and after (tagged with its kind), counts and the
exact source files. The txn app ids (``watermark_assets/{pipeline}/{partition_key}``, and the
quarantine's) are the optimistic locks of the commits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from watermark_assets import names
from watermark_assets.config import Pipeline
from watermark_assets.core.filepath.watermark import FileWatermark
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.delta.log import CommitRecord

#: The commitInfo key under which each commit records the progress it made.
COMMIT_METADATA_KEY = names.FILE_COMMIT_KEY


#: The commitInfo key of a quarantine table's commits: the data commit they complete.
QUARANTINE_METADATA_KEY = names.QUARANTINE_COMMIT_KEY


@dataclass(frozen=True)
class CommitMetadata:
    """What one commit records about a pipeline's progress (JSON in the commitInfo).

    ``source_files`` are the landing files the commit ingested (exact: a run that planned before
    this commit finds its own files here and never commits them twice). ``quarantine_files`` are
    the Parquet files of the batch's quarantined records, already in the quarantine table's folder
    (paths relative to it): this commit is their single decision point, and
    ``kinds/file_path/commit.complete_quarantine`` adds them to the quarantine table right after,
    exactly once.
    """

    pipeline: str
    source: str
    run_id: str
    partition_keys: tuple[str, ...]
    watermark_before: FileWatermark
    watermark_after: FileWatermark
    files: int
    rows_read: int
    rows_quarantined: int
    rows_committed: int
    per_partition: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: files this commit added per landing partition prefix
    partition_files: Mapping[str, int] = field(default_factory=dict)
    source_files: tuple[str, ...] = ()
    quarantine_files: tuple[str, ...] = ()
    files_quarantined: int = 0
    #: a late run's commit: files that landed below their partition's watermark (own txn ids)
    late: bool = False
    #: per Dagster partition, the newest landing partition of its files in this commit (None: a
    #: commit written before it was recorded; every key then takes the commit's newest prefix)
    partition_prefixes: Mapping[str, str] | None = None
    #: Dagster partitions this commit committed first (their txn had no version before): the
    #: running count of partitions (None: not recorded, counted from the state's keys instead)
    new_partitions: tuple[str, ...] | None = None
    #: per source file, its content signature when it was planned (``storage.content_signature``:
    #: size and mtime, or ETag on S3): a later listing that returns another one finds it rewritten
    source_signatures: Mapping[str, str] = field(default_factory=dict)
    #: a rewrite commit (``on_rewrite: replace``): the rows of its one source file it removed
    #: (None: an ingestion commit). Its file and rows were counted by the file's first commit.
    rows_replaced: int | None = None

    def prefixes_by_partition(self) -> dict[str, str]:
        """The newest landing partition of each Dagster partition's files in this commit."""
        if self.partition_prefixes is not None:
            return dict(self.partition_prefixes)
        newest = max(self.partition_files, default=None)
        return {} if newest is None else dict.fromkeys(self.partition_keys, newest)

    def rows_committed_by_partition(self) -> dict[str, int]:
        """Rows this commit added per Dagster partition (read minus quarantined)."""
        return {
            key: int(counts.get("rows_read", 0)) - int(counts.get("rows_quarantined", 0))
            for key, counts in self.per_partition.items()
        }

    def to_json(self) -> str:
        return json.dumps(
            {
                "pipeline": self.pipeline,
                "source": self.source,
                "run_id": self.run_id,
                "partition_keys": list(self.partition_keys),
                "watermark_before": _watermark_json(self.watermark_before),
                "watermark_after": _watermark_json(self.watermark_after),
                "files": self.files,
                "rows_read": self.rows_read,
                "rows_quarantined": self.rows_quarantined,
                "rows_committed": self.rows_committed,
                "per_partition": {k: dict(v) for k, v in self.per_partition.items()},
                "partition_files": dict(self.partition_files),
                "source_files": list(self.source_files),
                "quarantine_files": list(self.quarantine_files),
                "files_quarantined": self.files_quarantined,
                **({"late": True} if self.late else {}),
                **(
                    {"partition_prefixes": dict(self.partition_prefixes)}
                    if self.partition_prefixes is not None
                    else {}
                ),
                **(
                    {"new_partitions": list(self.new_partitions)}
                    if self.new_partitions is not None
                    else {}
                ),
                **(
                    {"source_signatures": dict(self.source_signatures)}
                    if self.source_signatures
                    else {}
                ),
                **({"rows_replaced": self.rows_replaced} if self.rows_replaced is not None else {}),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> CommitMetadata:
        raw = json.loads(text)
        return cls(
            pipeline=raw["pipeline"],
            source=raw["source"],
            run_id=raw["run_id"],
            partition_keys=tuple(raw["partition_keys"]),
            watermark_before=_watermark_from_json(raw["watermark_before"]),
            watermark_after=_watermark_from_json(raw["watermark_after"]),
            files=int(raw["files"]),
            rows_read=int(raw["rows_read"]),
            rows_quarantined=int(raw["rows_quarantined"]),
            rows_committed=int(raw["rows_committed"]),
            per_partition=raw.get("per_partition", {}),
            partition_files=raw.get("partition_files", {}),
            source_files=tuple(raw.get("source_files", ())),
            quarantine_files=tuple(raw.get("quarantine_files", ())),
            files_quarantined=int(raw.get("files_quarantined", 0)),
            late=bool(raw.get("late", False)),
            partition_prefixes=raw.get("partition_prefixes"),
            new_partitions=(
                tuple(raw["new_partitions"]) if raw.get("new_partitions") is not None else None
            ),
            source_signatures=raw.get("source_signatures", {}),
            rows_replaced=(
                int(raw["rows_replaced"]) if raw.get("rows_replaced") is not None else None
            ),
        )


def _watermark_json(watermark: FileWatermark) -> dict[str, object]:
    """The watermark in a commit's metadata, tagged with its kind (the contract's name)."""
    return {"kind": watermark.kind, **watermark.to_dict()}


def _watermark_from_json(raw: Mapping[str, object]) -> FileWatermark:
    """Read :func:`_watermark_json`'s shape; commits written before the tag are file-path ones."""
    kind = raw.get("kind", FileWatermark.kind)
    if kind != FileWatermark.kind:
        raise ValueError(
            f"a commit holds a {kind!r} watermark where this pipeline keeps file-path watermarks; "
            "was the table written by another pipeline kind?"
        )
    return FileWatermark.from_dict(
        raw["watermark"],  # type: ignore[arg-type]
        raw["partition_watermarks"],  # type: ignore[arg-type]
    )


def pipeline_metadata(record: CommitRecord, pipeline: Pipeline) -> CommitMetadata | None:
    """The pipeline's metadata in one commit (None: another pipeline's or writer's commit)."""
    text = record.custom_metadata.get(COMMIT_METADATA_KEY)
    if not text:
        return None
    metadata = CommitMetadata.from_json(text)
    if metadata.pipeline == pipeline.name and metadata.source == pipeline.source.name:
        return metadata
    return None


def pipeline_commits(
    committer: DeltaCommitter,
    pipeline: Pipeline,
    after: int | None,
    *,
    lost: Literal["raise", "skip"] = "raise",
) -> list[tuple[int, CommitMetadata]]:
    """This pipeline's commits newer than ``after``, ascending, with their metadata (``lost``:
    see :meth:`~watermark_assets.delta.log.DeltaLog.read_commits_after`)."""
    found = []
    for record in committer.read_commits_after(after, lost=lost):
        metadata = pipeline_metadata(record, pipeline)
        if metadata is not None:
            found.append((record.version, metadata))
    return found


#: The txn appId under which a pipeline's quarantine table records the data version whose
#: quarantined records it holds last (data commits complete into it in version order).
quarantine_app_id = names.quarantine_app_id
#: The txn appId of the rewrite commits of one landing file (each replace of its rows is the next
#: version: a retry of a replace that committed finds the file's signature recorded).
rewrite_app_id = names.rewrite_app_id
#: The Delta txn appId of one Dagster partition of one pipeline.
txn_app_id = names.partition_app_id
