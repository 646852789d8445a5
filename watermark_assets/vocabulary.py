"""One vocabulary for what a person reads in Dagster: the metadata keys and how values are said.

Every kind of watermark (file path, column, time, unit, time x unit, event time) uses the SAME key
for the same concept (``watermark/before``, ``watermark/after``, ``rows/read``, ``rows/committed``,
``delta/version``, ``cut_off``, ``lag``, ...) and the same formatters:

- a time in text is :func:`time_text`: ``2024-01-30T18:49:55Z``, ISO-8601 in UTC, whole seconds;
  milliseconds (``2024-01-30T18:49:55.578Z``) only when the instant has a non-zero millisecond
  (finer fractions are cut, never rounded). A naive datetime is refused (it names no instant).
  It lives in :mod:`watermark_assets.core.text` (re-exported here), so the core's own reasons (a
  tick's cut-off and windows) say times the same way;
- a value that IS a time is also given as Dagster timestamp metadata (:func:`timestamp`), which the
  UI shows in the viewer's own format, under the key plus ``_time`` (``watermark/after_time``);
- a duration is said in words (:func:`duration_text`: ``45 s``, ``3 h 5 min``, ``1,030 days``), with
  the number of seconds under the key plus ``/seconds`` for plots and checks (``lag/seconds``);
- several values of one shape are a Dagster table (:func:`table`: typed columns, one record per
  value; :func:`pairs` for a mapping), a markdown list (:func:`lines`) or a JSON object of plain
  values (:func:`plain`):
  numbers stay numbers, times are :func:`time_text`; never a Python repr, never the sentinels
  the state files use.

Every key is documented in ``docs/metadata.md`` (a test keeps the table and :data:`KEYS` equal).
Names written to disk (Delta transaction app ids, commitInfo keys, state files) are NOT here: they
never change with how the UI says things.

Pure: the standard library, Dagster's metadata value types and ``watermark_assets.core``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

from dagster import MetadataValue, TableColumn, TableMetadataValue, TableRecord, TableSchema

from watermark_assets.core.column.watermark import ColumnWatermark
from watermark_assets.core.replace_window import region_text as region_text  # the one form
from watermark_assets.core.text import millis_text as millis_text  # re-exported: one format
from watermark_assets.core.text import time_text as time_text
from watermark_assets.core.text import value_text as value_text
from watermark_assets.core.time.tick import CutOff

# --- keys -------------------------------------------------------------------------------------
# The watermark: where it stood before the run, where it stands after it, and why.
WATERMARK_STATE = "watermark/state"
WATERMARK_BEFORE = "watermark/before"
WATERMARK_AFTER = "watermark/after"
WATERMARK_BEFORE_TIME = "watermark/before_time"
WATERMARK_AFTER_TIME = "watermark/after_time"
WATERMARK_BEFORE_VALUES = "watermark/before_values"
WATERMARK_AFTER_VALUES = "watermark/after_values"
WATERMARK_COLUMNS = "watermark/columns"
WATERMARK_OPERATOR = "watermark/operator"
WATERMARK_READ_FROM = "watermark/read_from"
WATERMARK_PROVIDER = "watermark/provider"
WATERMARK_REPAIRED_FROM_LOG = "watermark/repaired_from_log"
WATERMARK_NULL_WATERMARK = "watermark/null_watermark"
WATERMARK_PARTITIONS_BEFORE = "watermark/partitions_before"
WATERMARK_PARTITIONS_AFTER = "watermark/partitions_after"
WATERMARK_VALUE = "watermark/value"
WATERMARK_PARTITIONS = "watermark/partitions"

# The time kinds: the cut-off below which windows are final, the run's windows (or cells).
CUT_OFF = "cut_off"
WINDOWS = "time/windows"
CELLS = "time_unit/cells"
RUNS = "runs"
PARTITIONS_SKIPPED = "partitions/skipped"

# What the run read.
READ_SOURCE = "read/source"
READ_PREDICATE = "read/predicate"
READ_PUSHED_DOWN = "read/pushed_down"
READ_DETAILS = "read/details"
SOURCE_COLUMNS_IGNORED = "source/columns_ignored"
SOURCE_MISSING = "source/missing"
SCHEMA_IGNORED_COLUMNS = "schema/ignored_columns"
SCHEMA_VALUES_NULLED = "schema/values_nulled"
SCHEMA_VALUES_RESCUED = "schema/values_rescued"
SCHEMA_ROWS_RESCUED = "schema/rows_rescued"
SCHEMA_INFERRED = "schema/inferred"

# Volumes.
ROWS_READ = "rows/read"
ROWS_COMMITTED = "rows/committed"
ROWS_REMOVED = "rows/removed"
ROWS_MOVED = "rows/moved"
ROWS_QUARANTINED = "rows/quarantined"
ROWS_BOUNDARY_REREAD = "rows/boundary_reread"
ROWS_NULL_WATERMARK = "rows/null_watermark"
ROWS_UPDATED = "rows/updated"
ROWS_INSERTED = "rows/inserted"
ROWS_DEDUPLICATED = "rows/deduplicated"
FILES = "files"
FILES_ALREADY_COMMITTED = "files/already_committed"
FILES_ADDED = "files/added"
FILES_QUARANTINED = "files/quarantined"

# What the run replaced or merged.
REPLACE_WINDOW = "replace/window"
REPLACE_HIGH_WATERMARK = "replace/high_watermark"
MERGE_KEYS = "merge/keys"

# The commit.
DELTA_VERSION = "delta/version"
DELTA_VERSIONS = "delta/versions"
DELTA_TABLE_VERSION = "delta/table_version"
DELTA_TXNS = "delta/txns"
DELTA_COMMIT_ATTEMPTS = "delta/commit_attempts"
CHECKPOINT_WRITTEN = "checkpoint/written"
CLEANUP_ORPHANS_REMOVED = "cleanup/orphans_removed"
QUARANTINE_TABLE = "quarantine/table"
LATE_TABLE = "late/table"
STATE_TABLE = "state/table"
STREAM_CHECKPOINT = "stream/checkpoint"

# Freshness: how far behind the watermark is.
LAG = "lag"
LAG_SECONDS = "lag/seconds"

# Replays (column pipelines' partitions).
REPLAY_CHUNKS = "replay/chunks"
REPLAY_SKIPPED = "replay/skipped"

# Units.
UNIT_ID = "unit/id"
UNIT_IDS = "unit/ids"
UNITS_LISTING = "units/listing"
UNITS_INPUT = "units/input"
UNITS_NEW = "units/new"
UNITS_NO_LONGER_LISTED = "units/no_longer_listed"
UNITS_REFUSED = "units/refused"
UNITS_WAITING = "units/waiting"

# Event time.
EVENT_TIME_ENGINE = "event_time/engine"
EVENT_TIME_WINDOWS_EMITTED = "event_time/windows_emitted"
EVENT_TIME_WINDOWS_OPEN = "event_time/windows_open"
EVENT_TIME_LATE_RECORDS = "event_time/late_records"
EVENT_TIME_LATE_RECORDS_KEPT = "event_time/late_records_kept"
EVENT_TIME_EXPLAIN = "event_time/explain"
EVENT_TIME_INPUTS = "event_time/inputs"
EVENT_TIME_LOCAL_WATERMARKS = "event_time/local_watermarks"
EVENT_TIME_PARTITIONS_OPEN = "event_time/partitions_open"
EVENT_TIME_PARTITIONS_CLOSED = "event_time/partitions_closed"
EVENT_TIME_BATCH = "event_time/batch"
EVENT_TIME_READ_BY = "event_time/read_by"
EVENT_TIME_MICRO_BATCHES = "event_time/micro_batches"
EVENT_TIME_LATE_ROWS_DROPPED_BY_SPARK = "event_time/late_rows_dropped_by_spark"
EVENT_TIME_DELAY = "event_time/delay"
#: ``event_time/upstream_versions/<input>``: the versions of an input a batch read (first..last)
EVENT_TIME_UPSTREAM_VERSIONS = "event_time/upstream_versions/<input>"
#: ``delta/<table>_version``: the version of each table an event-time batch wrote (-1: none)
DELTA_TABLE_VERSION_OF = "delta/<table>_version"

# One partition's whole state (a run's materialization, a sensor's observation).
PARTITION_STATE = "partition/state"
PARTITION_REASON = "partition/reason"
PARTITION_WATERMARK = "partition/watermark"
PARTITION_WATERMARK_TIME = "partition/watermark_time"
PARTITION_WATERMARKS = "partition/watermarks"
PARTITION_FILES = "partition/files"
PARTITION_FILES_COMMITTED = "partition/files_committed"
PARTITION_ROWS_READ = "partition/rows_read"
PARTITION_ROWS_QUARANTINED = "partition/rows_quarantined"
PARTITION_FILES_QUARANTINED = "partition/files_quarantined"
PARTITION_FIRST_FILE = "partition/first_file"
PARTITION_LAST_FILE = "partition/last_file"
PARTITION_WINDOWS_OPEN = "partition/windows_open"
PARTITION_CLOSED = "partition/closed"

# A file-path pipeline's sensor: what its listing found.
FILES_PENDING = "files/pending"
BYTES_PENDING = "bytes/pending"
FILES_BELOW_WATERMARK = "files/below_watermark"
FILES_BELOW_WATERMARK_BY_PARTITION = "files/below_watermark_by_partition"
FILES_BELOW_WATERMARK_FIRST = "files/below_watermark_first"
FILES_LATE_AFTER_WINDOW = "files/late_after_window"
FILES_LATE_AFTER_WINDOW_FIRST = "files/late_after_window_first"
FILES_UNREADABLE = "files/unreadable"
FILES_UNREADABLE_FIRST = "files/unreadable_first"
FILES_UNSORTABLE = "files/unsortable"
FILES_UNSORTABLE_FIRST = "files/unsortable_first"
FILES_REWRITTEN = "files/rewritten"
FILES_REWRITTEN_FIRST = "files/rewritten_first"
FILES_COLUMNS_LEFT_OUT = "files/columns_left_out"
BACKLOG_FILES_PENDING = "backlog/files_pending"
BACKLOG_BYTES_PENDING = "backlog/bytes_pending"
BACKLOG_OLDEST_PENDING_AGE = "backlog/oldest_pending_age"
BACKLOG_OLDEST_PENDING_AGE_SECONDS = "backlog/oldest_pending_age/seconds"
BACKLOG_OLDEST_PENDING_TIME = "backlog/oldest_pending_time"
BACKLOG_OLDEST_PENDING_FILE = "backlog/oldest_pending_file"
BACKLOG_LISTING_CAPPED = "backlog/listing_capped"

# The table's schema: what the run's commits changed in it (issue 25).
SCHEMA_ADDED_COLUMNS = "schema/added_columns"
SCHEMA_WIDENED = "schema/widened"
#: A column source's sensor: the columns its source gained or retyped, and what schema.mode does.
SCHEMA_SOURCE_CHANGE = "schema/source_change"

# Dagster's own keys (the UI treats them specially).
DAGSTER_COLUMN_SCHEMA = "dagster/column_schema"
DAGSTER_URI = "dagster/uri"
DAGSTER_ROW_COUNT = "dagster/row_count"
DAGSTER_PARTITION_ROW_COUNT = "dagster/partition_row_count"

#: Every key above (documented in docs/metadata.md, one row each).
KEYS: tuple[str, ...] = tuple(
    value for name, value in sorted(globals().items()) if name.isupper() and isinstance(value, str)
)

#: Keys runs wrote before this vocabulary, and the key that replaced each (docs/metadata.md lists
#: them). No code reads any of them back: the checks read ``delta/version`` and ``delta/versions``,
#: which kept their names.
RENAMED: Mapping[str, str] = {
    "watermark/before_json": WATERMARK_BEFORE_VALUES,
    "watermark/after_json": WATERMARK_AFTER_VALUES,
    "time/cut_off": CUT_OFF,
    "time_unit/cut_off": CUT_OFF,
    "time/highest_watermark": WATERMARK_AFTER,
    "time_unit/highest_watermark": WATERMARK_AFTER,
    "time/window": REPLACE_WINDOW,
    "time/high_watermark": REPLACE_HIGH_WATERMARK,
    "time/runs": RUNS,
    "time_unit/runs": RUNS,
    "unit/runs": RUNS,
    "time/skipped_keys": PARTITIONS_SKIPPED,
    "time_unit/skipped_keys": PARTITIONS_SKIPPED,
    "unit/done_at_before": WATERMARK_BEFORE,
    "unit/done_at": WATERMARK_AFTER,
    "event_time/watermark": WATERMARK_AFTER_TIME,
    "event_time/watermark_before": WATERMARK_BEFORE,
    "event_time/lag_seconds": LAG_SECONDS,
    "lag_seconds": LAG_SECONDS,
    "delta/txn": DELTA_TXNS,
    "delta/output_versions": DELTA_VERSIONS,
    "backlog/oldest_pending_age_seconds": BACKLOG_OLDEST_PENDING_AGE_SECONDS,
}


# --- times ------------------------------------------------------------------------------------


def parse_time_text(text: str) -> datetime:
    """The instant :func:`time_text` wrote (``2024-01-31T00:00:00Z``); without a zone, UTC."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def cut_off_text(cut: CutOff) -> str:
    """The cut-off of a time watermark and what it comes from, e.g. ``2020-01-18T00:00:00Z
    (highest watermark 2020-01-21T00:00:00Z + abstinent 0d - grace 3d)``: the tick's own words
    (:class:`~watermark_assets.core.time.tick.CutOff`)."""
    return str(cut)


def timestamp(moment: datetime) -> MetadataValue:
    """Dagster timestamp metadata of an aware instant (naive refused, as :func:`time_text`)."""
    time_text(moment)  # refuses a naive datetime with the fix
    return MetadataValue.timestamp(moment)


def time_entries(key: str, moment: datetime | None, *, none: str = "(none)") -> dict[str, Any]:
    """``key`` as :func:`time_text` and ``key_time`` as a Dagster timestamp (``none``: no time)."""
    if moment is None:
        return {key: MetadataValue.text(none)}
    return {key: MetadataValue.text(time_text(moment)), f"{key}_time": timestamp(moment)}


def window_text(start: datetime, end: datetime) -> str:
    """``[2024-01-30T00:00:00Z, 2024-01-31T00:00:00Z)``: a window, start in, end out."""
    return f"[{time_text(start)}, {time_text(end)})"


# --- values -----------------------------------------------------------------------------------


def plain(value: object) -> Any:
    """``value`` as plain JSON: numbers, booleans, strings and None as they are; datetimes, dates
    and times as :func:`value_text`; mappings and sequences element by element; anything else as
    ``str``. Never a repr, never a state file's sentinel."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (datetime, date, time)):
        return value_text(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    return str(value)


def number(value: int | float) -> MetadataValue:
    """An int as int metadata, a float as float metadata (never a string)."""
    if isinstance(value, bool):
        return MetadataValue.bool(value)
    return MetadataValue.int(value) if isinstance(value, int) else MetadataValue.float(value)


def column_watermark_text(watermark: ColumnWatermark) -> str:
    """``updated_at=2026-04-03T09:15:00Z, id=42``; ``(empty: read everything)`` when empty (the
    watermark's own ``str``, values as :func:`value_text`)."""
    return str(watermark)


# --- durations --------------------------------------------------------------------------------


def duration_text(seconds: float | timedelta) -> str:
    """A duration in words, whole seconds (cut): ``0 s``, ``45 s``, ``2 min 5 s``, ``3 h 5 min``,
    ``1 day 2 h``, ``1,030 days`` (from 10 days on, whole days); negative ones with a ``-``."""
    total = seconds.total_seconds() if isinstance(seconds, timedelta) else float(seconds)
    if not math.isfinite(total):
        raise ValueError(f"a duration must be finite, not {total!r}")
    sign, whole = ("-" if total < 0 else ""), int(abs(total))
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days >= 10:
        return f"{sign}{days:,} days"
    if days:
        parts = [f"{days} day{'' if days == 1 else 's'}", f"{hours} h" if hours else ""]
    elif hours:
        parts = [f"{hours} h", f"{minutes} min" if minutes else ""]
    elif minutes:
        parts = [f"{minutes} min", f"{secs} s" if secs else ""]
    else:
        parts = [f"{secs} s"]
    return sign + " ".join(p for p in parts if p)


def exact_duration_text(millis: int) -> str:
    """A configured duration (a window's size, a watermark delay) in words, exactly:
    :func:`duration_text` when its words lose nothing (``5 min``, ``1 h``, ``2 days``), else in
    the largest of seconds and milliseconds that divides it (``3,605 s``, ``500 ms``)."""
    if millis % 1000:
        return f"{millis:,} ms"
    text = duration_text(millis / 1000)
    return text if _said_seconds(text) * 1000 == millis else f"{millis // 1000:,} s"


def _said_seconds(text: str) -> int:
    """The seconds :func:`duration_text`'s words say (``1 day 2 h`` -> 93600)."""
    units = {"days": 86400, "day": 86400, "h": 3600, "min": 60, "s": 1}
    words = text.lstrip("-").replace(",", "").split()
    total = sum(int(n) * units[u] for n, u in zip(words[::2], words[1::2]))
    return -total if text.startswith("-") else total


def duration_entries(key: str, seconds: float) -> dict[str, Any]:
    """``key`` in words (:func:`duration_text`) and ``key/seconds`` as a number (plotted)."""
    return {
        key: MetadataValue.text(duration_text(seconds)),
        f"{key}/seconds": MetadataValue.float(round(seconds, 3)),
    }


# --- several values ---------------------------------------------------------------------------


def _cell(value: object) -> str:
    if isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, int):
        text = f"{value:,}"
    else:
        text = value_text(value)
    # a cell is one line; a | would end it
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A markdown table (``|`` and line breaks in a cell escaped); ``(none)`` without rows."""
    lines = [list(r) for r in rows]
    if not lines:
        return "(none)"
    out = [
        "| " + " | ".join(_cell(h) for h in header) + " |",
        "|" + "|".join(" --- " for _ in header) + "|",
    ]
    out += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in lines]
    return "\n".join(out)


def table(columns: Mapping[str, str], rows: Iterable[Mapping[str, object]]) -> MetadataValue:
    """Several values of one shape (a run's windows, a unit's cut-off, the columns a commit
    added) as a Dagster table: ``columns`` maps each column's name to its Dagster type
    (``string``, ``int``, ``float``, ``bool``), in order; each row maps names to values (a
    name left out is empty). The UI shows a table; a reader gets the rows back with
    :func:`table_rows`. Cells keep numbers and booleans, say times with :func:`time_text` and
    other values with :func:`value_text`, join a list with ``, ``; never a repr."""
    records = []
    for row in rows:
        unknown = sorted(set(row) - set(columns))
        if unknown:
            raise ValueError(f"no column {unknown} in the table's columns {list(columns)}")
        records.append(TableRecord({name: _record_cell(row.get(name)) for name in columns}))
    schema = TableSchema(columns=[TableColumn(name=n, type=t) for n, t in columns.items()])
    return MetadataValue.table(records, schema)


def table_rows(value: object) -> list[dict[str, Any]]:
    """The rows of a :func:`table` value (or of any Dagster table metadata), as dicts."""
    if not isinstance(value, TableMetadataValue):
        raise TypeError(f"not a table metadata value: {type(value).__name__}")
    return [dict(record.data) for record in value.records]


def pairs(columns: Mapping[str, str], values: Mapping[Any, object]) -> MetadataValue:
    """A mapping as a :func:`table` of two columns, one row per entry: ``columns`` names (and
    types) the key's column, then the value's (``{"partition": "string", "watermark":
    "string"}``); rows in the mapping's order."""
    if len(columns) != 2:
        raise ValueError(f"a table of pairs has two columns, not {list(columns)}")
    key, value = columns
    return table(columns, ({key: k, value: x} for k, x in values.items()))


def table_pairs(value: object) -> dict[Any, Any]:
    """The mapping a :func:`pairs` value holds (its first column -> its second)."""
    if not isinstance(value, TableMetadataValue):
        raise TypeError(f"not a table metadata value: {type(value).__name__}")
    key, second = (column.name for column in value.schema.columns)
    return {row[key]: row[second] for row in table_rows(value)}


def _record_cell(value: object) -> str | int | float | bool | None:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(value_text(v) for v in value)
    return value_text(value)


def lines(items: Iterable[str]) -> MetadataValue:
    """One markdown list item per line (``-`` when none)."""
    return MetadataValue.md("\n".join(f"- {item}" for item in items) or "-")
