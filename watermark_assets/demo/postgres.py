"""The demo's PostgreSQL source: database ``watermark_assets_demo``, table ``customers``.

The demo connects with psycopg to ``postgresql://postgres@127.0.0.1:5432/postgres`` (or the libpq
URI in ``WATERMARK_ASSETS_DEMO_POSTGRES``), creates the database and the table when they are
missing, and fills the table once. The ``customers_pg`` pipeline reads it through Spark JDBC at
``WATERMARK_ASSETS_DEMO_JDBC_URL`` (default: the same server); when only
``WATERMARK_ASSETS_DEMO_POSTGRES`` is set, :func:`jdbc_url_for` derives that URL from it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, MutableMapping
from datetime import timedelta
from urllib.parse import quote

from watermark_assets.demo.data import DEMO_START

POSTGRES_ENV_VAR = "WATERMARK_ASSETS_DEMO_POSTGRES"
JDBC_URL_ENV_VAR = "WATERMARK_ASSETS_DEMO_JDBC_URL"
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
DEMO_DATABASE = "watermark_assets_demo"
CUSTOMERS = 2000
COUNTRIES = ("DE", "FR", "NL", "PL", "SE", "ES")


def admin_conninfo(env: Mapping[str, str]) -> str:
    """The server the demo creates its database on."""
    return env.get(POSTGRES_ENV_VAR) or DEFAULT_POSTGRES


def jdbc_url_for(conninfo: str) -> str:
    """The JDBC URL of the demo database on the server of ``conninfo`` (user and password as
    URL parameters; the pipeline's metadata masks the password)."""
    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(conninfo)
    host = str(parts.get("host") or "127.0.0.1")
    port = str(parts.get("port") or "5432")
    params = [f"{key}={quote(str(parts[key]))}" for key in ("user", "password") if parts.get(key)]
    query = "?" + "&".join(params) if params else ""
    return f"jdbc:postgresql://{host}:{port}/{DEMO_DATABASE}{query}"


def export_jdbc_url(env: MutableMapping[str, str]) -> None:
    """Point the pipeline at the server named by WATERMARK_ASSETS_DEMO_POSTGRES, unless its JDBC
    URL is set itself."""
    if env.get(POSTGRES_ENV_VAR) and not env.get(JDBC_URL_ENV_VAR):
        env[JDBC_URL_ENV_VAR] = jdbc_url_for(env[POSTGRES_ENV_VAR])


def _on_database(conninfo: str, database: str) -> str:
    from psycopg.conninfo import make_conninfo

    return make_conninfo(conninfo, dbname=database)


def prepare_customers(conninfo: str, *, timeout_seconds: int = 3) -> str:
    """Create the demo database and its ``customers`` table when missing and fill it once.
    Raises ``psycopg.OperationalError`` when no server answers. Returns what was done."""
    import psycopg

    with psycopg.connect(conninfo, autocommit=True, connect_timeout=timeout_seconds) as admin:
        exists = admin.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (DEMO_DATABASE,)
        ).fetchone()
        if exists is None:
            admin.execute(f'CREATE DATABASE "{DEMO_DATABASE}"')
    target = _on_database(conninfo, DEMO_DATABASE)
    with psycopg.connect(target, autocommit=True, connect_timeout=timeout_seconds) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS customers (id bigint PRIMARY KEY, name text NOT NULL, "
            "country text NOT NULL, updated_at timestamptz NOT NULL)"
        )
        row = conn.execute("SELECT count(*) FROM customers").fetchone()
        if row is not None and row[0]:
            return f"table customers in database {DEMO_DATABASE} already has {row[0]} rows"
        rng = random.Random(17)
        with conn.cursor().copy(
            "COPY customers (id, name, country, updated_at) FROM STDIN"
        ) as copy:
            for number in range(CUSTOMERS):
                moment = DEMO_START + timedelta(seconds=rng.randrange(3 * 86_400))
                copy.write_row((number, f"customer {number}", rng.choice(COUNTRIES), moment))
    return f"created table customers in database {DEMO_DATABASE} with {CUSTOMERS} rows"


def update_customers(conninfo: str, *, fraction: float = 0.01) -> int:
    """Move ``fraction`` of the customers to another country, ``updated_at`` an hour after the
    newest one; returns the number of rows changed."""
    import psycopg

    target = _on_database(conninfo, DEMO_DATABASE)
    with psycopg.connect(target, autocommit=True, connect_timeout=3) as conn:
        cursor = conn.execute(
            "UPDATE customers SET country = 'IT', updated_at = "
            "(SELECT max(updated_at) FROM customers) + interval '1 hour' "
            "WHERE id IN (SELECT id FROM customers ORDER BY random() LIMIT "
            "(SELECT greatest(1, round(count(*) * %s)) FROM customers))",
            (fraction,),
        )
        return cursor.rowcount
