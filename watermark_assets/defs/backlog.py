"""A file-path pipeline's backlog as numbers, from one sensor tick's listing: how many files and
bytes wait above the watermarks, and how old the oldest of them is (its landing time: the time
its name encodes, else its landing partition's).

The listing stops after ``max_files_per_run * max_runs_per_tick`` files (a tick's work is
bounded), so the counts are "at least" when ``backlog/listing_capped`` is true.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dagster import MetadataValue

from watermark_assets import vocabulary as v
from watermark_assets.config import Pipeline
from watermark_assets.core.filepath.path import name_time, split_path
from watermark_assets.sources.file_discovery import FileGroups

#: the backlog's metadata keys (on the sensor's observation of the asset) that
#: ``defs/backlog_check.py`` reads back
FILES_PENDING = v.BACKLOG_FILES_PENDING
BYTES_PENDING = v.BACKLOG_BYTES_PENDING
OLDEST_PENDING_TIME = v.BACKLOG_OLDEST_PENDING_TIME
LISTING_CAPPED = v.BACKLOG_LISTING_CAPPED


@dataclass(frozen=True, kw_only=True)
class Backlog:
    """The files above the watermarks one tick found."""

    files: int
    bytes: int
    #: the landing time of the oldest pending file (None: none pending)
    oldest: datetime | None
    oldest_file: str | None
    capped: bool

    def age_seconds(self, now: datetime) -> float:
        return 0.0 if self.oldest is None else max(0.0, (now - self.oldest).total_seconds())

    def metadata(self, now: datetime) -> dict[str, Any]:
        entries: dict[str, Any] = {
            v.BACKLOG_FILES_PENDING: MetadataValue.int(self.files),
            v.BACKLOG_BYTES_PENDING: MetadataValue.int(self.bytes),
            **v.duration_entries(v.BACKLOG_OLDEST_PENDING_AGE, self.age_seconds(now)),
            v.BACKLOG_LISTING_CAPPED: MetadataValue.bool(self.capped),
        }
        if self.oldest is not None:
            entries[v.BACKLOG_OLDEST_PENDING_TIME] = MetadataValue.text(v.time_text(self.oldest))
            entries[v.BACKLOG_OLDEST_PENDING_FILE] = MetadataValue.text(self.oldest_file or "")
        return entries


def landing_time(pipeline: Pipeline, path: str) -> datetime | None:
    """When a file landed, as its name says (else its landing partition's time)."""
    prefix, name = split_path(path)
    return name_time(name) or pipeline.watermark.template.try_parse(prefix)


def file_backlog(pipeline: Pipeline, groups: FileGroups, *, limit: int | None) -> Backlog:
    """The backlog of one tick's listing (``limit``: the listing's cap)."""
    pending = [path for files in groups.by_partition.values() for path in files]
    timed = [(when, path) for path in pending if (when := landing_time(pipeline, path))]
    oldest = min(timed, default=None)
    listed = len(pending) + len(groups.unreadable) + len(groups.unsortable)
    return Backlog(
        files=len(pending),
        bytes=sum(groups.sizes.get(path, 0) for path in pending),
        oldest=None if oldest is None else oldest[0],
        oldest_file=None if oldest is None else oldest[1],
        capped=limit is not None and listed >= limit,
    )
