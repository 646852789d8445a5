"""Late rows of upstream versions that are gone: found by counting, kept like every late row
(issue 21 §3).

A batch that reads its upstreams by event time (``kinds/event_time/upstream.py``: the versions after
the last batch were cleaned from the log, or their files compacted and vacuumed) reads again
every row of a window still open. A row appended meanwhile into a window the watermark had
already closed, or without an event time, is late; but no read can say which rows of a closed
window arrived after version ``V``. Counting can, window by window:

    new(w) = the upstream's rows of w now
             - the rows the output aggregated into w (its ``_rows``)
             - the rows of w in the late table (written by earlier batches)

Every row a batch ever read of a closed window went into its output row or into the late table
(an append-only upstream, which the aggregate requires), so ``new(w)`` rows of ``w`` arrived
since it last read, and no other. They are late rows like any other: in the late table with
their reason (``late_policy: update``: they reopen their window), counted in the run's
metadata. Once they are written ``new(w)`` is 0, so a later batch never writes them again, and a
re-run of the batch (killed after its late commit) finds its txn in the late table.

Which rows: a window's rows already in the late table are left out by content (a row equal to
one kept earlier is that one); of the rest, when they are exactly ``new(w)`` (the window had
no row when it was emitted) or all alike, the rows are known exactly. Otherwise the output
keeps only the aggregate of the emitted ones, and which of them came later cannot be known once
those versions are gone: the ``new(w)`` rows of the most recently written files are kept (the
add actions' modification time: after a log cleanup without OPTIMIZE, the appended files are
the newest), and their reason says so. Rows without an event time are never aggregated, so
they are always known exactly.

The scan reads every upstream file that may hold a row of a closed window, so a batch runs it
only when the statistics say rows are missing: ``appended - (rows the open windows gained)``
(add actions' ``numRecords`` now and at ``V``, ``open_rows`` of the state), which for an
append-only upstream is the sum of ``new(w)``; or when that cannot be counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from watermark_assets import storage
from watermark_assets.core.event_time import EventTimeStats
from watermark_assets.kinds.event_time.progress import WindowProgress
from watermark_assets.kinds.event_time.upstream import UpstreamRead
from watermark_assets.spark import io, window_agg
from watermark_assets.spark.window_agg import (
    LATE_BATCH,
    LATE_REASON,
    LATE_WATERMARK,
    ROWS_OUTPUT,
    WINDOW_END,
    WINDOW_START,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from watermark_assets.kinds.event_time.window import WindowAggregateSpec

#: internal columns of the scan (never written)
_WINDOW_KEY = "_recover_window"
_FILE = "_recover_file"
_WRITTEN = "_recover_written"
_CONTENT = "_recover_content"
_EXACT = "_recover_exact"
#: the window key of rows without an event time (no window starts at Long.MinValue)
_NO_WINDOW = -(2**63)


@dataclass(frozen=True, kw_only=True)
class Recovery:
    """The late rows a batch read by event time found (module docstring)."""

    #: the rows (persisted; the upstream's columns, ``_input``, the window, ``_late_reason`` and
    #: ``_late_watermark``); None: none found, or no scan
    frame: DataFrame | None = None
    rows: int = 0
    #: of ``rows``, those whose identity is inferred (the window held emitted rows too)
    inferred: int = 0
    windows: int = 0
    #: rows fewer than accounted (windows whose rows were removed in the lost versions)
    fewer: int = 0
    #: closed windows with upstream rows whose output row does not count its rows (an output
    #: from before ``_rows``, without a ``count`` aggregate): not checked
    uncounted: int = 0
    scanned: bool = False
    _persisted: tuple[Any, ...] = field(default=())

    def release(self) -> None:
        for frame in self._persisted:
            frame.unpersist()


def appended_since(
    reads: Mapping[str, UpstreamRead], progress: WindowProgress
) -> dict[str, int | None]:
    """Each input's rows appended since the last batch: its rows now less then (statistics;
    None: not countable)."""
    appended: dict[str, int | None] = {}
    for name, read in reads.items():
        then = 0 if read.read_from < 0 else progress.upstream_rows.get(name)
        appended[name] = None if read.rows is None or then is None else read.rows - then
    return appended


def missing_rows(
    appended: Mapping[str, int | None], progress: WindowProgress, rows_open: int
) -> int | None:
    """Rows appended since that the read of the open windows did not see (in closed windows or
    without an event time): appended less what the open windows gained; None: not countable."""
    counts = list(appended.values())
    if progress.open_rows is None or any(c is None for c in counts):
        return None
    return sum(c for c in counts if c is not None) - (rows_open - progress.open_rows)


def find_late_rows(
    spark: SparkSession,
    spec: WindowAggregateSpec,
    reads: Mapping[str, UpstreamRead],
    *,
    batch: int,
    bound_ms: int | None,
) -> Recovery:
    """The late rows the inputs read by event time gained since their last batch in the windows
    the watermark ``bound_ms`` closed (less the allowed lateness) and without an event time
    (module docstring), persisted. ``bound_ms``: the watermark the output is complete to (None:
    no window closed yet, only the rows without an event time)."""
    from pyspark.sql import functions as F

    closed_ms = None if bound_ms is None else bound_ms - spec.lateness_ms
    rows = _closed_rows(spark, spec, reads, closed_ms)
    if rows is None:
        return Recovery(scanned=True)
    late = _late_rows(spark, spec, [n for n, r in reads.items() if r.by_event_time], batch)
    counts = _counts(spec, rows, _emitted(spark, spec, closed_ms), late)
    counts.persist()
    summary = counts.agg(
        F.sum(F.when(F.col("_new") > 0, F.col("_new")).otherwise(0)).alias("rows"),
        F.count(F.when(F.col("_new") > 0, 1)).alias("windows"),
        F.sum(F.when(F.col("_new") < 0, -F.col("_new")).otherwise(0)).alias("fewer"),
        F.count(F.when(F.col("_new").isNull(), 1)).alias("uncounted"),
    ).first()
    assert summary is not None
    found = int(summary["rows"] or 0)
    base = Recovery(
        windows=int(summary["windows"]),
        fewer=int(summary["fewer"] or 0),
        uncounted=int(summary["uncounted"]),
        scanned=True,
    )
    if found == 0:
        counts.unpersist()
        return base
    chosen = _choose(rows, counts.where(F.col("_new") > 0), late)
    watermark_ms = 0 if bound_ms is None else bound_ms
    reasons = _reason(spec, reads, watermark_ms)
    recovered = (
        chosen.withColumn(LATE_REASON, reasons)
        .withColumn(LATE_WATERMARK, F.timestamp_millis(F.lit(watermark_ms)))
        .persist()
    )
    inferred = recovered.agg(F.count(F.when(~F.col(_EXACT), 1))).first()
    assert inferred is not None
    internal = (_WINDOW_KEY, _FILE, _WRITTEN, _CONTENT, _EXACT, "_new", "_kept", "_alike")
    frame = recovered.drop(*[c for c in internal if c in recovered.columns])
    return Recovery(
        frame=frame,
        rows=found,
        inferred=int(inferred[0]),
        windows=base.windows,
        fewer=base.fewer,
        uncounted=base.uncounted,
        scanned=True,
        _persisted=(recovered, counts),
    )


def _window_key() -> Column:
    from pyspark.sql import functions as F

    return F.coalesce(F.unix_millis(F.col(WINDOW_START)), F.lit(_NO_WINDOW))


def _closed_rows(
    spark: SparkSession,
    spec: WindowAggregateSpec,
    reads: Mapping[str, UpstreamRead],
    closed_ms: int | None,
) -> DataFrame | None:
    """The rows of closed windows (and without an event time) of the inputs read by event time,
    each with its input, window key, file and the file's modification time; None: no file."""
    from pyspark.sql import functions as F

    from watermark_assets.kinds.event_time.window import INPUT_COLUMN
    from watermark_assets.spark.paths import relative_to_root

    frames = []
    written: list[tuple[str, str, int]] = []
    for name, read in reads.items():
        if not read.by_event_time or not read.closed_files:
            continue
        files = [storage.join(read.uri, path) for path, _ in read.closed_files]
        frame = io.read_files(spark, files, format="parquet", base_path=read.uri, file_column=_FILE)
        frames.append(
            frame.withColumn(_FILE, relative_to_root(F.col(_FILE), read.uri)).withColumn(
                INPUT_COLUMN, F.lit(name)
            )
        )
        written += [(name, path, at) for path, at in read.closed_files]
    if not frames:
        return None
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame, allowMissingColumns=True)
    framed = window_agg.with_window(
        union, spec.event_column, spec.windows.size_ms, spec.windows.origin_ms
    ).where(window_agg.late_condition(spec.event_column, closed_ms))
    times = spark.createDataFrame(
        written, schema=f"`{INPUT_COLUMN}` STRING, `{_FILE}` STRING, `{_WRITTEN}` BIGINT"
    )
    return framed.join(F.broadcast(times), [INPUT_COLUMN, _FILE], "left").withColumn(
        _WINDOW_KEY, _window_key()
    )


def _table(spark: SparkSession, uri: str) -> DataFrame | None:
    """The rows of a Delta table's current snapshot (None: no table or no file)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    from watermark_assets.kinds.event_time.window import table_file_uris

    try:
        table = DeltaTable(uri, storage_options=storage.delta_options(uri))
    except TableNotFoundError:
        return None
    files = table_file_uris(uri, table)
    return io.read_files(spark, files, format="parquet") if files else None


def _emitted(spark: SparkSession, spec: WindowAggregateSpec, closed_ms: int | None) -> Any:
    """Per closed window of the output, the rows it aggregated (``_rows``, or the ``count``
    aggregate of an output from before it; null: not counted)."""
    from pyspark.sql import functions as F

    output = _table(spark, spec.output_uri)
    if output is None or closed_ms is None:
        return None
    counted = [F.col(ROWS_OUTPUT)] if ROWS_OUTPUT in output.columns else []
    counted += [F.col(a.name) for a in spec.aggregates if a.function == "count"]
    emitted = F.coalesce(*counted) if counted else F.lit(None)
    return (
        output.where(F.unix_millis(F.col(WINDOW_END)) <= F.lit(closed_ms))
        .select(_window_key().alias(_WINDOW_KEY), emitted.cast("long").alias("_e"))
        .groupBy(_WINDOW_KEY)
        .agg(
            F.sum("_e").alias("_e"),
            (F.count("_e") == F.count(F.lit(1))).alias("_e_known"),
        )
    )


def _late_rows(
    spark: SparkSession, spec: WindowAggregateSpec, inputs: list[str], batch: int
) -> DataFrame | None:
    """The late table's rows of ``inputs`` written by batches before ``batch``, with their
    window key (a late row's window is closed, or it has no event time)."""
    from pyspark.sql import functions as F

    from watermark_assets.kinds.event_time.window import INPUT_COLUMN

    late = _table(spark, spec.late_uri)
    if late is None:
        return None
    late = late.where(F.col(LATE_BATCH) < F.lit(batch))
    if INPUT_COLUMN in late.columns:
        late = late.where(F.col(INPUT_COLUMN).isin(inputs))
    framed = window_agg.with_window(
        late, spec.event_column, spec.windows.size_ms, spec.windows.origin_ms
    )
    return framed.withColumn(_WINDOW_KEY, _window_key())


def _counts(
    spec: WindowAggregateSpec, rows: DataFrame, emitted: Any, late: DataFrame | None
) -> DataFrame:
    """Per window key: ``_new`` = upstream rows - emitted - late (null: the emitted rows are
    not counted), and the late rows' count ``_l``."""
    from pyspark.sql import functions as F

    counts = rows.groupBy(_WINDOW_KEY).agg(F.count(F.lit(1)).alias("_u"))
    if emitted is not None:
        counts = counts.join(emitted, _WINDOW_KEY, "full_outer")
    else:
        counts = counts.withColumn("_e", F.lit(0).cast("long")).withColumn("_e_known", F.lit(True))
    if late is not None:
        kept = late.groupBy(_WINDOW_KEY).agg(F.count(F.lit(1)).alias("_l"))
        counts = counts.join(kept, _WINDOW_KEY, "full_outer")
    else:
        counts = counts.withColumn("_l", F.lit(0).cast("long"))
    new = F.coalesce(F.col("_u"), F.lit(0)) - F.coalesce(F.col("_e"), F.lit(0))
    new = new - F.coalesce(F.col("_l"), F.lit(0))
    known = F.coalesce(F.col("_e_known"), F.lit(True))
    return counts.select(
        _WINDOW_KEY, F.when(known, new).alias("_new"), F.coalesce(F.col("_l"), F.lit(0)).alias("_l")
    )


def _content(columns: list[str]) -> Column:
    """A row's content as one value (two rows alike have the same), whatever the types."""
    from pyspark.sql import functions as F

    return F.sha2(F.to_json(F.struct(*[F.col(f"`{c}`") for c in columns])), 256)


def _choose(rows: DataFrame, positive: DataFrame, late: DataFrame | None) -> DataFrame:
    """Of each window with ``_new`` > 0, its rows less those alike the late rows kept earlier,
    then the ``_new`` newest written; ``_recover_exact`` says whether they are known exactly."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    internal = {_WINDOW_KEY, _FILE, _WRITTEN, WINDOW_START, WINDOW_END}
    data = [c for c in rows.columns if c not in internal]
    if late is not None:
        data = [c for c in data if c in late.columns]
    candidates = rows.join(F.broadcast(positive.select(_WINDOW_KEY, "_new")), _WINDOW_KEY)
    candidates = candidates.withColumn(_CONTENT, _content(data))
    if late is not None:
        copies = (
            late.withColumn(_CONTENT, _content(data))
            .groupBy(_WINDOW_KEY, _CONTENT)
            .agg(F.count(F.lit(1)).alias("_copies"))
        )
        oldest_first = Window.partitionBy(_WINDOW_KEY, _CONTENT).orderBy(
            F.col(_WRITTEN).asc_nulls_first(), F.col(_FILE).asc_nulls_first()
        )
        candidates = (
            candidates.join(copies, [_WINDOW_KEY, _CONTENT], "left")
            .withColumn("_copy", F.row_number().over(oldest_first))
            .where(F.col("_copy") > F.coalesce(F.col("_copies"), F.lit(0)))
            .drop("_copy", "_copies")
        )
    window = Window.partitionBy(_WINDOW_KEY)
    newest_first = window.orderBy(
        F.col(_WRITTEN).desc_nulls_last(), F.col(_FILE).desc_nulls_last(), F.col(_CONTENT).desc()
    )
    return (
        candidates.withColumn("_kept", F.count(F.lit(1)).over(window))
        .withColumn("_alike", F.size(F.collect_set(_CONTENT).over(window)))
        .withColumn("_rank", F.row_number().over(newest_first))
        .where(F.col("_rank") <= F.col("_new"))
        .withColumn(_EXACT, (F.col("_kept") == F.col("_new")) | (F.col("_alike") == 1))
        .drop("_rank")
    )


def _reason(
    spec: WindowAggregateSpec, reads: Mapping[str, UpstreamRead], watermark_ms: int
) -> Column:
    """The late reason of a found row: the usual one, where it was appended, and (identity
    inferred) how it was chosen."""
    from pyspark.sql import functions as F

    from watermark_assets.kinds.event_time.window import INPUT_COLUMN

    where = F.lit("")
    for name, read in reads.items():
        if read.by_event_time:
            text = (
                f"; appended to {read.uri!r} in versions {read.versions} (gone from its log or "
                "vacuumed), found by event time"
            )
            where = F.when(F.col(INPUT_COLUMN) == F.lit(name), F.lit(text)).otherwise(where)
    inferred = F.concat(
        F.lit("; "),
        F.col("_new").cast("string"),
        F.lit(" of the window's "),
        F.col("_kept").cast("string"),
        F.lit(
            " row(s) not kept earlier were appended then, and which ones cannot be known: "
            "the most recently written are kept"
        ),
    )
    usual = window_agg.late_reason(F.col(spec.event_column), F.col(WINDOW_END), watermark_ms)
    return F.concat(usual, where, F.when(F.col(_EXACT), F.lit("")).otherwise(inferred))


def account(
    reads: Mapping[str, UpstreamRead],
    appended: Mapping[str, int | None],
    missing: int | None,
    stats: dict[str, EventTimeStats],
    recovery: Recovery,
) -> tuple[dict[str, EventTimeStats], int | None, str]:
    """A batch read by event time: the inputs' stats counting only inputs that had new rows
    (rows read again are not data for the idle timeout), the rows appended since that are
    neither in a window nor found (None: not countable) and what the reason says."""
    kept = {n: s for n, s in stats.items() if appended.get(n) != 0}
    lost = "; ".join(f"{r.uri!r} versions {r.versions}: {r.lost}" for r in reads.values() if r.lost)
    said = (
        f"; read by event time ({lost or 'replanned by repair-state'}): every upstream row of a "
        "window the watermark had not closed was read again from the current snapshot and the "
        "open windows recomputed"
    )
    where = ", ".join(
        f"{r.uri!r} versions {r.versions}" for r in reads.values() if r.read_to > r.read_from
    )
    if not recovery.scanned:  # the statistics prove nothing is missing
        note = "; every row appended since is accounted for"
        total = sum(c for c in appended.values() if c is not None)
        return kept, 0, f"{said}{note} ({total} row(s), all in windows still open)"
    parts = []
    if recovery.rows:
        exactly = recovery.rows - recovery.inferred
        parts.append(
            f"{recovery.rows} row(s) appended since into {recovery.windows} window(s) already "
            f"closed (or without an event time) were found by counting each closed window's "
            f"upstream rows against its output row's and the late table's, and kept as late "
            f"records ({exactly} known exactly, {recovery.inferred} inferred: the most recently "
            f"written of a window that had emitted rows too); they are among the rows of {where}"
        )
    if recovery.fewer:
        parts.append(
            f"the upstream holds {recovery.fewer} row(s) fewer than were aggregated or kept late "
            f"in closed windows: it removed rows in versions whose commits are gone ({where}); "
            "emitted windows stay as they are"
        )
    unidentified: int | None = 0
    if recovery.uncounted:
        found = recovery.rows - recovery.fewer
        unidentified = None if missing is None else missing - found
        if unidentified != 0:
            parts.append(
                f"{recovery.uncounted} closed window(s) were emitted before the output counted "
                "its rows (_rows) and have no count aggregate: "
                + (
                    "rows appended into them could not be counted"
                    if unidentified is None
                    else f"{unidentified} row(s) appended into them could not be identified"
                )
                + "; late rows of those versions may be missing from the late table"
            )
    if not parts:
        parts.append("every row appended since is accounted for")
    return kept, unidentified, f"{said}; " + "; ".join(parts)
