"""Storage adapter: everything that lists or writes files goes through fsspec.

A location is a URI (a local path, ``file://`` or, later, ``s3://``). Listing walks the partition
directories with the pure :class:`~watermark_assets.core.listing.ListingPlan`, so directories below
the watermark's partition are never listed and only files above the watermark are returned.
Entries whose name starts with ``_`` or ``.`` (``_delta_log``, ``_watermarks``, ``_SUCCESS``,
``.tmp`` files) are never part of a source.
"""

from __future__ import annotations

import posixpath
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import fsspec
from fsspec import AbstractFileSystem

from watermark_assets.core.filepath import NameOrdering, check_sortable
from watermark_assets.core.listing import ListingPlan


def filesystem(uri: str) -> tuple[AbstractFileSystem, str]:
    """The fsspec filesystem of ``uri`` and the path inside it (no trailing '/')."""
    fs, path = fsspec.core.url_to_fs(uri)
    return fs, path.rstrip("/")


def is_hidden(name: str) -> bool:
    return name.startswith(("_", "."))


@dataclass(frozen=True)
class ListingResult:
    """What one listing saw.

    ``files`` are the paths above the watermark, relative to the root, sorted. ``files_seen`` counts
    every matching file in the directories that were listed (above the watermark or not): zero
    means "no files at all", which the state machine keeps apart from "all at or below".
    ``paths_listed`` counts the entries the storage returned, the cost of the listing.
    ``at_or_below`` counts, per partition with a watermark, the files at or below it: committed
    ones, plus any that landed below the watermark after it passed them.
    """

    files: tuple[str, ...]
    files_seen: int
    paths_listed: int
    directories_listed: int
    at_or_below: Mapping[str, int] = field(default_factory=dict)


def list_files_above(
    root_uri: str,
    plan: ListingPlan,
    *,
    suffixes: Sequence[str],
    ordering: NameOrdering,
    start_prefixes: Iterable[str] | None = None,
    limit: int | None = None,
) -> ListingResult:
    """Files under ``root_uri`` above the plan's watermark, walking only unpruned directories.

    ``start_prefixes`` (the cold start's lookback prefixes) lists those partition directories
    directly instead of walking from the root. ``limit`` stops the walk once that many files above
    the watermark are found (the oldest ones: the walk goes in path order), which bounds the work
    of a sensor tick however large the backlog. Names that do not sort chronologically are refused
    (:class:`~watermark_assets.exceptions.UnsortableFileNameError`), never mis-ordered.
    """
    fs, root = filesystem(root_uri)
    fs.invalidate_cache()  # listings are cached by some backends; a poll must see new files
    found: list[str] = []
    below: Counter[str] = Counter()
    entries_of = plan.watermark.partition_watermarks
    seen = listed = dirs = 0
    pending: list[str] = sorted(start_prefixes) if start_prefixes is not None else [""]
    while pending:
        relative = pending.pop(0)
        directory = f"{root}/{relative}" if relative else root
        try:
            entries = fs.ls(directory, detail=True)
        except FileNotFoundError:
            continue
        dirs += 1
        listed += len(entries)
        children: list[str] = []
        for entry in entries:
            name = posixpath.basename(entry["name"].rstrip("/"))
            if is_hidden(name):
                continue
            child = f"{relative}/{name}" if relative else name
            if entry["type"] == "directory":
                if plan.should_descend(child):
                    children.append(child)
            elif name.endswith(tuple(suffixes)):
                seen += 1
                if plan.accepts(child):
                    check_sortable(child, ordering)
                    found.append(child)
                elif relative in entries_of:
                    below[relative] += 1
        pending[:0] = sorted(children)
        if limit is not None and len(found) >= limit:
            break
    files = sorted(found)
    kept = tuple(files if limit is None else files[:limit])
    return ListingResult(kept, seen, listed, dirs, dict(below))


def read_text(uri: str) -> str | None:
    """The file's text, or None when it does not exist."""
    fs, path = filesystem(uri)
    try:
        with fs.open(path, "r", encoding="utf-8") as handle:
            text: str = handle.read()
            return text
    except FileNotFoundError:
        return None


def write_text_atomic(uri: str, text: str) -> None:
    """Write ``text`` so that readers see the old or the new content, never a partial file.

    Local: a temporary file next to the target, then a rename (atomic on POSIX).
    """
    fs, path = filesystem(uri)
    fs.makedirs(posixpath.dirname(path), exist_ok=True)
    temporary = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    fs.pipe_file(temporary, text.encode("utf-8"))
    fs.mv(temporary, path)


def exists(uri: str) -> bool:
    fs, path = filesystem(uri)
    return bool(fs.exists(path))


def join(root_uri: str, relative: str) -> str:
    return f"{root_uri.rstrip('/')}/{relative}"
