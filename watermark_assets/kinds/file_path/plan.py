"""Plan a file-path batch: which landing files a run ingests, and the state it starts from."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from watermark_assets import storage
from watermark_assets.config import Pipeline
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.core.filepath.path import (
    NameOrdering,
    check_sortable,
    prefix_components,
    split_path,
)
from watermark_assets.core.filepath.watermark import FileWatermark, components_below
from watermark_assets.core.partition_selection import PartitionSelection
from watermark_assets.exceptions import (
    RequestedFileError,
    SourceFileMissingError,
)
from watermark_assets.sources.file_discovery import PartitionOf, discover_files, partition_key_of
from watermark_assets.sources.late_files import committed_among
from watermark_assets.spark.paths import check_readable
from watermark_assets.state.horizons import listing_horizon
from watermark_assets.state.load import PipelineState, load_state, restore_partitions


@dataclass(frozen=True)
class BatchRequest:
    """What one run was asked to do, taken from the Dagster context once, at the edge."""

    pipeline: Pipeline
    selection: PartitionSelection
    run_id: str
    files: tuple[str, ...] | None = None  # None: discover the files above the watermark
    clock: Clock = system_clock  # the definitions' clock, for the commit's "now"
    #: ingest ``files`` that lie at or below their partition's watermark and were never
    #: committed (the reconciliation sweep's runs); the watermark does not move
    late: bool = False
    #: replace the rows of ``files`` (ONE committed file rewritten in place): ``on_rewrite``
    rewrite: bool = False

    @property
    def partition_keys(self) -> tuple[str, ...]:
        return self.selection.keys

    @property
    def window_start(self) -> datetime | None:
        """Start of the partitions' time window (the oldest landing partition to list)."""
        window = self.selection.time_window
        return None if window is None else window.start


@dataclass(frozen=True)
class BatchPlan:
    """The files a run will ingest, and the state it starts from.

    ``already_committed``: requested files at or below the watermark (committed, or landed below
    it). ``added``: files above the watermark that a requested list skipped although they sort
    below a requested file of their landing partition; they are ingested too, since the
    watermark cannot move past a file that is not committed.
    """

    request: BatchRequest
    state: PipelineState
    files: tuple[str, ...]
    file_partitions: Mapping[str, str]
    already_committed: tuple[str, ...]
    added: tuple[str, ...] = ()
    #: files Spark cannot read literally (path -> character), held back by discovery with the
    #: later files of their landing partition (a requested list holding one is refused instead)
    unreadable: Mapping[str, str] = field(default_factory=dict)
    #: each file's content signature as planned, before it is read (size and mtime, or ETag):
    #: the commit records it, so a later listing finds the file if it is rewritten in place
    signatures: Mapping[str, str] = field(default_factory=dict)
    #: a rewrite run's file -> the signature its last commit recorded (the content replaced)
    replaced: Mapping[str, str] = field(default_factory=dict)


def plan_batch(request: BatchRequest, partition_of: PartitionOf, *, now: datetime) -> BatchPlan:
    """Choose the files: the requested ones still above the watermark, or all above it."""
    pipeline = request.pipeline
    state = load_state(pipeline, now=now)
    wanted = set(request.partition_keys)
    since = (
        pipeline.watermark.template.format(request.window_start)
        if request.window_start is not None
        else None
    )
    horizon = listing_horizon(pipeline, state.watermark, now)
    restored = bool(
        since and horizon and components_below(prefix_components(since), prefix_components(horizon))
    )
    if restored:  # an old window: its per-partition watermarks may have been pruned
        state = restore_partitions(
            pipeline,
            state,
            request.partition_keys,
            lambda path: partition_key_of(pipeline, path, partition_of),
        )
    added: tuple[str, ...] = ()
    unreadable: dict[str, str] = {}
    already: list[str] = []
    replaced: dict[str, str] = {}
    if request.rewrite:
        candidates, already, replaced = rewritten_requested_files(pipeline, state, request.files)
    elif request.late:
        if not request.files:
            raise RequestedFileError(
                "(none)", "a late run needs the list of files to ingest", "give 'files'"
            )
        candidates, already = late_requested_files(pipeline, state, request.files)
    elif request.files is None:
        groups = discover_files(
            pipeline,
            state.watermark,
            partition_of,
            now=now,
            since=since,
            restored=restored,
            own_files=state.own_files,
        )
        candidates = sorted(p for key in wanted for p in groups.by_partition.get(key, ()))
        unreadable = {
            path: character
            for path, character in groups.unreadable.items()
            if partition_key_of(pipeline, path, partition_of) in wanted
        }
    else:
        candidates, already, added = requested_files(
            pipeline, state.watermark, request.files, state.own_files
        )
    file_partitions: dict[str, str] = {}
    outside: list[tuple[str, str | None]] = []
    for path in candidates:
        key = partition_key_of(pipeline, path, partition_of)
        if key in wanted:
            file_partitions[path] = key
        else:
            outside.append((path, key))
    if outside and request.files is not None:
        raise RequestedFileError(
            outside[0][0],
            f"it belongs to partition {outside[0][1]!r}, not to this run's partitions "
            f"{sorted(wanted)}",
            "launch it in its own partition",
        )
    files = tuple(sorted(file_partitions))
    return BatchPlan(
        request,
        state,
        files,
        file_partitions,
        tuple(already),
        added,
        unreadable,
        # one listing per landing partition of the batch, before the files are read
        storage.file_signatures(pipeline.source.uri, files),
        {path: replaced[path] for path in files if path in replaced},
    )


def rewritten_requested_files(
    pipeline: Pipeline, state: PipelineState, requested: Sequence[str] | None
) -> tuple[list[str], list[str], dict[str, str]]:
    """(the file to replace, or none; the requested file when its content is the one last
    committed; file -> its recorded signature) of a rewrite run's list of ONE file.

    The file must be committed with a recorded signature in the retained state (the sensor
    names only such files). Its signature now is compared with the one its last commit
    recorded: equal, it was not rewritten, or a commit (a retry's, before a crash) replaced it
    already, and nothing is done.
    """
    if not requested or len(requested) != 1:
        raise RequestedFileError(
            ",".join(requested or ()) or "(none)",
            "a rewrite run replaces the rows of exactly one file",
            "give one file in 'files' (the sensor starts one run per rewritten file)",
        )
    [path] = requested
    check_requested_path(
        path, suffixes=pipeline.source.suffixes, ordering=pipeline.watermark.file_name_ordering
    )
    recorded = state.file_signatures.get(path)
    if recorded is None:
        raise RequestedFileError(
            path,
            "no commit the state retains recorded its size and modification time (not committed, "
            "committed before they were recorded, or its landing partition is pruned)",
            "launch it without 'rewrite: true', or land the new content under a new name",
        )
    now = storage.file_signatures(pipeline.source.uri, [path]).get(path)
    if now is None:
        raise SourceFileMissingError(path, pipeline.source.uri)
    if now == recorded:
        return [], [path], {}
    check_readable(pipeline.source.uri, path)
    return [path], [], {path: recorded}


def requested_files(
    pipeline: Pipeline,
    watermark: FileWatermark,
    requested: Sequence[str],
    own_files: Collection[str] = (),
) -> tuple[list[str], list[str], tuple[str, ...]]:
    """(files to ingest, requested files at or below the watermark, files added) of a list.

    A requested list passes the checks a listing applies: each entry is a relative path inside
    the source (no '.', '..', absolute or empty parts), not hidden, of the source's format and
    named sortably, else :class:`RequestedFileError` names it. Each landing partition of the list
    is listed once: a requested file that is not there raises
    :class:`SourceFileMissingError`; a file above the watermark that sorts below a requested one
    of its partition is added (the watermark must not move past it uncommitted), unless the
    table holds it or the state recorded it as the table's own (``own_files``: a landing folder
    that is the table's, see ``FileSource.table_files``).
    """
    source = pipeline.source
    ordering = pipeline.watermark.file_name_ordering
    above: dict[str, list[str]] = {}
    already: list[str] = []
    for path in sorted(set(requested)):
        check_requested_path(
            path, suffixes=source.suffixes, ordering=pipeline.watermark.file_name_ordering
        )
        if watermark.is_above(path):
            prefix, name = split_path(path)
            above.setdefault(prefix, []).append(name)
        else:
            already.append(path)
    files: list[str] = []
    added: list[str] = []
    held: frozenset[str] | None = None  # the table's own files, read when a file may be added
    for prefix, names in above.items():
        present = storage.list_names(storage.join(source.uri, prefix) if prefix else source.uri)
        missing = sorted(set(names) - present)
        if missing:
            raise SourceFileMissingError(
                f"{prefix}/{missing[0]}" if prefix else missing[0], source.uri
            )
        last = max(names)
        for name in sorted(present):
            path = f"{prefix}/{name}" if prefix else name
            if name > last or not name.endswith(source.suffixes) or storage.is_hidden(name):
                continue
            if not watermark.is_above(path):
                continue
            if name not in names:
                if held is None:
                    table_files = pipeline.file_source.table_files(own_files)
                    held = frozenset() if table_files is None else table_files.held
                if path in held:  # OPTIMIZE's output in a folder that is the table's
                    continue
                check_sortable(path, ordering)
                added.append(path)
            files.append(path)
    for path in files:  # refused before anything is read (discovery holds such files back)
        check_readable(source.uri, path)
    return sorted(files), already, tuple(sorted(added))


def check_requested_path(path: str, *, suffixes: Sequence[str], ordering: NameOrdering) -> None:
    """Refuse a requested entry a listing would never return (see :func:`requested_files`)."""
    parts = path.split("/")
    problem = (
        "it is empty"
        if not path
        else "it is absolute; give paths relative to the source root"
        if path.startswith("/")
        else "it has '.', '..' or empty parts; give the path as the source listing shows it"
        if any(part in ("", ".", "..") for part in parts)
        else "a folder or file in it starts with '_' or '.' (hidden, never part of a source)"
        if any(storage.is_hidden(part) for part in parts)
        else f"it does not end with one of the source's suffixes {list(suffixes)}"
        if not path.endswith(tuple(suffixes))
        else None
    )
    if problem is not None:
        raise RequestedFileError(path, problem, "fix the run configuration's 'files' list")
    check_sortable(path, ordering)


def late_requested_files(
    pipeline: Pipeline, state: PipelineState, requested: Sequence[str]
) -> tuple[list[str], list[str]]:
    """(files to ingest, requested files some commit already recorded) of a late run's list.

    Every entry must lie at or below its partition's watermark (a file above it is a regular
    run's) and be in the landing location; entries are checked like a regular list's.
    """
    source = pipeline.source
    by_prefix: dict[str, set[str]] = {}
    for path in sorted(set(requested)):
        check_requested_path(
            path, suffixes=source.suffixes, ordering=pipeline.watermark.file_name_ordering
        )
        if state.watermark.is_above(path):
            raise RequestedFileError(
                path,
                "it is above its partition's watermark, and a late run ingests only files at or "
                "below it",
                "launch it without 'late: true' (a regular run ingests it)",
            )
        prefix, name = split_path(path)
        by_prefix.setdefault(prefix, set()).add(name)
    for prefix, names in by_prefix.items():
        present = storage.list_names(storage.join(source.uri, prefix) if prefix else source.uri)
        missing = sorted(names - present)
        if missing:
            raise SourceFileMissingError(
                f"{prefix}/{missing[0]}" if prefix else missing[0], source.uri
            )
    committed = committed_among(pipeline, set(requested), state.file_signatures)
    files = sorted(p for p in set(requested) if p not in committed)
    for path in files:
        check_readable(source.uri, path)
    return files, sorted(p for p in set(requested) if p in committed)
