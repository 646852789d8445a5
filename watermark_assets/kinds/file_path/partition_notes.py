"""What a file-path pipeline's sensor tick says on each Dagster partition's own page: the files
that wait (for a run in flight, or a later tick) and the files it will not ingest as they are
(below the watermark, unreadable, unsortable, rewritten in place), each with the fix.

The tick's skip reason says it for the whole pipeline; these observations say it per partition,
on top of the partition's whole state from the state store
(:func:`~watermark_assets.kinds.file_path.metadata.file_partition_truths`), and only when it changed
(:func:`~watermark_assets.defs.partition_truth.changed_observations`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from dagster import AssetKey, AssetObservation, DagsterInstance

from watermark_assets import vocabulary as vocab
from watermark_assets.config import Pipeline
from watermark_assets.defs.partition_truth import PartitionTruth, changed_observations
from watermark_assets.kinds.file_path.metadata import file_partition_truths
from watermark_assets.sources.file_discovery import FileGroups, PartitionOf, partition_key_of
from watermark_assets.state.load import PipelineState


@dataclass
class _Notes:
    waiting: list[str] = field(default_factory=list)
    not_ingested: list[str] = field(default_factory=list)
    pending: int = 0
    pending_bytes: int = 0


def partition_notes(
    pipeline: Pipeline,
    groups: FileGroups,
    partition_of: PartitionOf,
    *,
    requested: Collection[str],
    busy: Collection[str],
    below: Mapping[str, int],
    rewritten: Collection[str],
) -> dict[str, _Notes]:
    """Per Dagster partition, what waits and what will not be ingested (plain words)."""
    notes: dict[str, _Notes] = {}

    def key_of(path: str) -> str | None:
        return partition_key_of(pipeline, path, partition_of)

    cap = pipeline.sensor.max_runs_per_tick
    for key, files in groups.by_partition.items():
        if key in requested:
            continue
        why = (
            "the run in flight over this partition"
            if key in busy
            else f"a later tick (sensor.max_runs_per_tick {cap})"
        )
        entry = notes.setdefault(key, _Notes())
        entry.pending += len(files)
        entry.pending_bytes += sum(groups.sizes.get(path, 0) for path in files)
        entry.waiting.append(
            f"{len(files)} file(s) above the watermark ({files[0]} .. {files[-1]}) wait for {why}"
        )
    fix = (
        "the sweep's late runs ingest them (sweep.ingest)"
        if pipeline.watermark.sweep.ingest
        else "set sweep.ingest: true to ingest them, or land them again named above the watermark"
    )
    for prefix, count in sorted(below.items()):
        below_key = key_of(f"{prefix}/_")
        if below_key is not None and count:
            notes.setdefault(below_key, _Notes()).not_ingested.append(
                f"{count} file(s) landed in {prefix} at or below its watermark: {fix}"
            )
    held = {
        "Spark cannot read by their exact path (':' with a glob character): rename them "
        "without ':'": sorted(groups.unreadable),
        "whose names do not sort by time: land them again named with a Unix-timestamp, UUIDv7 "
        "or ISO 8601 prefix above the watermark": list(groups.unsortable),
    }
    for what, paths in held.items():
        for key, first, count in _by_key(paths, key_of):
            notes.setdefault(key, _Notes()).not_ingested.append(
                f"{count} file(s) {what} (first {first}); they and the later files of their "
                "landing partition are held back"
            )
    replace = pipeline.on_rewrite == "replace"
    for key, first, count in _by_key(sorted(rewritten), key_of):
        notes.setdefault(key, _Notes()).not_ingested.append(
            f"{count} committed file(s) rewritten in place since their commit (first {first}): "
            + (
                "rewrite runs replace their rows (on_rewrite: replace)"
                if replace
                else "the table holds their old rows; set on_rewrite: replace to replace them"
            )
        )
    return notes


def _by_key(paths: list[str], key_of: Callable[[str], str | None]) -> list[tuple[str, str, int]]:
    """(key, its first path, how many) for the paths that have a Dagster partition."""
    found: dict[str, tuple[str, int]] = {}
    for path in paths:
        key = key_of(path)
        if key is not None:
            first, count = found.get(key, (path, 0))
            found[key] = (first, count + 1)
    return [(key, first, count) for key, (first, count) in found.items()]


def partition_observations(
    instance: DagsterInstance,
    asset_key: AssetKey,
    pipeline: Pipeline,
    state: PipelineState,
    partition_of: PartitionOf,
    notes: Mapping[str, _Notes],
) -> list[AssetObservation]:
    """An observation per partition with something to say, when it changed since its last one:
    its whole state, with ``partition/state`` ``waiting`` (files wait for a run) or
    ``files not ingested``, the reason in plain words and ``files/pending``."""
    keys = sorted(notes)
    truths = file_partition_truths(pipeline, state, keys, partition_of)
    said: dict[str, PartitionTruth] = {}
    for key in keys:
        entry = notes[key]
        words = "; ".join([*entry.waiting, *entry.not_ingested])
        said[key] = truths[key].saying(
            "files not ingested" if entry.not_ingested else "waiting",
            f"{words}. {_sentence(truths[key].reason)}",
            numbers={vocab.FILES_PENDING: entry.pending, vocab.BYTES_PENDING: entry.pending_bytes},
        )
    return changed_observations(instance, asset_key, said)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]
