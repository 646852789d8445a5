"""Every name written to disk, pinned to its literal text (``watermark_assets/names.py``).

A table written by an earlier version holds these names in its Delta log, in the files next to it
and in Dagster's instance: a rename here forgets every existing table's state. So each expected
value below is written out by hand, never computed; a change of a name fails this test and needs
``NAMES_VERSION`` raised and the old names read (``names.py``'s docstring).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from watermark_assets import names
from watermark_assets.core.column.replay import split_range
from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.time import TimeWatermark
from watermark_assets.core.unit.grid import Cell
from watermark_assets.delta.committer import DeltaCommitter, TxnVersion
from watermark_assets.delta.stats import describe_data_files
from watermark_assets.kinds.time.run import WatermarkEntryLog
from watermark_assets.providers.delta_metadata import DeltaMetadataProvider
from watermark_assets.state.store import txn_weight

UTC = timezone.utc
#: a pipeline name with a space and a ``*`` (the configuration refuses both, but the names take
#: any text: a file name quotes them)
P = "orders eu*"
WINDOW = TimeWindow(datetime(2024, 1, 30, 18, tzinfo=UTC), datetime(2024, 1, 30, 19, tzinfo=UTC))
[NUMBER_CHUNK] = split_range("id", 100, 200, 100)
[DAY_CHUNK, _] = split_range("at", datetime(2024, 1, 1), datetime(2024, 1, 3), timedelta(days=1))

PINNED: list[tuple[str, Callable[[], object], str]] = [
    ("NAMES_VERSION", lambda: names.NAMES_VERSION, "1"),
    # txn app ids
    ("TXN_ROOT", lambda: names.TXN_ROOT, "watermark_assets/"),
    ("pipeline_txn_prefix", lambda: names.pipeline_txn_prefix(P), "watermark_assets/orders eu*/"),
    (
        "partition_app_id",
        lambda: names.partition_app_id(P, "2024-01-30"),
        "watermark_assets/orders eu*/2024-01-30",
    ),
    (
        "partition_app_id of a multi-partition key",
        lambda: names.partition_app_id(P, "2024-01-30|eu"),
        "watermark_assets/orders eu*/2024-01-30|eu",
    ),
    (
        "late_app_id",
        lambda: names.late_app_id(P, "2024-01-30"),
        "watermark_assets/orders eu*/late/2024-01-30",
    ),
    (
        "rewrite_app_id",
        lambda: names.rewrite_app_id(P, "date=2024-01-30/a b.ndjson"),
        "watermark_assets/orders eu*/rewrite/date=2024-01-30/a b.ndjson",
    ),
    (
        "quarantine_app_id",
        lambda: names.quarantine_app_id(P),
        "watermark_assets/orders eu*/quarantine",
    ),
    ("column_app_id", lambda: names.column_app_id(P), "watermark_assets/orders eu*/column"),
    (
        "column_quarantine_app_id",
        lambda: names.column_quarantine_app_id(P),
        "watermark_assets/orders eu*/column_quarantine",
    ),
    (
        "replay_app_id of a numeric chunk",
        lambda: names.replay_app_id(P, NUMBER_CHUNK),
        "watermark_assets/orders eu*/replay/100..200",
    ),
    (
        "replay_app_id of a datetime chunk",
        lambda: names.replay_app_id(P, DAY_CHUNK),
        "watermark_assets/orders eu*/replay/2024-01-01T00:00:00..2024-01-02T00:00:00",
    ),
    (
        "window_app_id",
        lambda: names.window_app_id(P, WINDOW),
        "watermark_assets/orders eu*/time/2024-01-30T18:00:00.000Z",
    ),
    ("unit_app_id", lambda: names.unit_app_id(P, "store 7"), "watermark_assets/orders eu*/store 7"),
    (
        "cell_app_id",
        lambda: names.cell_app_id(P, Cell(WINDOW, "store 7")),
        "watermark_assets/orders eu*/store 7/time/2024-01-30T18:00:00.000Z",
    ),
    ("stream_app_id", lambda: names.stream_app_id(P), "watermark_assets/orders eu*/stream"),
    (
        "event_window_app_id",
        lambda: names.event_window_app_id(P),
        "watermark_assets/orders eu*/event_window",
    ),
    # commitInfo keys
    ("FILE_COMMIT_KEY", lambda: names.FILE_COMMIT_KEY, "watermark_assets"),
    ("SCHEMA_HISTORY_KEY", lambda: names.SCHEMA_HISTORY_KEY, "watermark_assets.schemaHistory"),
    ("SCHEMA_INFERRED_KEY", lambda: names.SCHEMA_INFERRED_KEY, "watermark_assets.schemaInferred"),
    ("QUARANTINE_COMMIT_KEY", lambda: names.QUARANTINE_COMMIT_KEY, "watermark_assets_quarantine"),
    ("COLUMN_RUN_KEY", lambda: names.COLUMN_RUN_KEY, "watermark_assets.column_run"),
    ("REPLAY_KEY", lambda: names.REPLAY_KEY, "watermark_assets.replay"),
    ("REPLACE_KEY", lambda: names.REPLACE_KEY, "watermark_assets.replace"),
    ("MERGE_KEY", lambda: names.MERGE_KEY, "watermark_assets.merge"),
    ("UNIT_RUN_KEY", lambda: names.UNIT_RUN_KEY, "watermark_assets.unit_run"),
    ("UNIT_WATERMARK_KEY", lambda: names.UNIT_WATERMARK_KEY, "watermark_assets.unit_watermark"),
    (
        "unit_watermark_key",
        lambda: names.unit_watermark_key(P),
        "watermark_assets.unit_watermark/orders eu*",
    ),
    ("TIME_WATERMARK_PREFIX", lambda: names.TIME_WATERMARK_PREFIX, "watermark_assets.time/"),
    ("time_watermark_key", lambda: names.time_watermark_key(P), "watermark_assets.time/orders eu*"),
    (
        "TIME_UNIT_WATERMARK_PREFIX",
        lambda: names.TIME_UNIT_WATERMARK_PREFIX,
        "watermark_assets.time_unit/",
    ),
    (
        "time_unit_watermark_key",
        lambda: names.time_unit_watermark_key(P),
        "watermark_assets.time_unit/orders eu*",
    ),
    (
        "COLUMN_WATERMARK_PREFIX",
        lambda: names.COLUMN_WATERMARK_PREFIX,
        "watermark_assets.column_watermark/",
    ),
    (
        "column_watermark_key",
        lambda: names.column_watermark_key(P),
        "watermark_assets.column_watermark/orders eu*",
    ),
    (
        "event_stream_key",
        lambda: names.event_stream_key(P),
        "watermark_assets.event_stream/orders eu*",
    ),
    ("event_time_key", lambda: names.event_time_key(P), "watermark_assets.event_time/orders eu*"),
    (
        "event_window_plan_key",
        lambda: names.event_window_plan_key(P),
        "watermark_assets.event_window_plan/orders eu*",
    ),
    (
        "replay_dataflow_id of dates",
        lambda: names.replay_dataflow_id(P, date(2024, 1, 1), date(2024, 2, 1)),
        "orders eu*/replay/2024-01-01..2024-02-01",
    ),
    (
        "replay_dataflow_id of datetimes",
        lambda: names.replay_dataflow_id(P, datetime(2024, 1, 1), datetime(2024, 1, 2, 6)),
        "orders eu*/replay/2024-01-01T00:00:00..2024-01-02T06:00:00",
    ),
    (
        "replay_dataflow_id of numbers",
        lambda: names.replay_dataflow_id(P, 0, 1000),
        "orders eu*/replay/0..1000",
    ),
    # files and folders next to a table
    ("WATERMARKS_DIR", lambda: names.WATERMARKS_DIR, "_watermarks"),
    ("STAGING_DIR", lambda: names.STAGING_DIR, "_staging"),
    ("STATE_FOLDER", lambda: names.STATE_FOLDER, "_watermarks/state"),
    ("SWEEP_MARKER", lambda: names.SWEEP_MARKER, "_watermarks/leftovers_swept"),
    ("LEGACY_EVENT_PROGRESS", lambda: names.LEGACY_EVENT_PROGRESS, "_watermarks/event_window.json"),
    (
        "state_file",
        lambda: names.state_file(names.time_watermark_key(P)),
        "_watermarks/state/watermark_assets.time%2Forders%20eu%2A.json",
    ),
    (
        "checkpoint_file",
        lambda: names.checkpoint_file(P, "landing"),
        "_watermarks/orders eu*_landing_checkpoint.json",
    ),
    ("provider_file", lambda: names.provider_file("a/b c*"), "a%2Fb%20c%2A.json"),
    ("STREAM_CHECKPOINT_SUFFIX", lambda: names.STREAM_CHECKPOINT_SUFFIX, "_checkpoint"),
    ("QUARANTINE_TABLE_SUFFIX", lambda: names.QUARANTINE_TABLE_SUFFIX, "_quarantine"),
    ("quarantine_table", lambda: names.quarantine_table("/d/orders/"), "/d/orders_quarantine"),
    ("LATE_TABLE_SUFFIX", lambda: names.LATE_TABLE_SUFFIX, "_late"),
    ("RESCUED_DATA_COLUMN", lambda: names.RESCUED_DATA_COLUMN, "_rescued_data"),
    ("RESCUED_FILE_KEY", lambda: names.RESCUED_FILE_KEY, "_file"),
    ("RESCUED_SOURCE_KEY", lambda: names.RESCUED_SOURCE_KEY, "_source"),
    ("STATE_TABLE_SUFFIX", lambda: names.STATE_TABLE_SUFFIX, "_state"),
    # table property, Postgres table
    (
        "LEFTOVER_RETENTION_PROPERTY",
        lambda: names.LEFTOVER_RETENTION_PROPERTY,
        "watermark_assets.leftoverRetention",
    ),
    ("POSTGRES_TABLE", lambda: names.POSTGRES_TABLE, "watermark_assets_watermarks"),
    # run tags
    ("PIPELINE_TAG", lambda: names.PIPELINE_TAG, "watermark_assets/pipeline"),
    ("BATCH_TAG", lambda: names.BATCH_TAG, "watermark_assets/batch"),
    ("LATE_TAG", lambda: names.LATE_TAG, "watermark_assets/late"),
    ("TIME_TICK_TAG", lambda: names.TIME_TICK_TAG, "watermark_assets/time_tick"),
    ("UNIT_TICK_TAG", lambda: names.UNIT_TICK_TAG, "watermark_assets/unit_tick"),
    ("EVENT_TIME_TICK_TAG", lambda: names.EVENT_TIME_TICK_TAG, "watermark_assets/event_time_tick"),
    (
        "PIPELINE_PARTITION_TAG",
        lambda: names.PIPELINE_PARTITION_TAG,
        "watermark_assets/pipeline_partition",
    ),
    ("PIPELINE_RANGE_TAG", lambda: names.PIPELINE_RANGE_TAG, "watermark_assets/pipeline_range"),
    # job names
    ("JOB_SUFFIX", lambda: names.JOB_SUFFIX, "_job"),
    ("job_name", lambda: names.job_name(P), "orders eu*_job"),
    # sensors, schedules, dynamic partitions, checks
    ("SENSOR_SUFFIX", lambda: names.SENSOR_SUFFIX, "_sensor"),
    ("sensor_name", lambda: names.sensor_name(P), "orders eu*_sensor"),
    ("units_sensor_name", lambda: names.units_sensor_name(P), "orders eu*_units_sensor"),
    ("schedule_name", lambda: names.schedule_name(P), "orders eu*_schedule"),
    ("units_partitions_name", lambda: names.units_partitions_name(P), "orders eu*_units"),
    ("checks_name", lambda: names.checks_name(P), "orders eu*_checks"),
    # the code location
    ("CODE_LOCATION", lambda: names.CODE_LOCATION, "watermark_assets"),
    ("DEFINITIONS_MODULE", lambda: names.DEFINITIONS_MODULE, "watermark_assets.definitions"),
]


@pytest.mark.parametrize(("name", "build", "expected"), PINNED, ids=[p[0] for p in PINNED])
def test_every_name_on_disk_keeps_its_text(
    name: str, build: Callable[[], object], expected: str
) -> None:
    assert str(build()) == expected


def test_every_public_name_is_pinned() -> None:
    """A name added to names.py without a pinned row here fails (so none escapes the table)."""
    public = {n for n in vars(names) if (not n.startswith("_") and n.isupper()) or _is_builder(n)}
    public -= {"annotations"}
    pinned = {row[0].split(" ")[0] for row in PINNED}
    assert public - pinned == set()


def _is_builder(attribute: str) -> bool:
    value = getattr(names, attribute)
    return (
        callable(value)
        and not attribute.startswith("_")
        and getattr(value, "__module__", None) == names.__name__
    )


def test_a_unit_id_with_a_slash_is_refused_in_its_app_id() -> None:
    with pytest.raises(ValueError, match="/"):
        names.unit_app_id(P, "a/b")


def test_the_old_spellings_are_the_names_module_s() -> None:
    """The module-level names other modules import stay the same objects (aliases)."""
    from watermark_assets.defs import run_tags
    from watermark_assets.kinds.column import replay as column_replay
    from watermark_assets.kinds.time import run as time
    from watermark_assets.kinds.unit import grid_run as time_unit
    from watermark_assets.kinds.unit import run as unit
    from watermark_assets.runs import column, column_quarantine
    from watermark_assets.sources import late_files
    from watermark_assets.state import commit_metadata, store

    assert commit_metadata.txn_app_id is names.partition_app_id
    assert commit_metadata.quarantine_app_id is names.quarantine_app_id
    assert commit_metadata.COMMIT_METADATA_KEY == names.FILE_COMMIT_KEY
    assert store.pipeline_txn_prefix is names.pipeline_txn_prefix
    assert column.txn_app_id is names.column_app_id
    assert column.RUN_METADATA_KEY == names.COLUMN_RUN_KEY
    assert column_quarantine.quarantine_app_id is names.column_quarantine_app_id
    assert column_replay.replay_app_id is names.replay_app_id
    assert time.window_app_id is names.window_app_id
    assert time_unit.cell_app_id is names.cell_app_id
    assert unit.unit_app_id is names.unit_app_id
    assert late_files.late_txn_app_id is names.late_app_id
    assert run_tags.PIPELINE_PARTITION_TAG == names.PIPELINE_PARTITION_TAG


def test_the_configuration_builds_the_same_names(tmp_path: Path) -> None:
    """Names config.py still spells itself (until the config package): equal to names.py's."""
    from conftest import pipeline_yaml

    from watermark_assets.config import PostgresProviderConfig, parse_config

    text = yaml.safe_dump({"pipelines": [pipeline_yaml(tmp_path, name="orders_eu")]})
    [pipeline] = parse_config(text, env={}, base=tmp_path, origin="test").pipelines
    table = f"{tmp_path}/delta/events"
    assert pipeline.checkpoint_uri == f"{table}/" + names.checkpoint_file("orders_eu", "main")
    assert pipeline.table.quarantine == table + names.QUARANTINE_TABLE_SUFFIX
    assert PostgresProviderConfig.model_fields["table"].default == names.POSTGRES_TABLE


def _write_day(table: Path) -> list[object]:
    relative = "day=2024-01-30/part-0.parquet"
    (table / "day=2024-01-30").mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), table / relative)
    return list(describe_data_files(str(table), [relative], ["day"]))


def test_a_table_committed_under_todays_literal_names_is_read_through_names(
    tmp_path: Path,
) -> None:
    """A table whose commits carry the names as earlier versions wrote them (spelled out here,
    not built) is read back by the code that now builds them in names.py: its txns, its
    watermark entries, and its state file at the literal place."""
    table = tmp_path / "orders"
    watermark = TimeWatermark.of({WINDOW.start: datetime(2024, 1, 30, 18, 45, tzinfo=UTC)})
    committed = DeltaCommitter(str(table)).commit(
        _write_day(table),  # type: ignore[arg-type]
        schema=pa.schema([("id", pa.int64()), ("day", pa.string())]),
        partition_by=["day"],
        txns=[
            TxnVersion("watermark_assets/orders eu*/time/2024-01-30T18:00:00.000Z", 1, None),
            TxnVersion("watermark_assets/orders eu*/column", 1, None),
        ],
        custom_metadata={
            "watermark_assets.time/orders eu*": json.dumps(
                {"watermark": watermark.to_json(), "read_version": -1}
            ),
            "watermark_assets.column_watermark/orders eu*": json.dumps(
                {"watermark": '{"id": 2}', "job_id": "j", "dataflow_run_id": "r"}
            ),
        },
    )
    assert committed.version == 0

    committer = DeltaCommitter(str(table))
    assert committer.transaction_version(names.window_app_id(P, WINDOW)) == 1
    assert committer.transaction_version(names.column_app_id(P)) == 1

    log = WatermarkEntryLog(
        str(table),
        names.time_watermark_key(P),
        TimeWatermark.empty(),
        TimeWatermark.from_json,
        pipeline=P,
    )
    assert log.read() == watermark
    state_file = table / "_watermarks" / "state" / "watermark_assets.time%2Forders%20eu%2A.json"
    assert state_file.exists()
    assert log.location == str(state_file)

    provider = DeltaMetadataProvider(str(table), pipeline=P)
    assert provider.get_watermark(P) == '{"id": 2}'

    # the state store sums the versions of every app id under the pipeline's prefix
    prefix = names.pipeline_txn_prefix(P)
    txns = committer.log.read_commit(0).txns
    assert txn_weight({a: v for a, v in txns.items() if a.startswith(prefix)}) == 2
