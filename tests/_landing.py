"""Landing-data builders and table readers shared by the Dagster loop and exactly-once tests.

Landing files are gzip NDJSON under ``date=YYYY-MM-DD/hour=HH/`` named ``{unix seconds}-{first id}``
so that names sort chronologically. :class:`Landing` remembers every id it wrote, which is what a
table must hold exactly once after ingestion.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from conftest import event_records, write_ndjson
from deltalake import DeltaTable

UTC = timezone.utc
#: The frozen "now" of the tests: after every landing file below.
FROZEN_NOW = datetime(2024, 1, 31, 12, 0, tzinfo=UTC)
MALFORMED_LINES = ("this line is not JSON", '{"id": "not a number", "event_time": "never"}')


def hour(day: int, at: int) -> datetime:
    """The start of an hour in January 2024 (UTC)."""
    return datetime(2024, 1, day, at, tzinfo=UTC)


@dataclass
class Landing:
    """A landing directory of hourly NDJSON files, and the ids written into it."""

    root: Path
    ids: list[int] = field(default_factory=list)
    next_id: int = 1

    def add(
        self, when: datetime, *, minute: int = 0, rows: int = 3, malformed: Sequence[str] = ()
    ) -> str:
        """Write ``rows`` good records (and the ``malformed`` lines) landed at ``when + minute``;
        return the file's path relative to the landing root."""
        landed = when + timedelta(minutes=minute)
        relative = (
            f"date={when:%Y-%m-%d}/hour={when:%H}/"
            f"{int(landed.timestamp())}-{self.next_id:06d}.ndjson.gz"
        )
        write_ndjson(self.root, relative, [*event_records(self.next_id, rows, when), *malformed])
        self.ids.extend(range(self.next_id, self.next_id + rows))
        self.next_id += rows
        return relative

    def add_bytes(self, when: datetime, content: bytes, *, minute: int = 0) -> str:
        """A landing file named like :meth:`add`'s holding ``content`` as is (e.g. broken gzip)."""
        landed = when + timedelta(minutes=minute)
        relative = (
            f"date={when:%Y-%m-%d}/hour={when:%H}/"
            f"{int(landed.timestamp())}-{self.next_id:06d}.ndjson.gz"
        )
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        self.next_id += 1
        return relative


def name_of(path: str) -> str:
    return path.rsplit("/", 1)[1]


def prefix_of(path: str) -> str:
    return path.rsplit("/", 1)[0]


# --- reading tables back -----------------------------------------------------------------------


def delta_ids(table_uri: str | Path) -> list[int]:
    """Every id in the table's current version (deltalake), sorted, duplicates kept."""
    table = DeltaTable(str(table_uri)).to_pyarrow_table(columns=["id"])
    return sorted(table.column("id").to_pylist())


def polars_ids(table_uri: str | Path) -> list[int]:
    return sorted(pl.read_delta(str(table_uri)).get_column("id").to_list())


def duckdb_ids(table_uri: str | Path) -> list[int]:
    """Ids through DuckDB's Parquet reader over the files of the current Delta version."""
    uris = DeltaTable(str(table_uri)).file_uris()
    rows = duckdb.execute(f"SELECT id FROM read_parquet({uris!r})").fetchall()
    return sorted(row[0] for row in rows)


def table_files(table_uri: str | Path) -> list[str]:
    """The data files of the table's current version, relative to its root, sorted."""
    actions = DeltaTable(str(table_uri)).get_add_actions(flatten=True)
    return sorted(actions.column("path").to_pylist())


def table_version(table_uri: str | Path) -> int:
    return DeltaTable(str(table_uri)).version()


def quarantine_rows(quarantine_uri: str | Path) -> list[dict[str, Any]]:
    rows = (
        DeltaTable(str(quarantine_uri))
        .to_pyarrow_table(columns=["_source_file", "_dagster_partition", "raw_record"])
        .to_pylist()
    )
    return sorted(rows, key=lambda r: (r["_source_file"], r["raw_record"]))


def checkpoint_json(pipeline: Any) -> dict[str, Any]:
    """The pipeline's checkpoint file, parsed (the file a user would open)."""
    return json.loads(Path(pipeline.checkpoint_uri).read_text(encoding="utf-8"))


# --- commit pipelines: Parquet files another writer puts under the table -------------------------

CLICK_SCHEMA = pa.schema([("click_id", pa.int64()), ("page", pa.string())])


@dataclass
class ClickWriter:
    """Writes Parquet files as another writer would: ``date=YYYY-MM-DD/{ts}-{hex}.parquet`` under
    the table root."""

    table_root: Path
    ids: list[int] = field(default_factory=list)
    next_id: int = 1

    def add(self, when: datetime, *, rows: int = 4) -> str:
        relative = f"date={when:%Y-%m-%d}/{int(when.timestamp())}-{self.next_id:08x}.parquet"
        path = self.table_root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        ids = list(range(self.next_id, self.next_id + rows))
        pq.write_table(
            pa.table({"click_id": ids, "page": [f"/p{i}" for i in ids]}, schema=CLICK_SCHEMA), path
        )
        self.ids.extend(ids)
        self.next_id += rows
        return relative


def plan_day(pipeline: Any, key: str, now: datetime, files: Sequence[str] | None = None) -> Any:
    """The batch a run of the daily partition ``key`` plans at ``now`` (``files``: the run
    config's requested files; None: every file above the watermark), without Dagster."""
    from watermark_assets.core.partition_selection import PartitionSelection, TimeWindow
    from watermark_assets.defs.partitions import partition_mapper, partitions_definition
    from watermark_assets.kinds.file_path.plan import BatchRequest, plan_batch

    day = datetime.strptime(key, "%Y-%m-%d").replace(tzinfo=timezone.utc)
    request = BatchRequest(
        pipeline=pipeline,
        selection=PartitionSelection.of_time_window(
            [key], TimeWindow(day, day + timedelta(days=1))
        ),
        run_id="run",
        files=None if files is None else tuple(files),
        clock=lambda: now,
    )
    partition_of = partition_mapper(partitions_definition(pipeline), lambda: now)
    return plan_batch(request, partition_of, now=now)
