"""Which landing files a sensor tick or a run would ingest, grouped by Dagster partition.

The pruned listing (:mod:`watermark_assets.storage` walking a
:class:`~watermark_assets.core.listing.ListingPlan`) plus the mapping of each landing partition's
time to its Dagster partition key. No Dagster, no Spark: the sensor calls it without starting
Spark, a run calls it to discover the files of its partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from watermark_assets import storage
from watermark_assets.config import Pipeline
from watermark_assets.core.filepath.coldstart import lookback_prefixes
from watermark_assets.core.filepath.listing import ListingPlan, plan_listing, plan_sweep
from watermark_assets.core.filepath.path import prefix_components, split_path
from watermark_assets.core.filepath.watermark import FileWatermark, WatermarkState, components_below
from watermark_assets.sources.files import TableFiles
from watermark_assets.sources.locations import check_source_folder
from watermark_assets.spark.paths import unreadable_character
from watermark_assets.state.horizons import listing_horizon, retention_horizon

#: Maps a landing partition's time to its Dagster partition key (None: outside the partitions).
PartitionOf = Callable[[datetime], "str | None"]


@dataclass(frozen=True)
class FileGroups:
    """Files found above the watermark, grouped by Dagster partition (each group sorted)."""

    by_partition: Mapping[str, tuple[str, ...]]
    out_of_range: tuple[str, ...]
    unmatched: tuple[str, ...]
    files_seen: int
    paths_listed: int
    #: landing partition -> files that landed at or below its watermark and were never committed
    below_watermark: Mapping[str, int] = field(default_factory=dict)
    #: files Spark cannot read literally (path -> the character), held back with every later file
    #: of their landing partition (``held_back`` counts both); see :func:`hold_back_unreadable`
    unreadable: Mapping[str, str] = field(default_factory=dict)
    held_back: int = 0
    #: files whose names do not sort by time (a watermark cannot order them), held back the same
    #: way: the watermark never passes them, the sensor names them until they are renamed
    unsortable: tuple[str, ...] = ()
    #: landing partitions listed from their watermark on (S3): their files at or below it are
    #: not counted in ``below_watermark`` (the reconciliation sweep lists them in full)
    uncounted: tuple[str, ...] = ()
    #: the table's own files under the landing folder, as this listing left them out (None:
    #: the landing folder is not the table's); the sweep of the same tick reuses them
    table_files: TableFiles | None = None
    #: committed files this listing returned with another content signature than the one their
    #: commit recorded (size and mtime, or ETag): rewritten in place since they were ingested
    rewritten: tuple[str, ...] = ()
    #: each of ``rewritten`` with the content signature the listing returned now
    rewritten_as: Mapping[str, str] = field(default_factory=dict)
    #: each file above the watermark with its size in bytes, where the listing gave one
    sizes: Mapping[str, int] = field(default_factory=dict)
    #: each file above the watermark with its content signature, where the listing gave one
    signatures: Mapping[str, str] = field(default_factory=dict)


def partition_key_of(pipeline: Pipeline, path: str, partition_of: PartitionOf) -> str | None:
    """The Dagster partition key of a landing file (None: no key for its time or prefix)."""
    prefix, _ = split_path(path)
    when = pipeline.watermark.template.try_parse(prefix)
    return None if when is None else partition_of(when)


def discover_files(
    pipeline: Pipeline,
    watermark: FileWatermark,
    partition_of: PartitionOf,
    *,
    now: datetime,
    limit: int | None = None,
    since: str | None = None,
    restored: bool = False,
    committed_files: Mapping[str, int] | None = None,
    committed_signatures: Mapping[str, str] | None = None,
    own_files: Collection[str] = (),
) -> FileGroups:
    """List the files above the watermark (pruned listing) and group them by Dagster partition.

    ``limit`` bounds the listing to the oldest files above the watermark (a sensor tick's budget).
    ``since`` is a landing partition prefix the listing must not prune even when it is below the
    global watermark's partition: the oldest prefix a sensor left pending (Dagster partitions
    commit out of order: a failed, capped or in-flight older partition), or the start of a
    backfill's time window (see :func:`lowered_plan`). ``restored``: the watermarks of the
    partitions from ``since`` on were put back (:func:`restore_partitions`), so the floor may go
    below the pruning horizon. ``committed_files`` (files committed per landing partition) turns
    the listing's count of files at or below each watermark into ``below_watermark``;
    ``committed_signatures`` (the state's, per committed file) names the files the listing
    returned with another signature in ``rewritten`` (no extra request: only what the listing
    returns anyway; on S3, which lists a partition from its watermark on, the partitions the
    state counts fewer than ``storage.S3_PAGE_KEYS`` committed files in are listed in full for
    it, for the request StartAfter costs anyway: a rewrite in a bigger one is found by the
    sweep).
    ``own_files``: the table's own files the state recorded (``PipelineState.own_files``), never
    landing files where the landing folder is the table's.
    """
    horizon = listing_horizon(pipeline, watermark, now)
    plan = lowered_plan(plan_listing(watermark, horizon), since, None if restored else horizon)
    start_prefixes = None
    if watermark.state is WatermarkState.INITIAL and pipeline.watermark.cold_start.lookback_days:
        start_prefixes = lookback_prefixes(
            pipeline.watermark.template, pipeline.watermark.cold_start.lookback_days, now
        )
    table_files = pipeline.file_source.table_files(own_files)
    listing = storage.list_files_above(
        pipeline.source.uri,
        plan,
        suffixes=pipeline.source.suffixes,
        ordering=pipeline.watermark.file_name_ordering,
        start_prefixes=start_prefixes,
        limit=limit,
        held=frozenset() if table_files is None else table_files.held,
        full=frozenset()
        if committed_signatures is None
        else frozenset(
            prefix
            for prefix, count in (committed_files or {}).items()
            if count < storage.S3_PAGE_KEYS
        ),
    )
    if not listing.paths_listed:
        check_source_folder(pipeline)  # nothing at all: an empty folder, or none?
    groups: dict[str, list[str]] = {}
    out_of_range: list[str] = []
    unmatched: list[str] = []
    readable, unreadable = hold_back_unreadable(
        pipeline.source.uri, listing.files, listing.unsortable
    )
    template = pipeline.watermark.template
    keys: dict[str, tuple[bool, str | None]] = {}  # landing prefix -> matched, its key
    for path in readable:
        prefix, _ = split_path(path)
        if prefix not in keys:  # once per landing partition, not per file
            when = template.try_parse(prefix)
            keys[prefix] = (when is not None, None if when is None else partition_of(when))
        matched, key = keys[prefix]
        if not matched:
            unmatched.append(path)
        elif key is None:
            out_of_range.append(path)
        else:
            groups.setdefault(key, []).append(path)
    rewritten = rewritten_files(listing.signatures_at_or_below, committed_signatures or {})
    below = (
        {}
        if committed_files is None
        else never_committed(listing, committed_files, table_files, watermark)
    )
    return FileGroups(
        {key: tuple(paths) for key, paths in sorted(groups.items())},
        tuple(out_of_range),
        tuple(unmatched),
        listing.files_seen,
        listing.paths_listed,
        below,
        unreadable,
        len(listing.files) - len(readable),
        listing.unsortable,
        listing.started_after,
        table_files,
        rewritten,
        {path: listing.signatures_at_or_below[path] for path in rewritten},
        {
            path: size
            for path, signature in listing.signatures_above.items()
            if (size := storage.signature_size(signature)) is not None
        },
        listing.signatures_above,
    )


def rewritten_files(listed: Mapping[str, str], committed: Mapping[str, str]) -> tuple[str, ...]:
    """The committed files ``listed`` with another content signature than their commit's
    (sorted); a file with no recorded signature is never named (nothing to compare)."""
    return tuple(
        sorted(
            path
            for path, signature in listed.items()
            if path in committed and committed[path] != signature
        )
    )


def never_committed(
    listing: storage.ListingResult,
    committed_files: Mapping[str, int],
    table_files: TableFiles | None,
    watermark: FileWatermark,
) -> dict[str, int]:
    """Per landing prefix, how many of the files a listing counted at or below its watermark
    were never committed: the count less the state's committed files, or, where the landing
    folder is the table's (``table_files``: the listing left out every file the table holds),
    as :meth:`TableFiles.not_ingested` counts them."""
    at_or_below = listing.at_or_below
    if table_files is not None:
        return table_files.not_ingested(
            at_or_below, listing.held_at_or_below, committed_files, watermark
        )
    return {
        prefix: count - committed_files.get(prefix, 0)
        for prefix, count in at_or_below.items()
        if count > committed_files.get(prefix, 0)
    }


def hold_back_unreadable(
    source_uri: str, paths: Sequence[str], unsortable: Sequence[str] = ()
) -> tuple[list[str], dict[str, str]]:
    """(the paths to ingest, path -> character of each file Spark cannot read literally).

    A landing partition's watermark is the last file committed there, and a watermark must never
    pass a file whose rows were not committed: so an unreadable file (or one of ``unsortable``,
    whose name does not sort by time) is held back with every file that sorts after it in its
    landing partition. Nothing of that partition moves until the user renames the file (the
    sensor names it); other landing partitions go on.
    """
    blocked: dict[str, str] = {}  # landing partition -> its first file held back
    for path in unsortable:
        prefix, name = split_path(path)
        blocked[prefix] = min(blocked.get(prefix, name), name)
    unreadable: dict[str, str] = {}
    kept: list[str] = []
    for path in sorted(paths):
        prefix, name = split_path(path)
        character = unreadable_character(storage.join(source_uri, path))
        if character is not None:
            unreadable[path] = character
            blocked[prefix] = min(blocked.get(prefix, name), name)
        elif prefix not in blocked or name < blocked[prefix]:
            kept.append(path)
    return kept, unreadable


def lowered_plan(plan: ListingPlan, since: str | None, horizon: str | None) -> ListingPlan:
    """``plan`` with its floor lowered to the prefix ``since`` (when that is lower).

    The seed's pruning skips partitions below the global watermark's partition that have no
    per-partition watermark; with Dagster partitions committing out of order, such a partition
    may still hold files never committed. Without a lookback no per-partition watermark is ever
    pruned, so listing from ``since`` cannot return a committed file. With a horizon
    (``late_arrival_days`` or a cold-start lookback) the floor is already at it, and below it
    entries are pruned: the plan is left as it is (pass ``horizon=None`` once they are restored).
    """
    if since is None or horizon is not None or plan.floor is None:
        return plan
    if components_below(prefix_components(since), prefix_components(plan.floor)):
        return ListingPlan(plan.watermark, since)
    return plan


@dataclass(frozen=True)
class SweepResult:
    """What a sweep of the partitions below the listing horizon found (nothing is ingested).

    ``late``: files above their partition's watermark (or in a partition without one) that
    landed after the regular listing stopped looking there, oldest first, at most
    ``SWEEP_NAMES`` of them, and ``late_count`` all of them. ``below_watermark``: per partition,
    files at or below its watermark that were never committed. ``window``: [from, to) prefixes.
    """

    late: tuple[str, ...]
    late_count: int
    below_watermark: Mapping[str, int]
    window: tuple[str | None, str]
    paths_listed: int
    complete: bool


#: How many late file names a sweep keeps to show (all are counted).
SWEEP_NAMES = 5


def sweep(
    pipeline: Pipeline,
    watermark: FileWatermark,
    committed_files: Mapping[str, int],
    *,
    now: datetime,
    table_files: TableFiles | None,
) -> SweepResult | None:
    """List the partitions below the listing horizon down to the retention horizon and report
    what no regular listing will ever find there; None when nothing lies below the horizon
    (no horizon: the regular listing already sees everything). ``table_files``: the source's
    :meth:`~watermark_assets.sources.files.FileSource.table_files`, read once per tick."""
    horizon = listing_horizon(pipeline, watermark, now)
    if horizon is None:
        return None
    retained = retention_horizon(pipeline, watermark, now)
    budget = pipeline.watermark.sweep.max_paths
    listing = storage.list_files_above(
        pipeline.source.uri,
        plan_sweep(watermark, retained, horizon),
        suffixes=pipeline.source.suffixes,
        ordering=None,
        limit=budget,
        max_paths=budget,
        start_after=False,  # every file, at or below the watermarks too (S3: no StartAfter)
        held=frozenset() if table_files is None else table_files.held,
    )
    below = never_committed(listing, committed_files, table_files, watermark)
    return SweepResult(
        listing.files[:SWEEP_NAMES],
        len(listing.files),
        below,
        (retained, horizon),
        listing.paths_listed,
        listing.paths_listed < budget,
    )
