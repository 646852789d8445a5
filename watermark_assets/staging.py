"""The staging area under a table (``{table}/_staging/{token}``): files written before a commit,
moved into the table once the commit is decided, and cleaned up after a crash."""

from __future__ import annotations

import json
import posixpath
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import unquote

from watermark_assets import names, storage
from watermark_assets.core.event_time.duration import parse_duration_ms
from watermark_assets.delta.orphans import TableFiles, referenced_now, table_files
from watermark_assets.exceptions import LeftoverRetentionError
from watermark_assets.faults import crash_point

STAGING_DIR = names.STAGING_DIR


def staging_dir(table_uri: str, token: str) -> str:
    """Where a run stages a read's files before its commit: ``{table}/_staging/{token}``."""
    return storage.join(table_uri, f"{STAGING_DIR}/{token}")


#: Staging folders older than this were left by a crashed run (never committed): removed. The
#: same window guards every leftover (:func:`remove_stale_staging`); the table property
#: :data:`LEFTOVER_RETENTION_PROPERTY` overrides it per table.
STAGING_RETENTION = timedelta(hours=6)
#: The Delta table property that sets the window, as a Spark duration: ``'1 hour'``, ``'2 days'``.
LEFTOVER_RETENTION_PROPERTY = names.LEFTOVER_RETENTION_PROPERTY
#: The folder of the project's own files under a table (checkpoints, state snapshots).
WATERMARKS_DIR = names.WATERMARKS_DIR
#: The data-file and temporary-file sweep runs at most once per this interval per table (it
#: lists the table's folder); a marker file under ``_watermarks`` records the last one.
SWEEP_INTERVAL = timedelta(hours=1)
SWEEP_MARKER = names.SWEEP_MARKER
#: ``storage.write_text_atomic``'s temporary file: ``{target}.{8 hex}.tmp``.
_TEMPORARY = re.compile(r"\.[0-9a-f]{8}\.tmp$")
#: The name :func:`move_into_table` gives a run's data file: ``part-{n}-{token}.parquet``
#: (an event-time run's token: ``{time}-{8 hex}-{label}``: output, late, stream-N, ...).
_MOVED = re.compile(r"^part-\d{5}-\d{8}T\d{6}-(?:[0-9a-f]{12}|[0-9a-f]{8}-[a-z0-9_-]+)\.parquet$")


def list_parquet(uri: str) -> tuple[str, ...]:
    """URIs of the Parquet files Spark wrote under ``uri``: hidden names (.crc, _SUCCESS) and
    files in hidden folders (a writer's ``_temporary``) skipped, as Spark skips them
    (:func:`~watermark_assets.storage.hidden_in_output`)."""
    fs, root = storage.filesystem(uri)
    if not fs.exists(root):
        return ()
    names = (p for p in fs.find(root) if p.endswith(".parquet"))
    return tuple(
        sorted(
            fs.unstrip_protocol(p)
            for p in names
            if not any(storage.hidden_in_output(part) for part in p[len(root) :].split("/"))
        )
    )


def leftover_retention(table_uri: str, configuration: Mapping[str, str]) -> timedelta:
    """The window of a table: its :data:`LEFTOVER_RETENTION_PROPERTY`, or STAGING_RETENTION.
    A value that is no duration raises :class:`LeftoverRetentionError` naming it."""
    text = configuration.get(LEFTOVER_RETENTION_PROPERTY)
    if text is None:
        return STAGING_RETENTION
    cleaned = text.strip().lower().removeprefix("interval").strip()
    try:
        millis = parse_duration_ms(cleaned)
    except ValueError as exc:
        raise LeftoverRetentionError(
            table_uri, LEFTOVER_RETENTION_PROPERTY, text, str(exc)
        ) from exc
    return timedelta(milliseconds=millis)


def remove_stale_staging(
    table_uri: str,
    now: datetime,
    *,
    data_files: bool = True,
    wall_clock: Callable[[], float] = time.time,
) -> list[str]:
    """Remove what crashed runs left under the table, older than the table's window
    (:func:`leftover_retention`, default STAGING_RETENTION); the names removed.

    - ``_staging/{token}`` folders: a run that crashed after Spark wrote its files leaves its
      staging folder behind; nothing in the Delta log references it. The token starts with the
      staging time (the run's clock, as ``now``), so no stat is needed.
    - data files a run moved into the table folder (named by :func:`move_into_table`) that the
      table's snapshot neither holds nor remembers removing
      (:func:`~watermark_assets.delta.orphans.table_files`: a run killed while it moved its
      files into the table); tombstones, other writers' files, ``_delta_log`` and hidden
      folders are never touched. Named by their path relative to the table. ``data_files=False``
      leaves the data files alone (a ``parquet_commit`` table: its folder holds landing files
      not committed yet).
    - temporary files of an atomic write in ``_watermarks/`` (``*.{8 hex}.tmp``: a run killed
      before the rename of a checkpoint or state snapshot); the snapshots and checkpoints
      themselves are never touched. Named ``_watermarks/...``.

    Files are judged by their modification time on the storage's clock (``wall_clock``), older
    than the window: a run in flight writes its files at most that long before it commits them
    (its staging folder would be gone otherwise). The data and temporary files are looked at at
    most once per SWEEP_INTERVAL (the folder's listing is the cost).
    """
    sweep = _sweep_if_due(table_uri, wall_clock())
    removed = _remove_staging_folders(table_uri, now, sweep.retention)
    if sweep.table is None:
        return removed
    cutoff = wall_clock() - sweep.retention.total_seconds()
    removed += _remove_temporary_files(table_uri, cutoff)
    if data_files:
        removed += _remove_unreferenced(table_uri, sweep.table.unreferenced, cutoff)
    return removed


@dataclass(frozen=True)
class _Sweep:
    """The table's window, and its unreferenced files when a sweep is due (else None)."""

    retention: timedelta
    table: TableFiles | None


def _sweep_if_due(table_uri: str, now_seconds: float) -> _Sweep:
    """A sweep is due when none ran in the last SWEEP_INTERVAL: the marker file records when
    (its modification time) and the window it found (so a run in between needs no table
    read); with no Delta table there is nothing but staging folders (default window)."""
    fs, marker = storage.filesystem(storage.join(table_uri, SWEEP_MARKER))
    try:
        last = _mtime(fs.info(marker))
        noted = json.loads(fs.cat_file(marker))
        retention = timedelta(seconds=float(noted["retention_seconds"]))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        last, retention = None, STAGING_RETENTION
    if last is not None and now_seconds - last < SWEEP_INTERVAL.total_seconds():
        return _Sweep(retention, None)
    table = table_files(table_uri)
    if table is None:
        return _Sweep(STAGING_RETENTION, None)
    retention = leftover_retention(table_uri, table.configuration)
    fs.makedirs(posixpath.dirname(marker), exist_ok=True)
    fs.pipe_file(marker, json.dumps({"retention_seconds": retention.total_seconds()}).encode())
    return _Sweep(retention, table)


def _mtime(info: Mapping[str, Any]) -> float | None:
    """A file's modification time in seconds (local: ``mtime``; S3: ``LastModified``)."""
    value = info.get("mtime", info.get("LastModified"))
    if isinstance(value, datetime):
        return value.timestamp()
    return None if value is None else float(value)


def _remove_staging_folders(table_uri: str, now: datetime, retention: timedelta) -> list[str]:
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
        if now - staged_at > retention:
            fs.rm(path, recursive=True)
            removed.append(token)
    return removed


def _remove_temporary_files(table_uri: str, cutoff: float) -> list[str]:
    fs, root = storage.filesystem(storage.join(table_uri, WATERMARKS_DIR))
    if not fs.exists(root):
        return []
    removed = []
    for path, info in fs.find(root, detail=True).items():
        modified = _mtime(info)
        old = _TEMPORARY.search(path) and modified is not None and modified < cutoff
        if old and _remove_file(fs, path):
            removed.append(f"{WATERMARKS_DIR}/{posixpath.relpath(path, root)}")
    return removed


def _remove_unreferenced(table_uri: str, unreferenced: Sequence[str], cutoff: float) -> list[str]:
    fs, root = storage.filesystem(table_uri)
    old = []
    for relative in unreferenced:
        if not _MOVED.match(posixpath.basename(unquote(relative))):
            continue  # not a file a run of ours moved here
        path = posixpath.join(root, relative)
        if not fs.exists(path):  # delta-rs escapes special characters in a path
            path = posixpath.join(root, unquote(relative))
        try:
            modified = _mtime(fs.info(path))
        except FileNotFoundError:
            continue
        if modified is not None and modified < cutoff:
            old.append((relative, path))
    if not old:
        return []
    committed = {storage.filesystem(uri)[1] for uri in referenced_now(table_uri)}
    removed = []
    for relative, path in old:
        if path in committed:  # committed since the listing: never removed
            continue
        if _remove_file(fs, path):
            removed.append(relative)
    return removed


def _remove_file(fs: Any, path: str) -> bool:
    """Remove one file; False when another run's sweep removed it first."""
    try:
        fs.rm(path)
    except FileNotFoundError:
        return False
    return True


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
        crash_point("after_first_file_moved")  # the crash tests: a moved file, no commit
    return moved


def remove_tree(uri: str) -> None:
    fs, root = storage.filesystem(uri)
    if fs.exists(root):
        fs.rm(root, recursive=True)
