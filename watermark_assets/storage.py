"""Storage adapter: everything that lists or writes files goes through fsspec.

A location is a URI (a local path, ``file://``, ``memory://`` or ``s3://``). Listing walks the
partition directories with the pure :class:`~watermark_assets.core.listing.ListingPlan`, so
directories below the watermark's partition are never listed and only files above the watermark
are returned. Entries whose name starts with ``_`` or ``.`` (``_delta_log``, ``_watermarks``,
``_SUCCESS``, ``.tmp`` files) are never part of a source.

Settings: :func:`configure` installs the project's ``storage:`` block (loading the configuration
does it); :func:`filesystem` / :func:`fsspec_options` give fsspec (s3fs) its arguments for a URI,
:func:`delta_options` gives delta-rs its storage options, so no caller threads credentials by
hand. Explicit settings win over the standard ``AWS_*`` environment variables; without any, boto
and delta-rs read the environment themselves. :func:`portable_settings` carries the installed
settings (secrets resolved) to another Python process, e.g. a Spark executor.

S3 specifics: listings are never cached (every poll sees new keys); a partition with a watermark
is listed from its last file on (ListObjectsV2 ``StartAfter``); checkpoint-like files are written
with conditional puts (``If-None-Match: *`` / ``If-Match: <etag>``), a lost race raising
:class:`~watermark_assets.exceptions.ConcurrentWriteError`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import posixpath
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import fsspec
import fsspec.asyn
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from watermark_assets.config.storage import StorageConfig, portable_dump
from watermark_assets.core.filepath.listing import ListingPlan
from watermark_assets.core.filepath.path import NameOrdering, is_sortable
from watermark_assets.exceptions import ConcurrentWriteError
from watermark_assets.faults import crash_point

if TYPE_CHECKING:  # pyarrow (and numpy under it) is imported by the two functions that use it:
    # the configuration's loader imports this module before a run worker starts Spark
    import pyarrow as pa

_S3_SCHEMES = ("s3://", "s3a://")
_settings_lock = threading.Lock()
_installed: StorageConfig | None = None


def configure(config: StorageConfig | None) -> None:
    """Install the project's storage settings for this process (None: none, the environment)."""
    global _installed
    with _settings_lock:
        _installed = config


def installed() -> StorageConfig | None:
    """The settings :func:`configure` installed, or None."""
    return _installed


def is_s3(uri: str) -> bool:
    return uri.startswith(_S3_SCHEMES)


def fsspec_options(uri: str) -> dict[str, Any]:
    """The keyword arguments of ``fsspec.core.url_to_fs`` for ``uri``: ``{}`` but on S3.

    On S3: listings are not cached (``use_listings_cache=False``: a poll must see every key
    written since the last one) and the configured endpoint, region and credentials are passed
    (``key``/``secret``/``token``, ``client_kwargs``); what is not configured, boto reads from
    the environment as usual.
    """
    if not is_s3(uri):
        return {}
    options: dict[str, Any] = {"use_listings_cache": False}
    config = _installed
    if config is None:
        return options
    settings = config.settings_for(uri)
    client: dict[str, str] = {}
    if settings.endpoint_url:
        client["endpoint_url"] = settings.endpoint_url
    if settings.region:
        client["region_name"] = settings.region
    if client:
        options["client_kwargs"] = client
    if settings.access_key_id:
        options["key"] = settings.access_key_id
        options["secret"] = settings.secret_access_key
    if settings.session_token:
        options["token"] = settings.session_token
    return options


def delta_options(uri: str) -> dict[str, str] | None:
    """delta-rs ``storage_options`` for the table at ``uri``: None but on S3.

    On S3: the configured ``AWS_ENDPOINT_URL``, ``AWS_REGION``, credentials and
    ``AWS_ALLOW_HTTP``, and ``conditional_put: etag``: delta-rs 1.x writes a commit's log entry
    with a put-if-absent (``If-None-Match: *``) and replaces with ``If-Match``, so two writers
    can never both write one version (no locking table and never ``AWS_S3_ALLOW_UNSAFE_RENAME``).
    What is not configured, delta-rs reads from the ``AWS_*`` environment variables.
    """
    if not is_s3(uri):
        return None
    options = {"conditional_put": "etag"}
    config = _installed
    if config is None:
        return options
    settings = config.settings_for(uri)
    pairs = {
        "AWS_ENDPOINT_URL": settings.endpoint_url,
        "AWS_REGION": settings.region,
        "AWS_ACCESS_KEY_ID": settings.access_key_id,
        "AWS_SECRET_ACCESS_KEY": settings.secret_access_key,
        "AWS_SESSION_TOKEN": settings.session_token,
        "AWS_ALLOW_HTTP": "true" if settings.allow_http else None,
    }
    options.update({key: value for key, value in pairs.items() if value})
    return options


def portable_settings() -> str:
    """The installed settings as JSON text, secrets in plain text (environment variables read
    now), for :func:`configure_from_portable` in another Python process. Never log it."""
    config = _installed
    return json.dumps(None if config is None else portable_dump(config))


def configure_from_portable(text: str) -> None:
    """Install the settings :func:`portable_settings` gave (another process's)."""
    data = json.loads(text)
    configure(None if data is None else StorageConfig.model_validate(data))


def redact(text: str) -> str:
    """``text`` with every installed secret value replaced by ``**********``."""
    config = _installed
    return text if config is None else config.redact(text)


def filesystem(uri: str) -> tuple[AbstractFileSystem, str]:
    """The fsspec filesystem of ``uri`` (with :func:`fsspec_options`) and the path inside it
    (no trailing '/')."""
    fs, path = fsspec.core.url_to_fs(uri, **fsspec_options(uri))
    return fs, path.rstrip("/")


def is_hidden(name: str) -> bool:
    """A name a source never holds: ``_delta_log``, ``_watermarks``, ``_SUCCESS``, ``.tmp``..."""
    return name.startswith(("_", "."))


def hidden_in_output(name: str) -> bool:
    """A name in a folder Spark wrote that holds no data, by Spark's own rule: it starts with
    ``.`` (``.crc`` files), or with ``_`` and is no partition folder (``_temporary``,
    ``_SUCCESS``; a table partitioned by ``_dagster_partition`` has ``_dagster_partition=...``
    folders, which hold its data)."""
    return name.startswith(".") or (name.startswith("_") and "=" not in name)


@dataclass(frozen=True)
class ListingResult:
    """What one listing saw.

    ``files`` are the paths above the watermark, relative to the root, sorted. ``files_seen`` counts
    every matching file in the directories that were listed (above the watermark or not): zero
    means "no files at all", which the state machine keeps apart from "all at or below".
    ``paths_listed`` counts the entries the storage returned, the cost of the listing.
    ``at_or_below`` counts, per partition with a watermark, the files at or below it: committed
    ones, plus any that landed below the watermark after it passed them.

    On S3 a partition with a watermark is listed from its watermark on (``StartAfter``, see
    :func:`list_files_above`): the files at or below it are never returned by the server, so
    such a partition (named in ``started_after``) has no ``at_or_below`` entry (unknown, not
    zero) and ``files_seen`` counts only its files above the watermark. Only a watermark's
    partitions are listed that way, and an Initial watermark has none, so "no files at all" is
    still told apart where it matters (a cold start). The full count is the sweep's job: it
    lists with ``start_after=False``.
    """

    files: tuple[str, ...]
    files_seen: int
    paths_listed: int
    directories_listed: int
    at_or_below: Mapping[str, int] = field(default_factory=dict)
    #: files above the watermark whose names do not sort by time (never mis-ordered: set apart)
    unsortable: tuple[str, ...] = ()
    #: partitions listed from their watermark on (S3): their ``at_or_below`` is not counted
    started_after: tuple[str, ...] = ()
    #: the ``held`` files seen at or below the watermark of a partition that has one (those
    #: ``at_or_below`` left out)
    held_at_or_below: tuple[str, ...] = ()
    #: the content signature (:func:`content_signature`) of each file seen at or below a
    #: partition's watermark: what the listing returned anyway, to notice files rewritten in place
    signatures_at_or_below: Mapping[str, str] = field(default_factory=dict)
    #: the content signature of each file above the watermark (``files``): its size, for the
    #: backlog in bytes (:func:`signature_size`)
    signatures_above: Mapping[str, str] = field(default_factory=dict)


def list_files_above(
    root_uri: str,
    plan: ListingPlan,
    *,
    suffixes: Sequence[str],
    ordering: NameOrdering | None,
    start_prefixes: Iterable[str] | None = None,
    limit: int | None = None,
    max_paths: int | None = None,
    start_after: bool = True,
    held: Container[str] = frozenset(),
    full: Container[str] = frozenset(),
) -> ListingResult:
    """Files under ``root_uri`` above the plan's watermark, walking only unpruned directories.

    ``start_prefixes`` (the cold start's lookback prefixes) lists those partition directories
    directly instead of walking from the root. ``limit`` stops the walk once that many files above
    the watermark are found (the oldest ones: the walk goes in path order), which bounds the work
    of a sensor tick however large the backlog; ``max_paths`` stops it once that many paths were
    listed. Names that do not sort chronologically are set apart in ``unsortable``, never
    mis-ordered (the caller holds them back and reports them); with ``ordering`` None (a sweep
    that only reports) they are not checked.

    On S3 (``start_after``, the default) a partition with a watermark (not the root) is listed
    with ListObjectsV2 ``StartAfter=<partition>/<its last file>``, page by page: a poll costs
    about one request per 1,000 new keys plus one per active partition, never the keys already
    processed. A directory above the partitions (the root of a ``date=.../hour=...`` layout)
    is listed from the plan's listing horizon on (:meth:`ListingPlan.lowest_child`), so the
    folders of every day ever landed are not listed again at each poll (a file directly in such
    a root, in no partition folder, whose name sorts below the horizon's folder is not listed
    there). Such a partition is a leaf of the landing layout: a sub-folder in it that sorts
    below its last file is not listed. ``start_after=False`` lists every partition in full (the
    sweep, which counts the files at or below each watermark). ``full`` names partitions listed
    in full on S3 all the same (from their first key on): partitions whose committed files fit in
    the page a ``StartAfter`` listing costs anyway (:data:`S3_PAGE_KEYS`), so that their files
    at or below the watermark are counted and their content signatures compared, for at most
    one request more (none while the partition's keys fit in one page).

    ``held``: paths (relative to the root) that are not landing files at all, the table's own
    files where the landing folder is the table's (see ``sources.files.TableFiles``): never
    returned, counted in ``files_seen`` or ``at_or_below``, nor checked for their names; the
    ones at or below a partition's watermark are named in ``held_at_or_below``.
    """
    fs, root = filesystem(root_uri)
    fs.invalidate_cache()  # listings are cached by some backends; a poll must see new files
    on_s3 = start_after and is_s3(root_uri)
    found: list[str] = []
    unsortable: list[str] = []
    below: Counter[str] = Counter()
    started: list[str] = []
    held_below: list[str] = []
    signatures: dict[str, str] = {}
    above: dict[str, str] = {}
    entries_of = plan.watermark.partition_watermarks
    seen = listed = dirs = 0
    pending: list[str] = sorted(start_prefixes) if start_prefixes is not None else [""]

    def done() -> bool:
        return (limit is not None and len(found) >= limit) or (
            max_paths is not None and listed >= max_paths
        )

    while pending:
        relative = pending.pop(0)
        directory = f"{root}/{relative}" if relative else root
        children: list[str] = []
        lowest = plan.lowest_child(relative) if on_s3 else None
        if on_s3 and relative and relative in entries_of:
            if relative in full:  # from the first key on: the committed files too
                pages = _s3_pages_after(fs, directory, "", done)
            else:
                pages = _s3_pages_after(fs, directory, entries_of[relative], done)
                started.append(relative)
        elif lowest:  # from the listing horizon on (a name just below it: StartAfter excludes)
            pages = _s3_pages_after(fs, directory, lowest[:-1], done)
        else:
            pages = _pages(fs, directory)
        try:
            for entries in pages:
                listed += len(entries)
                for name, is_directory, signature in entries:
                    if is_hidden(name):
                        continue
                    child = f"{relative}/{name}" if relative else name
                    if is_directory:
                        if plan.should_descend(child):
                            children.append(child)
                    elif not name.endswith(tuple(suffixes)):
                        continue
                    elif child in held:
                        if relative in entries_of and not plan.accepts(child):
                            held_below.append(child)
                    else:
                        seen += 1
                        if plan.accepts(child):
                            if ordering is not None and not is_sortable(child, ordering):
                                unsortable.append(child)
                            else:
                                found.append(child)
                                if signature is not None:
                                    above[child] = signature
                        elif relative in entries_of:
                            below[relative] += 1
                            if signature is not None:
                                signatures[child] = signature
        except FileNotFoundError:
            continue
        dirs += 1
        pending[:0] = sorted(children)
        if done():
            break
    files = sorted(found)
    kept = tuple(files if limit is None else files[:limit])
    return ListingResult(
        kept,
        seen,
        listed,
        dirs,
        dict(below),
        tuple(sorted(unsortable)),
        tuple(started),
        tuple(held_below),
        signatures,
        {path: above[path] for path in kept if path in above},
    )


#: How many keys one ListObjectsV2 page returns (S3's maximum and default): a poll lists a
#: partition with fewer committed files in full (``list_files_above(full=...)``), for the one
#: request StartAfter costs while its keys fit in a page, one more at most.
S3_PAGE_KEYS = 1000

#: one page of a listing: (name, is a directory, content signature of a file) per entry
_Page = list[tuple[str, bool, "str | None"]]


def signature_size(signature: str) -> int | None:
    """The size in bytes a :func:`content_signature` records (None: not a number)."""
    size, _, _ = signature.partition(":")
    return int(size) if size.isdigit() else None


def content_signature(entry: Mapping[str, Any]) -> str | None:
    """What tells a file's content apart from a rewrite of it under the same name, from one
    listing entry (fsspec ``ls(detail=True)``, or an S3 ``ListObjectsV2`` ``Contents`` item):
    ``"{size}:{etag}"`` on S3, ``"{size}:{mtime}"`` elsewhere (None: the entry has neither)."""
    size = entry.get("size", entry.get("Size"))
    tag = entry.get("ETag") or entry.get("etag")
    if tag is None:
        tag = entry.get("mtime", entry.get("LastModified", entry.get("last_modified")))
    if size is None or tag is None:
        return None
    if isinstance(tag, float):
        tag = repr(tag)
    return f"{size}:{str(tag).strip(chr(34))}"


def _pages(fs: AbstractFileSystem, directory: str) -> Iterator[_Page]:
    """The entries of ``directory`` (one page: fsspec's ``ls``); FileNotFoundError if missing."""
    entries = fs.ls(directory, detail=True)
    yield [
        (
            posixpath.basename(e["name"].rstrip("/")),
            e["type"] == "directory",
            None if e["type"] == "directory" else content_signature(e),
        )
        for e in entries
    ]


def _s3_pages_after(
    fs: AbstractFileSystem, directory: str, last_name: str, done: Callable[[], bool]
) -> Iterator[_Page]:
    """The entries of the S3 "directory" ``bucket/key/prefix`` after ``last_name``, page by page
    (ListObjectsV2 with StartAfter and Delimiter '/', following ContinuationToken), until the
    listing ends or ``done()``."""
    bucket, _, key = directory.partition("/")
    prefix = f"{key}/" if key else ""
    request: dict[str, Any] = {
        "Bucket": bucket,
        "Prefix": prefix,
        "Delimiter": "/",
        "StartAfter": prefix + last_name,
    }
    while True:
        answer = fs.call_s3("list_objects_v2", **request)  # type: ignore[attr-defined]
        page: _Page = [
            (c["Key"][len(prefix) :], False, content_signature(c))
            for c in answer.get("Contents", ())
        ]
        page += [
            (c["Prefix"][len(prefix) :].rstrip("/"), True, None)
            for c in answer.get("CommonPrefixes", ())
        ]
        yield page
        if not answer.get("IsTruncated") or done():
            return
        request["ContinuationToken"] = answer["NextContinuationToken"]


def file_signatures(root_uri: str, paths: Iterable[str]) -> dict[str, str]:
    """The content signature (:func:`content_signature`) of each of ``paths`` (relative to
    ``root_uri``) that is there: one listing per landing partition of them (a batch's few)."""
    by_prefix: dict[str, set[str]] = {}
    for path in paths:
        prefix, _, name = path.rpartition("/")
        by_prefix.setdefault(prefix, set()).add(name)
    found: dict[str, str] = {}
    for prefix, names in sorted(by_prefix.items()):
        listed = list_signatures(join(root_uri, prefix) if prefix else root_uri)
        for name in names:
            signature = listed.get(name)
            if signature is not None:
                found[f"{prefix}/{name}" if prefix else name] = signature
    return found


def list_signatures(directory_uri: str) -> dict[str, str | None]:
    """The files (not folders) directly in a directory, each with its content signature
    (:func:`content_signature`); empty when it is missing. Always a fresh listing (some backends
    cache them)."""
    fs, path = filesystem(directory_uri)
    fs.invalidate_cache(path)
    try:
        entries = fs.ls(path, detail=True)
    except FileNotFoundError:
        return {}
    return {
        posixpath.basename(e["name"].rstrip("/")): content_signature(e)
        for e in entries
        if e["type"] == "file"
    }


def list_names(directory_uri: str) -> set[str]:
    """The names of the files (not folders) directly in a directory; empty when it is missing.

    Always a fresh listing (some backends cache them).
    """
    return set(list_signatures(directory_uri))


@dataclass(frozen=True)
class Versioned:
    """A file's text and the version it was read at: the ETag on S3, a hash of the bytes
    elsewhere. A conditional write (:func:`write_text_atomic` ``replacing=``) names it."""

    text: str
    tag: str


class _Anything:
    def __repr__(self) -> str:
        return "ANYTHING"


#: ``write_text_atomic(..., replacing=ANYTHING)``: an unconditional write (the default)
ANYTHING: Any = _Anything()


def read_text(uri: str) -> str | None:
    """The file's text, or None when it does not exist (always read fresh, never cached)."""
    current = read_versioned(uri)
    return None if current is None else current.text


def read_versioned(uri: str) -> Versioned | None:
    """The file's text and version (see :class:`Versioned`), or None when it does not exist."""
    fs, path = filesystem(uri)
    return _read_versioned(fs, path)


def write_text_atomic(uri: str, text: str, *, replacing: Versioned | None = ANYTHING) -> None:
    """Write ``text`` so that readers see the old or the new content, never a partial file.

    ``replacing``: left out, the write is unconditional; None, the file must not exist yet
    (S3: ``If-None-Match: *``); a :class:`Versioned` read before, the file must still be that
    version (S3: ``If-Match: <ETag>``). A condition that does not hold raises
    :class:`ConcurrentWriteError` and writes nothing. Local: a temporary file next to the target,
    then a rename (atomic on POSIX), the condition checked under the file's lock.
    """
    fs, path = filesystem(uri)
    if replacing is ANYTHING:
        _write(fs, uri, path, text, ANYTHING)
        return
    _prepare(fs, path)
    with _exclusive(fs, path):
        _write(fs, uri, path, text, replacing)


#: how many times :func:`replace_text_unless` reads again after losing a race
REPLACE_ATTEMPTS = 8


def replace_text_unless(uri: str, text: str, *, keep: Callable[[str], bool]) -> bool:
    """Atomically replace the file's content with ``text`` unless ``keep(current text)`` says the
    current content must stay; True when written. No file yet: written.

    A compare-and-swap: the read, the check and the write are one step. Local file system: under
    an exclusive ``flock`` on ``{path}.lock`` (every writer of this machine). S3: a conditional
    put (``If-None-Match: *`` for a first version, ``If-Match`` on the ETag read for a
    replacement); a writer that loses the race reads again and decides again (``keep`` sees the
    winner's content), up to :data:`REPLACE_ATTEMPTS` times, then :class:`ConcurrentWriteError`.
    So a newer content is never replaced by an older one, and nothing is lost.
    """
    fs, path = filesystem(uri)
    _prepare(fs, path)
    lost: ConcurrentWriteError | None = None
    with _exclusive(fs, path):
        for attempt in range(REPLACE_ATTEMPTS):
            current = _read_versioned(fs, path)
            if current is not None and keep(current.text):
                return False
            try:
                _write(fs, uri, path, text, current)
                return True
            except ConcurrentWriteError as exc:
                lost = exc
                time.sleep(random.uniform(0, 0.02 * (attempt + 1)))  # let the winner finish
    assert lost is not None
    raise ConcurrentWriteError(
        uri, f"lost {REPLACE_ATTEMPTS} races in a row, the last: {lost.detail}"
    ) from lost


def _prepare(fs: AbstractFileSystem, path: str) -> None:
    if not _is_s3_fs(fs):  # object stores have no folders to make
        fs.makedirs(posixpath.dirname(path), exist_ok=True)


def _is_s3_fs(fs: AbstractFileSystem) -> bool:
    protocol = fs.protocol
    return bool({"s3", "s3a"} & set((protocol,) if isinstance(protocol, str) else protocol))


def _read_versioned(fs: AbstractFileSystem, path: str) -> Versioned | None:
    if _is_s3_fs(fs):
        try:
            data, etag = fsspec.asyn.sync(fs.loop, _s3_get, fs, path)  # type: ignore[attr-defined]
        except FileNotFoundError:
            return None
        return Versioned(data.decode("utf-8"), etag)
    try:
        with fs.open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    return Versioned(data.decode("utf-8"), hashlib.sha256(data).hexdigest())


async def _s3_get(fs: Any, path: str) -> tuple[bytes, str]:
    """GET the object: its bytes and its ETag, from one response (never a cached listing)."""
    bucket, key, _ = fs.split_path(path)
    answer = await fs._call_s3("get_object", Bucket=bucket, Key=key)
    try:
        data: bytes = await answer["Body"].read()
    finally:
        answer["Body"].close()
    return data, str(answer["ETag"])


def _write(
    fs: AbstractFileSystem, uri: str, path: str, text: str, replacing: Versioned | None
) -> None:
    """Write ``text`` at ``path`` if ``replacing`` holds (see :func:`write_text_atomic`); local
    callers hold the file's lock."""
    data = text.encode("utf-8")
    if _is_s3_fs(fs):
        _s3_put(fs, uri, path, data, replacing)
        return
    if replacing is not ANYTHING:
        current = _read_versioned(fs, path)
        if replacing is None and current is not None:
            raise ConcurrentWriteError(uri, "it exists now, and it was expected not to")
        if replacing is not None and (current is None or current.tag != replacing.tag):
            changed = "was deleted" if current is None else "changed"
            raise ConcurrentWriteError(uri, f"it {changed} since it was read")
    fs.makedirs(posixpath.dirname(path), exist_ok=True)
    temporary = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    fs.pipe_file(temporary, data)
    crash_point("before_atomic_rename")  # the crash tests: a temporary file left behind
    fs.mv(temporary, path)


def _s3_put(
    fs: AbstractFileSystem, uri: str, path: str, data: bytes, replacing: Versioned | None
) -> None:
    """One PUT (atomic on S3), conditional unless ``replacing`` is ANYTHING."""
    bucket, key, _ = fs.split_path(path)  # type: ignore[attr-defined]
    condition: dict[str, str] = {}
    if replacing is None:
        condition["IfNoneMatch"] = "*"
    elif replacing is not ANYTHING:
        condition["IfMatch"] = replacing.tag
    try:
        fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, **condition)  # type: ignore[attr-defined]
    except OSError as exc:
        if not condition or not _lost_race(exc):
            raise
        expected = (
            "it exists now, and it was expected not to (If-None-Match: *)"
            if replacing is None
            else f"it is no longer the version read (If-Match: {condition['IfMatch']})"
        )
        raise ConcurrentWriteError(uri, expected) from exc


def _lost_race(error: OSError) -> bool:
    """Whether a conditional PUT failed because its condition did not hold (412
    PreconditionFailed, 409 ConditionalRequestConflict, or the object gone for If-Match)."""
    if isinstance(error, (FileExistsError, FileNotFoundError)):
        return True
    cause = error.__cause__
    response = getattr(cause, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return code in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409")


@contextmanager
def _exclusive(fs: AbstractFileSystem, path: str) -> Iterator[None]:
    """An inter-process lock on ``path`` for local files; nothing elsewhere."""
    if not isinstance(fs, LocalFileSystem):
        yield
        return
    with open(f"{path}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def parquet_schema(uri: str) -> pa.Schema:
    """The Arrow schema in a Parquet file's footer (only the footer is read)."""
    import pyarrow.parquet as pq

    fs, path = filesystem(uri)
    with fs.open(path, "rb") as handle:
        schema: pa.Schema = pq.read_schema(handle)
        return schema


def arrow_filesystem(uri: str) -> tuple[Any, str] | None:
    """Arrow's own filesystem for the location ``uri`` and the path inside it (percent-decoded:
    ``deltalake`` spells a table ``file:///my%20table``), or None for a store Arrow has none for
    (``memory://``).

    Arrow reading through Python file objects (an fsspec handle, ``deltalake``'s default
    filesystem) can abort the process as it exits: its reader threads release those objects
    after the read returned, and a thread that needs Python's lock once the interpreter is
    finalizing ends with "terminate called without an active exception" (exit status 134; a
    table read just before a process ended did so in 15 of 20 processes locally, 8 of 12 on S3).
    Arrow's own filesystems never call back into Python. On S3 it gets the configured endpoint,
    region and credentials; what is not configured, the AWS SDK reads from the environment, as
    delta-rs and boto do; with neither an endpoint nor a region known (configured, or
    ``AWS_REGION``/``AWS_DEFAULT_REGION``), None: Arrow would assume us-east-1 where boto and
    delta-rs look the bucket's region up."""
    import pyarrow.fs as pafs

    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return pafs.LocalFileSystem(), unquote(parsed.path) if parsed.scheme else uri
    if not is_s3(uri):
        return None
    arguments: dict[str, Any] = {}
    settings = None if _installed is None else _installed.settings_for(uri)
    if settings is not None:
        if settings.endpoint_url:
            endpoint = urlparse(settings.endpoint_url)
            arguments["endpoint_override"] = endpoint.netloc or settings.endpoint_url
            arguments["scheme"] = endpoint.scheme or "https"
        if settings.region:
            arguments["region"] = settings.region
        if settings.access_key_id:
            arguments["access_key"] = settings.access_key_id
            arguments["secret_key"] = settings.secret_access_key
        if settings.session_token:
            arguments["session_token"] = settings.session_token
    known_region = "region" in arguments or "endpoint_override" in arguments
    if not known_region and not (
        os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    ):
        return None  # Arrow would assume us-east-1 where boto and delta-rs find the bucket's
    path = unquote(f"{parsed.netloc}{parsed.path}").rstrip("/")
    return pafs.S3FileSystem(**arguments), path


def arrow_buffer(data: bytes) -> pa.Buffer:
    """``data`` copied into memory Arrow owns. A read from a buffer over Python's ``bytes``
    leaves Arrow's threads the release of that object, which needs Python's lock: the exit
    abort of :func:`arrow_filesystem` again (2 of 20 processes reading an S3 checkpoint so,
    on a loaded machine; none from a copy)."""
    import pyarrow as pa

    owned = pa.allocate_buffer(len(data))
    memoryview(owned).cast("B")[:] = data
    return owned


def count_values(folder_uri: str, column: str, *, in_path: bool = False) -> Counter[str]:
    """How many rows hold each value of the text ``column`` in the Parquet files Spark wrote
    under ``folder_uri`` (the files Spark would read there: :func:`hidden_in_output`), reading
    that one column. ``in_path``: the folder is partitioned by ``column`` (``column=value``
    folders, values percent-decoded) and the files do not hold it. Empty when the folder does
    not exist. Through Arrow's own filesystem where it has one (:func:`arrow_filesystem`)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    found = arrow_filesystem(folder_uri)
    if found is None:
        fs, root = filesystem(folder_uri)
        reader: Any = pafs.PyFileSystem(pafs.FSSpecHandler(fs))
    else:
        reader, root = found
    root = root.rstrip("/")
    selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
    files = [
        info.path
        for info in reader.get_file_info(selector)
        if info.is_file
        and info.path.endswith(".parquet")
        and not any(hidden_in_output(part) for part in info.path[len(root) + 1 :].split("/"))
    ]
    if not files:
        return Counter()
    partitioning = (
        ds.partitioning(pa.schema([pa.field(column, pa.string())]), flavor="hive")
        if in_path
        else None
    )
    dataset = ds.dataset(
        files,
        filesystem=reader,
        format="parquet",
        partitioning=partitioning,
        partition_base_dir=root,
    )
    counted = pc.value_counts(dataset.to_table(columns=[column]).column(column))
    values = counted.field("values").to_pylist()
    counts = counted.field("counts").to_pylist()
    return Counter({str(v): int(n) for v, n in zip(values, counts, strict=True) if v is not None})


def write_parquet(uri: str, table: pa.Table) -> None:
    """Write ``table`` as one Parquet file at ``uri`` (its folder made if missing)."""
    import pyarrow.parquet as pq

    fs, path = filesystem(uri)
    fs.makedirs(posixpath.dirname(path), exist_ok=True)
    with fs.open(path, "wb") as handle:
        pq.write_table(table, handle)


def missing_folder(uri: str) -> str | None:
    """Why the folder ``uri`` does not exist (a short phrase), or None when it does.

    Local (and any non-S3 file system): a directory at the path; a file there is not a folder.
    S3 has no folders: a prefix "exists" when an object is under it (a landing file, a table's
    ``_delta_log``, or the empty ``prefix/`` marker object consoles create); missing is no object
    under it, the bucket's absence said as such. A bucket's root exists when the bucket does.
    Always a fresh look (one ListObjectsV2 of at most one key, or one stat).
    """
    fs, path = filesystem(uri)
    fs.invalidate_cache()
    if not _is_s3_fs(fs):
        if fs.isdir(path):
            return None
        return "it is a file, not a folder" if fs.exists(path) else "no such folder"
    bucket, _, key = path.partition("/")
    try:
        answer = fs.call_s3(  # type: ignore[attr-defined]
            "list_objects_v2", Bucket=bucket, Prefix=f"{key}/" if key else "", MaxKeys=1
        )
    except FileNotFoundError:
        return f"no bucket {bucket!r}"
    if not key or answer.get("KeyCount", len(answer.get("Contents", ()))):
        return None
    return f"no object under the prefix '{key}/' of bucket {bucket!r}"


def exists(uri: str) -> bool:
    fs, path = filesystem(uri)
    return bool(fs.exists(path))


def join(root_uri: str, relative: str) -> str:
    return f"{root_uri.rstrip('/')}/{relative}"
