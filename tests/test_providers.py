"""Watermark providers: one shared suite run against every backend (file on local disk and on
``memory://``, real PostgreSQL on 127.0.0.1:5432, a real Delta table's commit metadata).

Every destination commit here is a real Delta commit made with ``deltalake.write_deltalake``; a
failing one is a real deltalake failure (a schema mismatch), never a mock.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake

from watermark_assets.core.column.watermark import ColumnWatermark
from watermark_assets.core.errors import (
    ColumnMismatchError,
    WatermarkHistoryLostError,
    WatermarkProviderError,
)
from watermark_assets.exceptions import StateHistoryLostError
from watermark_assets.providers import (
    DeltaMetadataProvider,
    FileWatermarkProvider,
    WatermarkManager,
    commit_metadata_entry,
)
from watermark_assets.providers.postgres import PostgresWatermarkProvider

UTC = timezone.utc
T0 = datetime(2026, 4, 3, 9, 15, tzinfo=UTC)
SEED_JSON = '{"updated_at": {"__datetime__": "2026-04-03T09:15:00+00:00"}}'
SEED = {"updated_at": T0}
FROZEN = datetime(2026, 4, 3, 9, 16, 2, tzinfo=UTC)
PG_SERVER = "postgresql://postgres@127.0.0.1:5432"

Commit = Callable[[Mapping[str, str]], int]


def delta_commit(table_uri: str, rows: int = 1) -> Commit:
    """A real destination commit: append ``rows`` rows with the given custom metadata."""

    def commit(entries: Mapping[str, str]) -> int:
        data = pa.table({"id": pa.array(range(rows), pa.int64())})
        write_deltalake(
            table_uri,
            data,
            mode="append",
            commit_properties=CommitProperties(custom_metadata=dict(entries)),
        )
        return DeltaTable(table_uri).version()

    return commit


def failing_delta_commit(table_uri: str) -> Commit:
    """A destination commit that deltalake refuses (the schema does not match the table's)."""

    def commit(entries: Mapping[str, str]) -> int:
        delta_commit(table_uri)({})  # the table exists with id BIGINT
        data = pa.table({"id": pa.array([1], pa.int64()), "unexpected": pa.array(["x"])})
        write_deltalake(
            table_uri,
            data,
            mode="append",
            commit_properties=CommitProperties(custom_metadata=dict(entries)),
        )
        raise AssertionError("deltalake accepted a mismatching schema")

    return commit


def later(seconds: int, id_: int = 0) -> dict[str, Any]:
    return {"updated_at": T0 + timedelta(seconds=seconds), "id": id_}


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A database of its own for this test session, dropped at the end."""
    name = f"wa_providers_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(f"{PG_SERVER}/test", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{PG_SERVER}/{name}"
    finally:
        with psycopg.connect(f"{PG_SERVER}/test", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class ProviderSuite:
    """What every backend guarantees. Subclasses provide ``manager`` and ``table_uri``."""

    @pytest.fixture
    def table_uri(self, tmp_path: Path) -> str:
        return str(tmp_path / "orders")

    def test_nothing_stored_is_read_as_none_and_loads_empty(
        self, manager: WatermarkManager
    ) -> None:
        assert manager.get_watermark("orders") is None
        assert manager.load("orders", ["updated_at"]) == ColumnWatermark.empty(["updated_at"])

    def test_the_seeds_watermark_is_kept_as_text_and_read_back(
        self, manager: WatermarkManager, table_uri: str
    ) -> None:
        manager.commit_then_save(
            "orders", SEED, delta_commit(table_uri), job_id="orders_job", dataflow_run_id="run-1"
        )
        assert manager.provider.get_watermark("orders") == SEED_JSON  # providers never parse
        assert manager.get_watermark("orders") == SEED
        record = manager.get_record("orders")
        assert record is not None
        assert (record.job_id, record.dataflow_run_id) == ("orders_job", "run-1")
        assert record.updated_at is not None and record.updated_at.tzinfo is not None

    def test_a_failed_commit_saves_nothing(self, manager: WatermarkManager, table_uri: str) -> None:
        manager.commit_then_save("orders", later(1), delta_commit(table_uri), job_id="j")
        with pytest.raises(Exception, match=r"(?i)schema"):
            manager.commit_then_save(
                "orders", later(2), failing_delta_commit(table_uri), job_id="j"
            )
        assert manager.get_watermark("orders") == later(1)  # the next run retries from here

    def test_a_failed_first_commit_leaves_the_watermark_empty(
        self, manager: WatermarkManager, table_uri: str
    ) -> None:
        with pytest.raises(Exception, match=r"(?i)schema"):
            manager.commit_then_save(
                "orders", later(2), failing_delta_commit(table_uri), job_id="j"
            )
        assert manager.get_watermark("orders") is None

    def test_an_older_watermark_never_replaces_a_newer_one(
        self, manager: WatermarkManager, table_uri: str
    ) -> None:
        commit = delta_commit(table_uri)
        manager.commit_then_save("orders", later(5, 3), commit, dataflow_run_id="new")
        manager.commit_then_save("orders", later(5, 2), commit, dataflow_run_id="old")
        assert manager.get_watermark("orders") == later(5, 3)
        manager.commit_then_save("orders", later(5, 4), commit, dataflow_run_id="newer")
        assert manager.get_watermark("orders") == later(5, 4)

    def test_dataflows_are_independent(self, manager: WatermarkManager, table_uri: str) -> None:
        commit = delta_commit(table_uri)
        manager.commit_then_save("orders", later(1), commit)
        manager.commit_then_save("orders/eu", later(9), commit)
        assert manager.get_watermark("orders") == later(1)
        assert manager.get_watermark("orders/eu") == later(9)

    def test_changed_columns_are_refused(self, manager: WatermarkManager, table_uri: str) -> None:
        manager.commit_then_save("orders", SEED, delta_commit(table_uri))
        with pytest.raises(ColumnMismatchError):
            manager.load("orders", ["updated_at", "id"])


class SeparateStoreSuite(ProviderSuite):
    """Backends with their own store: saved after the commit, atomically, concurrently monotone."""

    def test_save_watermark_returns_whether_it_stored(self, manager: WatermarkManager) -> None:
        assert manager.save_watermark("orders", later(2), job_id="j", dataflow_run_id="r2")
        assert not manager.save_watermark("orders", later(1), job_id="j", dataflow_run_id="r1")
        assert not manager.save_watermark("orders", later(2), job_id="j", dataflow_run_id="r3")
        record = manager.get_record("orders")
        assert record is not None and record.dataflow_run_id == "r2"

    def test_concurrent_updates_never_go_backwards(self, manager: WatermarkManager) -> None:
        values = [later(s, i) for s in range(6) for i in range(4)]
        random.Random(7).shuffle(values)
        errors: list[BaseException] = []
        start = threading.Barrier(len(values))

        def save(value: dict[str, Any]) -> None:
            start.wait()  # every writer at once: the race the store must make atomic
            try:
                manager.save_watermark("orders", value, job_id="j", dataflow_run_id=str(value))
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=save, args=(v,)) for v in values]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        assert manager.get_watermark("orders") == later(5, 3)


class TestLocalFile(SeparateStoreSuite):
    @pytest.fixture
    def manager(self, tmp_path: Path) -> WatermarkManager:
        return WatermarkManager(
            FileWatermarkProvider(str(tmp_path / "_watermarks"), now=lambda: FROZEN)
        )

    def test_one_file_per_dataflow_with_the_run(
        self, tmp_path: Path, manager: WatermarkManager
    ) -> None:
        manager.save_watermark("orders/eu", SEED, job_id="orders_job", dataflow_run_id="run-1")
        stored = (tmp_path / "_watermarks" / "orders%2Feu.json").read_text()
        assert '"job_id": "orders_job"' in stored and SEED_JSON.replace('"', '\\"') in stored

    def test_a_corrupt_file_is_never_overwritten(
        self, tmp_path: Path, manager: WatermarkManager
    ) -> None:
        path = tmp_path / "_watermarks" / "orders.json"
        path.parent.mkdir(parents=True)
        path.write_text("{half")
        with pytest.raises(WatermarkProviderError, match="not overwritten"):
            manager.save_watermark("orders", SEED)
        assert path.read_text() == "{half"


class TestMemoryFile(ProviderSuite):
    @pytest.fixture
    def manager(self) -> WatermarkManager:
        return WatermarkManager(FileWatermarkProvider(f"memory://wm-{uuid.uuid4().hex}"))


class TestPostgres(SeparateStoreSuite):
    @pytest.fixture
    def manager(self, pg_database: str) -> WatermarkManager:
        table = f"watermarks_{uuid.uuid4().hex[:8]}"
        return WatermarkManager(PostgresWatermarkProvider(pg_database, table=table, schema="wa"))

    def test_the_table_is_created_on_first_use(self, pg_database: str) -> None:
        provider = PostgresWatermarkProvider(pg_database, table="first_use")
        assert provider.get_watermark("orders") is None
        with psycopg.connect(pg_database) as conn:
            columns = conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = 'first_use' ORDER BY ordinal_position"
            ).fetchall()
        assert columns == [
            ("dataflow_id", "text"),
            ("watermark", "text"),
            ("job_id", "text"),
            ("dataflow_run_id", "text"),
            ("updated_at", "timestamp with time zone"),
        ]

    def test_an_unreachable_server_says_so(self) -> None:
        provider = PostgresWatermarkProvider(
            "postgresql://postgres:secret@127.0.0.1:1/none", connect_timeout=2
        )
        with pytest.raises(WatermarkProviderError, match="cannot connect") as caught:
            provider.get_watermark("orders")
        assert "secret" not in str(caught.value)


class TestDeltaMetadata(ProviderSuite):
    @pytest.fixture
    def manager(self, table_uri: str) -> WatermarkManager:
        return WatermarkManager(DeltaMetadataProvider(table_uri))

    def test_the_commit_carries_the_watermark(
        self, manager: WatermarkManager, table_uri: str
    ) -> None:
        version = manager.commit_then_save(
            "orders",
            SEED,
            delta_commit(table_uri, rows=3),
            job_id="orders_job",
            dataflow_run_id="r1",
        )
        info = DeltaTable(table_uri).history(1)[0]
        assert info["version"] == version
        assert (
            info["watermark_assets.column_watermark/orders"]
            == commit_metadata_entry(
                "orders", SEED_JSON, job_id="orders_job", dataflow_run_id="r1"
            )["watermark_assets.column_watermark/orders"]
        )
        record = manager.get_record("orders")
        assert record is not None and record.delta_version == version

    def test_there_is_no_separate_save(self, manager: WatermarkManager) -> None:
        with pytest.raises(WatermarkProviderError, match="commit_then_save"):
            manager.save_watermark("orders", SEED)

    def test_other_commits_in_between_are_skipped(
        self, manager: WatermarkManager, table_uri: str
    ) -> None:
        manager.commit_then_save("orders", SEED, delta_commit(table_uri))
        for _ in range(3):
            delta_commit(table_uri)({"unrelated": "writer"})
        assert manager.get_watermark("orders") == SEED

    def test_a_cleaned_up_log_is_an_error_not_read_everything(
        self, manager: WatermarkManager, table_uri: str
    ) -> None:
        manager.commit_then_save("orders", SEED, delta_commit(table_uri))
        delta_commit(table_uri)({})
        delta_commit(table_uri)({})
        DeltaTable(table_uri).create_checkpoint()
        for version in (0, 1):  # what log clean-up after a checkpoint removes
            (Path(table_uri) / "_delta_log" / f"{version:020d}.json").unlink()
        with pytest.raises(WatermarkHistoryLostError) as caught:
            manager.get_watermark("orders")
        assert caught.value.oldest_version == 2

    def test_commits_cleaned_after_a_read_are_an_error_not_the_older_watermark(
        self, manager: WatermarkManager, table_uri: str
    ) -> None:
        """The caller's commits carry no txn: a checkpoint's (empty) txn sum cannot prove that
        none of the cleaned commits was the dataflow's."""
        manager.commit_then_save("orders", SEED, delta_commit(table_uri))
        assert manager.get_watermark("orders") == SEED  # the state file is written here
        newer = {"updated_at": T0 + timedelta(days=1)}
        manager.commit_then_save("orders", newer, delta_commit(table_uri))
        delta_commit(table_uri)({})
        DeltaTable(table_uri).create_checkpoint()
        for version in (0, 1):
            (Path(table_uri) / "_delta_log" / f"{version:020d}.json").unlink()
        with pytest.raises((WatermarkHistoryLostError, StateHistoryLostError)):
            manager.get_watermark("orders")
