"""The PostgreSQL provider: one row per dataflow in a table created on first use.

::

    CREATE TABLE IF NOT EXISTS watermark_assets_watermarks (
        dataflow_id      text PRIMARY KEY,
        watermark        text NOT NULL,
        job_id           text,
        dataflow_run_id  text,
        updated_at       timestamptz NOT NULL
    )

``watermark`` is ``text``, not ``jsonb``: jsonb reorders object keys, and the key order of a
column watermark is its comparison order. The provider stores the manager's text untouched.

**Never backwards.** An update with ``keep`` runs in ONE transaction: ``INSERT ... ON CONFLICT DO
NOTHING`` (a first watermark is simply inserted; a concurrent first insert waits for the other
and then finds its row), else ``SELECT ... FOR UPDATE`` locks the row, ``keep(existing)`` decides,
and the ``UPDATE`` happens under the lock. Concurrent updates of one dataflow are serialised by the
row lock, so the greatest watermark wins whatever the order of the commits. (The order itself is
decided by the manager in Python: the sentinel JSON has no SQL ordering.)

Driver: psycopg 3. ``conninfo`` is a libpq connection string or URI
(``postgresql://postgres@127.0.0.1:5432/test``).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import errors, sql

from watermark_assets import names
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.core.errors import WatermarkProviderError
from watermark_assets.providers.base import Keep, WatermarkRecord

DEFAULT_TABLE = names.POSTGRES_TABLE


class PostgresWatermarkProvider:
    """Watermarks as rows of ``schema.table`` in the database at ``conninfo``."""

    name = "postgres"

    def __init__(
        self,
        conninfo: str,
        *,
        table: str = DEFAULT_TABLE,
        schema: str | None = None,
        now: Clock = system_clock,
        connect_timeout: int = 10,
    ) -> None:
        self.conninfo = conninfo
        self.table = table
        self.schema = schema
        self._now = now
        self._connect_timeout = connect_timeout
        self._table_ready = False
        self._ident = sql.Identifier(schema, table) if schema else sql.Identifier(table)

    def get_watermark(self, dataflow_id: str) -> str | None:
        record = self.get_record(dataflow_id)
        return None if record is None else record.watermark

    def get_record(self, dataflow_id: str) -> WatermarkRecord | None:
        query = sql.SQL(
            "SELECT watermark, job_id, dataflow_run_id, updated_at FROM {} WHERE dataflow_id = %s"
        ).format(self._ident)
        with self._connect() as conn:
            row = conn.execute(query, (dataflow_id,)).fetchone()
        if row is None:
            return None
        return WatermarkRecord(
            dataflow_id=dataflow_id,
            watermark=row[0],
            job_id=row[1],
            dataflow_run_id=row[2],
            updated_at=row[3],
        )

    def update_watermark(
        self,
        dataflow_id: str,
        watermark_value: str,
        *,
        job_id: str | None,
        dataflow_run_id: str | None,
        keep: Keep | None = None,
    ) -> bool:
        values: dict[str, Any] = {
            "id": dataflow_id,
            "wm": watermark_value,
            "job": job_id,
            "run": dataflow_run_id,
            "at": self._now(),
        }
        insert = sql.SQL(
            "INSERT INTO {} (dataflow_id, watermark, job_id, dataflow_run_id, updated_at) "
            "VALUES (%(id)s, %(wm)s, %(job)s, %(run)s, %(at)s) "
            "ON CONFLICT (dataflow_id) DO NOTHING RETURNING dataflow_id"
        ).format(self._ident)
        lock = sql.SQL("SELECT watermark FROM {} WHERE dataflow_id = %(id)s FOR UPDATE").format(
            self._ident
        )
        update = sql.SQL(
            "UPDATE {} SET watermark = %(wm)s, job_id = %(job)s, dataflow_run_id = %(run)s, "
            "updated_at = %(at)s WHERE dataflow_id = %(id)s"
        ).format(self._ident)
        with self._connect() as conn, conn.transaction():
            if conn.execute(insert, values).fetchone() is not None:
                return True
            row = conn.execute(lock, values).fetchone()
            assert row is not None  # the insert conflicted: the row exists and rows are not deleted
            if keep is not None and keep(row[0]):
                return False
            conn.execute(update, values)
            return True

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(self.conninfo, connect_timeout=self._connect_timeout)
        except psycopg.OperationalError as exc:
            raise WatermarkProviderError(
                f"cannot connect to PostgreSQL at {_redacted(self.conninfo)!r} ({exc}). Start the "
                "server, or fix the provider's conninfo",
                provider=self.name,
            ) from exc
        if not self._table_ready:
            self._create_table(conn)
        return conn

    def _create_table(self, conn: psycopg.Connection[Any]) -> None:
        # "IF NOT EXISTS" is not race-free: two first uses at once can both pass the check, and
        # the loser fails on the table's row type (DuplicateObject) or its catalog row
        # (UniqueViolation). A transaction-scoped advisory lock on the table's name serialises
        # the creators, so the second one sees the first one's committed table. The except
        # clause stays for another tool (not taking our lock) creating it at the same instant.
        qualified = f"{self.schema}.{self.table}" if self.schema else self.table
        lock = sql.SQL("SELECT pg_advisory_xact_lock(hashtext(%s))")
        statements: list[sql.Composed] = []
        if self.schema:
            statements.append(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
            )
        statements.append(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                "dataflow_id text PRIMARY KEY, watermark text NOT NULL, job_id text, "
                "dataflow_run_id text, updated_at timestamptz NOT NULL)"
            ).format(self._ident)
        )
        try:
            with conn.transaction():
                conn.execute(lock, (f"watermark_assets:{qualified}",))
                for statement in statements:
                    conn.execute(statement)
        except (
            errors.UniqueViolation,
            errors.DuplicateTable,
            errors.DuplicateSchema,
            errors.DuplicateObject,
        ):
            pass  # created at the same instant by a process outside the advisory lock
        self._table_ready = True


def _redacted(conninfo: str) -> str:
    """``conninfo`` without a password (it ends up in error messages)."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "<unparsable conninfo>"
    if "password" in params:
        params["password"] = "***"
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items()})
