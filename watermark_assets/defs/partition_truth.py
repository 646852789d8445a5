"""What one partition holds and why, on its own page: read from the pipeline's state store,
never from what a run planned (a run that found nothing new must not erase a partition's state).

One shape for every kind of watermark (file path, time, unit, time x unit, event time):

- ``partition/state``: a word or two (``ingested``, ``no file yet``, ``closed``, ``open``, ...);
- ``partition/reason``: why, in plain words, naming the times it waits for (ISO-8601 UTC);
- ``partition/watermark`` (readable) and ``partition/watermark_time`` (a timestamp);
- ``partition/watermarks``: a kind's detail (a table: each landing partition's watermark);
- ``dagster/partition_row_count`` when the state store counts the partition's rows.

A run adds it to every partition it materializes (:func:`add_partition_truth`); a sensor's tick
writes it as an observation of a partition that is missing or waiting, only when the state or
the reason changed since the partition's last observation (:func:`changed_observations`), so
the event log is not flooded by ticks that have nothing new to say. A sensor that ticks with
the same words as its last tick, and no event of the asset since, reads nothing per partition
(:func:`observations_since`, the one way every sensor says its pages once).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

from dagster import AssetKey, AssetObservation, AssetRecordsFilter, DagsterInstance, MetadataValue

from watermark_assets import vocabulary as v
from watermark_assets.vocabulary import time_text

STATE = v.PARTITION_STATE
REASON = v.PARTITION_REASON

#: How many partitions' observations a tick reads back (and so writes, at most).
MAX_OBSERVED = 50


#: ``2024-01-31T00:00:00Z``: the one time format of the metadata (:func:`vocabulary.time_text`).
iso_utc = time_text


#: The columns of ``partition/watermarks``, ``watermark/partitions_before`` and
#: ``watermark/partitions_after``: each landing partition and its watermark (the last file name).
LANDING_WATERMARK_COLUMNS: dict[str, str] = {"partition": "string", "watermark": "string"}


def landing_watermarks(marks: Mapping[str, str]) -> MetadataValue:
    """Landing partition -> watermark as a table, one row per landing partition, in order."""
    return v.pairs(LANDING_WATERMARK_COLUMNS, marks)


@dataclass(frozen=True, kw_only=True)
class PartitionTruth:
    """One partition's whole state, as its state store holds it (module docstring)."""

    state: str
    reason: str
    watermark: str | None = None
    watermark_time: datetime | None = None
    watermarks: Mapping[str, str] | None = None
    rows: int | None = None
    #: numbers a check can bound (e.g. ``files/pending``), per partition
    numbers: Mapping[str, int | float] = field(default_factory=dict)

    def metadata(self) -> dict[str, Any]:
        entries: dict[str, Any] = {
            STATE: MetadataValue.text(self.state),
            REASON: MetadataValue.text(self.reason),
            v.PARTITION_WATERMARK: MetadataValue.text(self.watermark or "(none)"),
        }
        if self.watermark_time is not None:
            entries[v.PARTITION_WATERMARK_TIME] = v.timestamp(self.watermark_time)
        if self.watermarks is not None:
            entries[v.PARTITION_WATERMARKS] = landing_watermarks(self.watermarks)
        if self.rows is not None:
            entries[v.DAGSTER_PARTITION_ROW_COUNT] = MetadataValue.int(self.rows)
        for name, number in self.numbers.items():
            entries[name] = v.number(number)
        return entries

    def saying(
        self, state: str, reason: str, *, numbers: Mapping[str, int | float] | None = None
    ) -> PartitionTruth:
        """The same watermark, with another state and reason (a sensor's finding), and more
        numbers."""
        return replace(
            self, state=state, reason=reason, numbers={**self.numbers, **(numbers or {})}
        )


class _AddsAssetMetadata(Protocol):
    def add_asset_metadata(
        self, metadata: Mapping[str, Any], asset_key: Any = None, partition_key: str | None = None
    ) -> None: ...


def add_partition_truth(context: _AddsAssetMetadata, truths: Mapping[str, PartitionTruth]) -> None:
    """Each partition's truth on its own materialization (an asset's or a step's context)."""
    for key, truth in truths.items():
        context.add_asset_metadata(truth.metadata(), partition_key=key)


def changed_observations(
    instance: DagsterInstance, asset_key: AssetKey, truths: Mapping[str, PartitionTruth]
) -> list[AssetObservation]:
    """Observations of the partitions whose state or reason differs from their latest event
    (an observation or a materialization, whichever is newer), at most :data:`MAX_OBSERVED`."""
    keys = list(truths)[:MAX_OBSERVED]
    if not keys:
        return []
    out = []
    for key in keys:
        truth = truths[key]
        if _latest_said(instance, asset_key, key) == (truth.state, truth.reason):
            continue
        out.append(
            AssetObservation(
                asset_key=asset_key,
                partition=key,
                description=f"{truth.state}: {truth.reason}",
                metadata=truth.metadata(),
            )
        )
    return out


def digest(truths: Mapping[str, PartitionTruth]) -> str:
    """A short digest of what ``truths`` say (each partition's state and reason), kept in a
    sensor's cursor."""
    text = "\n".join(f"{key}\t{t.state}\t{t.reason}" for key, t in sorted(truths.items()))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def observations_since(
    instance: DagsterInstance,
    asset_key: AssetKey,
    truths: Mapping[str, PartitionTruth],
    said: str | None,
    *,
    left_to_runs: bool = False,
) -> tuple[list[AssetObservation], str]:
    """:func:`changed_observations`, unless nothing changed since the tick that returned
    ``said``; and what to pass as ``said`` to the next tick (a sensor keeps it in its cursor).
    Every sensor that writes partition pages says them once this way.

    ``said`` names what a tick found every page already saying: the truths' :func:`digest` and
    the asset's newest observation and materialization (two queries). While both are the same,
    the pages still say it: nothing is read per partition, nothing is written. Any event of the
    asset since (a run, a sensor's or a user's report, of any partition) makes the tick read
    every page again. A tick that writes observations returns ``""`` (not yet said: the next
    tick reads them back).

    ``left_to_runs``: a materialized partition's page is its run's, not the sensor's (the file
    sensor's partitions with no file waiting, ``kinds/file_path/quiet_partitions.py``). The
    truths then depend on no event, so ``said`` is their digest alone: while it is unchanged a
    tick reads nothing at all; when it changed, the partitions materialized meanwhile are left
    out and the others observed where their latest event says something else; a tick that
    writes returns the digest (what it wrote is what the pages say: no event is in the key)."""
    key = digest(truths)
    if not left_to_runs:
        key = f"{key}:{_newest_event_ids(instance, asset_key)}"
    if key == said:
        return [], key
    if left_to_runs:
        materialized = instance.get_materialized_partitions(asset_key)
        truths = {k: t for k, t in truths.items() if k not in materialized}
    found = changed_observations(instance, asset_key, truths)
    return found, "" if found and not left_to_runs else key


def _newest_event_ids(instance: DagsterInstance, asset_key: AssetKey) -> str:
    """The storage ids of the asset's newest observation and materialization ("-": none)."""
    only = AssetRecordsFilter(asset_key=asset_key)
    newest = [
        next((str(record.storage_id) for record in fetch(only, limit=1).records), "-")
        for fetch in (instance.fetch_observations, instance.fetch_materializations)
    ]
    return ":".join(newest)


def _latest_said(instance: DagsterInstance, asset_key: AssetKey, key: str) -> tuple[Any, Any]:
    """The state and reason of the partition's latest observation or materialization."""
    only = AssetRecordsFilter(asset_key=asset_key, asset_partitions=[key])
    latest = [
        record
        for fetch in (instance.fetch_observations, instance.fetch_materializations)
        for record in fetch(only, limit=1).records
    ]
    if not latest:
        return None, None
    newest = max(latest, key=lambda record: record.storage_id)
    event = newest.asset_materialization or newest.asset_observation
    metadata = {} if event is None else event.metadata
    return (
        getattr(metadata.get(STATE), "value", None),
        getattr(metadata.get(REASON), "value", None),
    )
