"""The staging area under a table (``{table}/_staging/{token}``): files written before a commit,
moved into the table once the commit is decided, and cleaned up after a crash."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from watermark_assets import storage

if TYPE_CHECKING:
    pass


STAGING_DIR = "_staging"


#: Staging folders older than this were left by a crashed run (never committed): removed.
STAGING_RETENTION = timedelta(hours=6)


def list_parquet(uri: str) -> tuple[str, ...]:
    """URIs of the Parquet files Spark wrote under ``uri``: hidden names (.crc, _SUCCESS) and
    files in hidden folders (a writer's ``_temporary``) skipped."""
    fs, root = storage.filesystem(uri)
    if not fs.exists(root):
        return ()
    names = (p for p in fs.find(root) if p.endswith(".parquet"))
    return tuple(
        sorted(
            fs.unstrip_protocol(p)
            for p in names
            if not any(storage.is_hidden(part) for part in p[len(root) :].split("/"))
        )
    )


def remove_stale_staging(table_uri: str, now: datetime) -> list[str]:
    """Delete ``_staging/{token}`` folders older than STAGING_RETENTION; their names.

    A run that crashed after Spark wrote its files leaves its staging folder behind; nothing in
    the Delta log references it. The token starts with the staging time, so no stat is needed.
    """
    fs, root = storage.filesystem(storage.join(table_uri, STAGING_DIR))
    if not fs.exists(root):
        return []
    removed = []
    for path in fs.ls(root, detail=False):
        token = posixpath.basename(path.rstrip("/"))
        try:
            staged_at = datetime.strptime(token[:15], "%Y%m%dT%H%M%S").replace(tzinfo=timezone.utc)
        except ValueError:
            continue  # not ours
        if now - staged_at > STAGING_RETENTION:
            fs.rm(path, recursive=True)
            removed.append(token)
    return removed


def move_into_table(
    staged_files: Sequence[str], staging_root: str, table_uri: str, token: str
) -> list[str]:
    """Move staged files into the table's partition directories; their paths relative to it."""
    fs, table_root = storage.filesystem(table_uri)
    _, staging = storage.filesystem(staging_root)
    moved = []
    for number, uri in enumerate(staged_files):
        _, inner = storage.filesystem(uri)
        directory = posixpath.dirname(posixpath.relpath(inner, staging))
        name = f"part-{number:05d}-{token}.parquet"
        relative = posixpath.normpath(posixpath.join(directory, name))
        fs.makedirs(posixpath.join(table_root, posixpath.dirname(relative)), exist_ok=True)
        fs.mv(inner, posixpath.join(table_root, relative))
        moved.append(relative)
    return moved


def remove_tree(uri: str) -> None:
    fs, root = storage.filesystem(uri)
    if fs.exists(root):
        fs.rm(root, recursive=True)
