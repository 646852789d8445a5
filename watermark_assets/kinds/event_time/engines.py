"""The two engines of an event-time aggregate behind one shape (``engine: batch | streaming``).

The Dagster edge asks an engine for the committed watermark (the sensor) and for one run (the
asset), and reads the same :class:`WindowRun` back whichever engine ran:

- :class:`BatchEngine`: ``kinds/event_time/window.py`` over the upstream tables (late records kept,
  ``count_distinct``, several inputs, allowed lateness);
- :class:`StreamEngine`: ``kinds/event_time/stream.py``, a Structured Streaming query over the
  upstream file pipeline's landing folder (the rows Spark drops as late are kept too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from watermark_assets.core.event_time import EventTimeWatermark
from watermark_assets.core.text import NEVER_RUN, files_text, millis_text
from watermark_assets.engine.plan import PlannedRun
from watermark_assets.kinds.event_time.stream import (
    StreamSpec,
    committed_watermark_ms,
    run_window_stream,
)
from watermark_assets.kinds.event_time.window import (
    WindowAggregateSpec,
    load_progress,
    plan_window_batch,
    replan_batch,
    run_window_batch,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True, kw_only=True)
class WindowRun:
    """What one run of either engine did, for the metadata, the checks and the log."""

    engine: str
    watermark_before: EventTimeWatermark
    watermark_after: EventTimeWatermark
    rows_read: int
    windows_emitted: int
    windows_open: int | None
    late_records: int
    late_kept: bool
    reason: str
    details: dict[str, Any] = field(default_factory=dict)
    #: rows appended upstream that went neither into a window nor into the late table, and
    #: why (a batch read by event time after the upstream's versions were gone); None: none
    unaccounted: str | None = None


class WindowEngine(Protocol):
    """One way to run an event-time aggregate."""

    @property
    def name(self) -> str:
        """``batch`` or ``streaming`` (the configuration's ``engine``)."""
        ...

    @property
    def spec(self) -> WindowAggregateSpec:
        """The settings both engines share (windows, delay, policy, tables)."""
        ...

    def committed(self) -> EventTimeWatermark:
        """The watermark the last committed run reached."""
        ...

    def run(self, spark: SparkSession, *, now: datetime, run_id: str) -> WindowRun:
        """One run: read what is new, emit the windows the watermark closes, commit."""
        ...

    def repair(self) -> str:
        """``watermark-assets repair-state PIPELINE``: what it did, as one line."""
        ...

    def plan(self) -> PlannedRun:
        """What the next run would read and write (``watermark-assets plan``), nothing
        written."""
        ...


@dataclass(frozen=True)
class BatchEngine:
    spec: WindowAggregateSpec
    name: str = "batch"

    def committed(self) -> EventTimeWatermark:
        return load_progress(self.spec).watermark

    def repair(self) -> str:
        return replan_batch(self.spec)

    def plan(self) -> PlannedRun:
        spec, batch = self.spec, plan_window_batch(self.spec)
        done = batch.progress.batch
        watermark = _watermark_text(batch.before) + (f" after batch {done}" if done else "")
        if batch.nothing_new:
            return PlannedRun(None, watermark, "nothing", "nothing", (batch.nothing_new_reason,))
        reads = "; ".join(
            f"{name} versions {read.versions}"
            + (" by event time" if read.by_event_time else "")
            + f", {files_text(read.files)}"
            for name, read in batch.reads.items()
            if read.files or read.by_event_time
        )
        writes = (
            f"batch {batch.batch}: the windows the watermark closes appended to "
            f"{spec.output_uri}, the open windows' state replaced in {spec.state_uri}, late rows "
            f"kept in {spec.late_uri}"
        )
        notes = [f"{read.uri} {read.lost}" for read in batch.reads.values() if read.lost]
        if batch.recorded is not None:
            notes.insert(
                0,
                f"batch {batch.batch}'s output is committed (a run died after it): the run "
                "finishes it as recorded",
            )
        return PlannedRun(None, watermark, reads or "nothing", writes, tuple(notes))

    def run(self, spark: SparkSession, *, now: datetime, run_id: str) -> WindowRun:
        result = run_window_batch(spark, self.spec, now=now, run_id=run_id)
        details: dict[str, Any] = {
            "event_time/batch": result.batch if result.batch is not None else "none (nothing new)"
        }
        for input_name, (first, last) in result.upstream_ranges.items():
            details[f"event_time/upstream_versions/{input_name}"] = f"{first}..{last}"
        for table, version in result.versions.items():
            details[f"delta/{table}_version"] = -1 if version is None else version
        details["event_time/read_by"] = result.read_by
        details["cleanup/orphans_removed"] = len(result.leftovers_removed)
        unaccounted = None
        if result.read_by == "event_time":
            missing = result.late_unidentified
            details["event_time/late_recovered"] = result.late_recovered
            details["event_time/late_recovered_inferred"] = result.late_inferred
            details["event_time/late_unidentified"] = "unknown" if missing is None else missing
            if missing != 0:
                unaccounted = result.read_note
        return WindowRun(
            engine=self.name,
            watermark_before=result.watermark_before,
            watermark_after=result.watermark_after,
            rows_read=result.rows_read,
            windows_emitted=result.windows_emitted,
            windows_open=result.windows_open,
            late_records=result.late_rows,
            late_kept=True,
            reason=result.reason,
            details=details,
            unaccounted=unaccounted,
        )


@dataclass(frozen=True)
class StreamEngine:
    spec: WindowAggregateSpec  # the shared settings (windows, delay, output table)
    stream: StreamSpec
    name: str = "streaming"

    def committed(self) -> EventTimeWatermark:
        return EventTimeWatermark(watermark_ms=committed_watermark_ms(self.stream) or 0)

    def repair(self) -> str:
        return (
            f"{self.spec.pipeline}: the streaming engine keeps its progress in Spark's checkpoint "
            f"({self.stream.checkpoint_uri}) and the output's txn, which Delta's maintenance "
            "keeps: nothing to repair"
        )

    def plan(self) -> PlannedRun:
        stream = self.stream
        return PlannedRun(
            None,
            _watermark_text(self.committed()),
            f"the files of {stream.landing_uri} that Spark's checkpoint "
            f"{stream.checkpoint_uri} has not read yet (Spark lists them as the run starts)",
            f"each micro-batch: the windows the watermark closes appended to {stream.output_uri}"
            f", late rows kept in {stream.late_uri}",
        )

    def run(self, spark: SparkSession, *, now: datetime, run_id: str) -> WindowRun:
        before = self.committed()
        result = run_window_stream(spark, self.stream, now=now, run_id=run_id)
        after = before.advance(EventTimeWatermark(watermark_ms=result.watermark_ms or 0))
        return WindowRun(
            engine=self.name,
            watermark_before=before,
            watermark_after=after,
            rows_read=result.rows_read,
            windows_emitted=result.windows_emitted,
            windows_open=None,  # in Spark's state store
            late_records=result.late_kept,
            late_kept=True,
            reason=(
                f"{len(result.batches)} micro-batch(es) "
                f"{', '.join(map(str, result.batches)) or '-'}: {result.rows_read} "
                f"row(s) read, {result.windows_emitted} window(s) emitted, "
                f"{result.late_kept} late row(s) kept in the late table (Spark dropped them; it "
                f"counts {result.late_dropped} after its partial aggregation); watermark "
                f"{millis_text(before.watermark_ms)} -> {millis_text(after.watermark_ms)}"
            ),
            details={
                "event_time/micro_batches": result.batches,
                "stream/checkpoint": self.stream.checkpoint_uri,
                "event_time/late_rows_dropped_by_spark": result.late_dropped,
                "delta/versions": result.versions,
            },
        )


def _watermark_text(watermark: EventTimeWatermark) -> str:
    return NEVER_RUN if watermark.is_empty else millis_text(watermark.watermark_ms)
