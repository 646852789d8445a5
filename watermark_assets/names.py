"""Every name the package writes to disk, in one place (docs/design.md, "Names on disk").

A Delta table written by this package carries names that a later version must read back
byte for byte: the ``txn`` app ids of its commits (the optimistic locks and the proof that a
commit happened), the ``commitInfo`` keys its progress is recorded under, the files it keeps
next to the table (``_watermarks/...``), a table property, and the run tags and job names
Dagster's instance keeps and the sensors read back. Renaming any of them silently forgets the
state of every existing table. So each name is built here and nowhere else
(``tests/test_layers.py`` refuses the ``watermark_assets`` prefixes anywhere else), and
``tests/test_names.py`` pins every one to the literal text it has on disk.

:data:`NAMES_VERSION` is the version of this set of names. Version 1 is the set as the tables
written before this module hold it. A change of any name raises it, and the readers then read the
old names as well (a table is migrated on its first write, as the state store does for its files).

Pure: the standard library and ``watermark_assets.core`` only.
"""

from __future__ import annotations

from datetime import date, datetime
from urllib.parse import quote

from watermark_assets.core.column.replay import ReplayChunk
from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.time.instant import format_instant
from watermark_assets.core.unit.grid import Cell
from watermark_assets.core.unit.units import check_unit_id

#: The version of the names below (module docstring); 1: the names as every table holds them.
NAMES_VERSION = 1

# --- txn app ids (Delta ``txn`` actions; read back by the committers and the state store) ---

#: The prefix of every txn app id this package writes (``watermark_assets/{pipeline}/...``).
TXN_ROOT = "watermark_assets/"


def pipeline_txn_prefix(pipeline: str) -> str:
    """Prefix of every txn app id of ``pipeline``'s commits; the state store sums their versions."""
    return f"{TXN_ROOT}{pipeline}/"


def partition_app_id(pipeline: str, partition_key: str) -> str:
    """Txn of one Dagster partition of a file-path pipeline; read by its runs and its state."""
    return f"{pipeline_txn_prefix(pipeline)}{partition_key}"


def late_app_id(pipeline: str, partition_key: str) -> str:
    """Txn of a file-path partition's late-file commits; read by the late runs."""
    return f"{TXN_ROOT}{pipeline}/late/{partition_key}"


def rewrite_app_id(pipeline: str, path: str) -> str:
    """Txn of the rewrite commits of one landing file; read by ``kinds/file_path/rewrite.py``."""
    return f"{pipeline_txn_prefix(pipeline)}rewrite/{path}"


def quarantine_app_id(pipeline: str) -> str:
    """Txn on a file-path quarantine table: the data version it completed; read by the state."""
    return f"{TXN_ROOT}{pipeline}/quarantine"


def column_app_id(pipeline: str) -> str:
    """Txn of a column pipeline's commits (one per pipeline); read by ``runs/column.py``."""
    return f"{TXN_ROOT}{pipeline}/column"


def column_quarantine_app_id(pipeline: str) -> str:
    """Txn of a column pipeline's quarantine commits; read by ``runs/column_quarantine.py``."""
    return f"{TXN_ROOT}{pipeline}/column_quarantine"


def replay_app_id(pipeline: str, chunk: ReplayChunk) -> str:
    """Txn of one replay chunk (``lower..upper``); read by ``kinds/column/replay.py``."""
    return f"{TXN_ROOT}{pipeline}/replay/{chunk.key}"


def window_app_id(pipeline: str, window: TimeWindow) -> str:
    """Txn of one time window (by its start); read by ``kinds/time/run.py`` and the state store."""
    return f"{TXN_ROOT}{pipeline}/time/{format_instant(window.start)}"


def unit_app_id(pipeline: str, unit: str) -> str:
    """Txn of one unit (ids never hold ``/``: checked); read by ``kinds/unit/run.py``."""
    return f"{TXN_ROOT}{pipeline}/{check_unit_id(unit)}"


def cell_app_id(pipeline: str, cell: Cell) -> str:
    """Txn of one time x unit cell; read by ``kinds/unit/grid_run.py`` and the state store."""
    unit = check_unit_id(cell.unit)
    return f"{TXN_ROOT}{pipeline}/{unit}/time/{format_instant(cell.window.start)}"


def stream_app_id(pipeline: str) -> str:
    """Txn of an event-time stream's micro-batches; read by ``kinds/event_time/stream.py``."""
    return f"{TXN_ROOT}{pipeline}/stream"


def event_window_app_id(pipeline: str) -> str:
    """Txn of an event-time batch's commits; read by ``kinds/event_time/window.py`` and its
    progress."""
    return f"{TXN_ROOT}{pipeline}/event_window"


# --- commitInfo keys (Delta ``commitInfo`` custom metadata; read back by the state folds) ---

#: commitInfo key of a file-path commit's record; read by the state, ``explain`` and the checks.
FILE_COMMIT_KEY = "watermark_assets"
#: commitInfo key of a file-path quarantine commit; written by ``kinds/file_path/commit.py`` and
#: ``runs/column_quarantine.py``.
QUARANTINE_COMMIT_KEY = "watermark_assets_quarantine"
#: commitInfo key of every column-pipeline commit's run record; read by the checks and the UI.
COLUMN_RUN_KEY = "watermark_assets.column_run"
#: commitInfo key of a replay chunk commit; read by ``kinds/column/replay.py`` and its tests.
REPLAY_KEY = "watermark_assets.replay"
#: commitInfo key of a replace commit (``delta/replace.py``); read by the windowed runs.
REPLACE_KEY = "watermark_assets.replace"
#: commitInfo key of a merge commit (``delta/merge.py``); read by its tests and the UI.
MERGE_KEY = "watermark_assets.merge"
#: commitInfo key of a unit's commit (the unit, its done-at); read by ``kinds/unit/defs.py``.
UNIT_RUN_KEY = "watermark_assets.unit_run"
#: commitInfo key prefix of a unit pipeline's watermark (+ ``/{pipeline}``).
UNIT_WATERMARK_KEY = "watermark_assets.unit_watermark"
#: commitInfo key prefix of a time pipeline's watermark (+ the pipeline name).
TIME_WATERMARK_PREFIX = "watermark_assets.time/"
#: commitInfo key prefix of a time x unit pipeline's watermark (+ the pipeline name).
TIME_UNIT_WATERMARK_PREFIX = "watermark_assets.time_unit/"
#: commitInfo key prefix of a column dataflow's watermark (Delta metadata provider; + its id).
COLUMN_WATERMARK_PREFIX = "watermark_assets.column_watermark/"


def unit_watermark_key(pipeline: str) -> str:
    """commitInfo key of a unit pipeline's watermark; read by ``kinds/unit/run.py``'s state log."""
    return f"{UNIT_WATERMARK_KEY}/{pipeline}"


def time_watermark_key(pipeline: str) -> str:
    """commitInfo key of a time pipeline's watermark; read by ``kinds/time/run.py``'s state log."""
    return TIME_WATERMARK_PREFIX + pipeline


def time_unit_watermark_key(pipeline: str) -> str:
    """commitInfo key of a time x unit pipeline's grid; read by ``kinds/unit/grid_run.py``."""
    return TIME_UNIT_WATERMARK_PREFIX + pipeline


def column_watermark_key(dataflow_id: str) -> str:
    """commitInfo key of a dataflow's watermark; read by ``providers/delta_metadata.py``."""
    return COLUMN_WATERMARK_PREFIX + dataflow_id


def event_stream_key(pipeline: str) -> str:
    """commitInfo key of an event-time stream's batch record; read by
    ``kinds/event_time/stream.py``."""
    return f"watermark_assets.event_stream/{pipeline}"


def event_time_key(pipeline: str) -> str:
    """commitInfo key (and state key) of an event-time progress; read by
    ``kinds/event_time/progress``."""
    return f"watermark_assets.event_time/{pipeline}"


def event_window_plan_key(pipeline: str) -> str:
    """commitInfo key of an event-time batch's plan; read by ``kinds/event_time/window.py``."""
    return f"watermark_assets.event_window_plan/{pipeline}"


def replay_dataflow_id(pipeline: str, start: object, end: object) -> str:
    """Dataflow id a replay range saves its chunks' bounds under (``save_watermark: true``)."""
    return f"{pipeline}/replay/{_bound_text(start)}..{_bound_text(end)}"


def _bound_text(value: object) -> str:
    return value.isoformat() if isinstance(value, (datetime, date)) else str(value)


# --- files and folders next to a table (relative to the table's URI) ---

#: Folder of the package's own files under a table (checkpoints, state, markers); Delta skips it.
WATERMARKS_DIR = "_watermarks"
#: Folder of a run's staged Parquet files under a table; swept by ``staging.py``.
STAGING_DIR = "_staging"
#: Folder of the state store's files; read by ``state/store.py``.
STATE_FOLDER = f"{WATERMARKS_DIR}/state"
#: Marker file of the last leftover sweep; read by ``staging.py``.
SWEEP_MARKER = f"{WATERMARKS_DIR}/leftovers_swept"
#: Progress file of earlier event-time versions (read, never written);
#: ``kinds/event_time/progress.py``.
LEGACY_EVENT_PROGRESS = f"{WATERMARKS_DIR}/event_window.json"


def state_file(key: str) -> str:
    """State store file of state ``key`` (quoted: one file name); read by ``state/store.py``."""
    return f"{STATE_FOLDER}/{quote(key, safe='')}.json"


def checkpoint_file(pipeline: str, source: str) -> str:
    """File-path checkpoint in the seed's name; read by ``state/load.py`` (config's URI)."""
    return f"{WATERMARKS_DIR}/{pipeline}_{source}_checkpoint.json"


def provider_file(dataflow_id: str) -> str:
    """File provider's file of one dataflow (quoted: one file name); ``providers/file.py``."""
    return quote(dataflow_id, safe="") + ".json"


#: Suffix of an event-time stream's Spark checkpoint folder (next to its output table).
STREAM_CHECKPOINT_SUFFIX = "_checkpoint"
#: Suffix of a table's default quarantine table (next to it).
QUARANTINE_TABLE_SUFFIX = "_quarantine"
#: Suffix of an event-time output's default late table (next to it).
LATE_TABLE_SUFFIX = "_late"
#: Suffix of an event-time output's default state table (next to it).
STATE_TABLE_SUFFIX = "_state"


def quarantine_table(table_uri: str) -> str:
    """A table's default quarantine table: its URI + ``_quarantine`` (next to it)."""
    return table_uri.rstrip("/") + QUARANTINE_TABLE_SUFFIX


# --- columns of a table ---

#: The column a pipeline with ``schema.mode: rescue`` keeps what its schema could not hold in: a
#: JSON object per row, ``{"column": "raw value", ..., "_source": "<origin>"}`` (NULL: nothing).
RESCUED_DATA_COLUMN = "_rescued_data"
#: The key of :data:`RESCUED_DATA_COLUMN`'s object naming where the row came from, in every
#: pipeline: a file pipeline's source file, a column source's location (a Delta table, a JDBC
#: table, an API URL, a folder).
RESCUED_SOURCE_KEY = "_source"
#: The key file pipelines wrote for the source file before it was :data:`RESCUED_SOURCE_KEY`:
#: rows rescued then still hold it (nothing here reads it back; a reader of ``_rescued_data``
#: takes either).
RESCUED_FILE_KEY = "_file"

# --- table properties (Delta table configuration; read by the package) ---

#: Table property overriding how long a crashed run's leftovers are kept; read by ``staging.py``.
LEFTOVER_RETENTION_PROPERTY = "watermark_assets.leftoverRetention"

# --- Delta column metadata (in the table's schema: kept by every checkpoint, never cleaned) ---

#: Column metadata key of a column's schema history (JSON list: added or widened, in which
#: version, from which file); written by ``delta/schema_change.py`` in the evolving commit.
SCHEMA_HISTORY_KEY = "watermark_assets.schemaHistory"

#: Column metadata key of a column whose type the first run inferred (``schema.infer``): JSON
#: ``{"type", "hinted", "origin"}`` (``origin``: the sampled files); written by the commit that
#: creates the table (``kinds/file_path/commit.py``), so it lives as long as the table's schema.
SCHEMA_INFERRED_KEY = "watermark_assets.schemaInferred"

# --- Postgres provider ---

#: Default table of the Postgres provider's watermarks; read by ``providers/postgres.py``.
POSTGRES_TABLE = "watermark_assets_watermarks"

# --- run tags (kept by Dagster's instance; read back by the sensors and ``defs/run_tags.py``) ---

#: Run tag naming a run's pipeline; read back by ``defs/run_tags.py``.
PIPELINE_TAG = "watermark_assets/pipeline"
#: Run tag of a file-path batch (its run key without the attempt); failed attempts count by it.
BATCH_TAG = "watermark_assets/batch"
#: Run tag of a late-file run; read by the file sensors.
LATE_TAG = "watermark_assets/late"
#: Run tag of a time (and time x unit) tick; failed attempts are counted by it.
TIME_TICK_TAG = "watermark_assets/time_tick"
#: Run tag of a unit tick; failed attempts are counted by it.
UNIT_TICK_TAG = "watermark_assets/unit_tick"
#: Run tag of an event-time tick; failed attempts are counted by it.
EVENT_TIME_TICK_TAG = "watermark_assets/event_time_tick"
#: Run tag ``<pipeline>|<partition>``: run queue limits name it (``docs/dagster-postgres.yaml``).
PIPELINE_PARTITION_TAG = "watermark_assets/pipeline_partition"
#: Run tag of a pipeline's ranged run; read by ``defs/run_tags.py``.
PIPELINE_RANGE_TAG = "watermark_assets/pipeline_range"

# --- job names (Dagster's instance keeps every run under its job's name) ---

#: Suffix of a pipeline's job name: the sensors count a job's failed runs by it and
#: ``defs/run_tags.py`` reads the pipeline back from a run's job.
JOB_SUFFIX = "_job"


def job_name(pipeline: str) -> str:
    """A pipeline's job, ``{pipeline}_job``; read back by ``defs/run_tags.py``."""
    return f"{pipeline}{JOB_SUFFIX}"


# --- sensors, schedules and dynamic partitions (Dagster's instance keeps state under these) ---

#: Suffix of a pipeline's sensor: Dagster keeps its cursor (the watermark listing's resume
#: point, the due windows) and its ticks under the sensor's name.
SENSOR_SUFFIX = "_sensor"


def sensor_name(pipeline: str) -> str:
    """A pipeline's sensor, ``{pipeline}_sensor``: its cursor and ticks are kept under it."""
    return f"{pipeline}{SENSOR_SUFFIX}"


def units_sensor_name(pipeline: str) -> str:
    """A unit pipeline's sensor that adds the ids of its secondary input as partitions,
    ``{pipeline}_units_sensor``: its cursor and ticks are kept under it."""
    return f"{units_partitions_name(pipeline)}{SENSOR_SUFFIX}"


def schedule_name(pipeline: str) -> str:
    """A time pipeline's schedule, ``{pipeline}_schedule``: its ticks are kept under it."""
    return f"{pipeline}_schedule"


def units_partitions_name(pipeline: str) -> str:
    """A unit pipeline's dynamic partitions, ``{pipeline}_units``: Dagster's instance keeps
    every added unit id under this name (renamed, the partitions are gone)."""
    return f"{pipeline}_units"


def checks_name(pipeline: str) -> str:
    """The op of a pipeline's asset checks, ``{pipeline}_checks``: its runs' steps and check
    evaluations are kept under it."""
    return f"{pipeline}_checks"


# --- the code location (Dagster's instance keeps a sensor's ticks under its selector) ---

#: The code location's name (workspace.yaml, [tool.dg.project] code_location_name): a headless
#: pass records its sensors' ticks under it (``defs/headless_ticks.py``), where the UI reads them.
CODE_LOCATION = "watermark_assets"
#: The module the code location loads (workspace.yaml): in a recorded tick's origin.
DEFINITIONS_MODULE = "watermark_assets.definitions"
