"""PostgreSQL through Spark JDBC: the watermark's WHERE clause runs in the database.

The predicate is rendered once, as PostgreSQL text (:func:`to_sql` with
:attr:`SqlDialect.POSTGRES`), into the relation Spark reads::

    (SELECT * FROM "public"."orders" WHERE ("updated_at" > TIMESTAMPTZ '...') OR (...)) AS src

A subquery, not ``dbtable`` + ``DataFrame.where``: Spark's filter push-down would re-render our
expression in its own way (and may keep part of it in Spark), while the subquery is the exact
text the server receives and a test can read back from ``pg_stat_activity``.

**Parallel reads.** With ``num_partitions > 1`` the leading watermark column is Spark's
``partitionColumn``; its bounds come from one cheap query over the same predicate
(``SELECT min(c), max(c) FROM (...) AS src``, through the same JDBC connection settings). Spark
splits ``[lower, upper]`` into strides; the first stride also takes NULLs and values below, the
last everything above, so every row is read exactly once whatever the bounds. Partitioning needs
a numeric, date or timestamp leading column; otherwise the read is one partition and
``details["partitioning"]`` says why.

**The driver jar.** Spark needs the PostgreSQL JDBC driver on its classpath *when the session
starts*. On Debian/Ubuntu: ``apt-get install libpostgresql-jdbc-java`` (``make jdbc`` does it)
and, in the pipeline configuration::

    spark:
      conf:
        spark.jars: /usr/share/java/postgresql.jar

Elsewhere, from Maven: ``spark.jars.packages: org.postgresql:postgresql:42.7.4`` (any 42.x).
Under Spark Connect the reads run in the server, so the jar goes on *its* command line
(``spark-submit ... --jars /usr/share/java/postgresql.jar``); the client adds nothing. Without it
a read raises :class:`~watermark_assets.exceptions.JdbcDriverMissingError`, whose fix names the
classpath that lacks it (the session's or the server's).

**String watermark columns** must sort in the server as the watermark sorts them (by code
point): give them a byte-order collation (``text COLLATE "C"``). Under a linguistic collation
(``en_US.UTF-8``) ``'a' > 'O'`` in the server but not in the watermark, and a run could skip or
re-read rows.

Credentials are never part of the configuration: ``user_env`` / ``password_env`` name environment
variables, read at :meth:`JdbcSource.read` from the injected ``env`` (``os.environ`` by default).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from watermark_assets.config.sources import JdbcSourceConfig
from watermark_assets.core.column.predicate import (
    Predicate,
    SqlDialect,
    quote_identifier,
    to_sql,
)
from watermark_assets.exceptions import ConfigError, JdbcDriverMissingError
from watermark_assets.sources.column import ColumnRead, check_predicate_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameReader, SparkSession

#: Where Debian's ``libpostgresql-jdbc-java`` puts the driver.
DEBIAN_POSTGRES_JDBC_JAR = "/usr/share/java/postgresql.jar"
#: The driver on Maven Central, for ``spark.jars.packages`` (any 42.x works).
POSTGRES_MAVEN_COORDINATE = "org.postgresql:postgresql:42.7.4"
POSTGRES_DRIVER = "org.postgresql.Driver"

_JAR_HINT = (
    f"set spark.conf 'spark.jars: {DEBIAN_POSTGRES_JDBC_JAR}' (Debian: apt-get install "
    f"libpostgresql-jdbc-java, or `make jdbc`), or 'spark.jars.packages: "
    f"{POSTGRES_MAVEN_COORDINATE}' where Maven Central is reachable; the session must be created "
    "with it"
)
#: Under Spark Connect the plans run in the server: its classpath needs the driver.
_SERVER_JAR_HINT = (
    "under Spark Connect that is the server's: start it with `--jars "
    f"{DEBIAN_POSTGRES_JDBC_JAR}` (Debian: apt-get install libpostgresql-jdbc-java), or "
    f"`--packages {POSTGRES_MAVEN_COORDINATE}` where Maven Central is reachable; a client "
    "cannot add jars to a running server"
)


def postgres_jdbc_jar(path: str = DEBIAN_POSTGRES_JDBC_JAR) -> str | None:
    """``path`` when the driver jar is there (for ``spark.jars``), else None."""
    return path if os.path.isfile(path) else None


#: Spark settings that can put a JDBC driver on the classpath.
_CLASSPATH_KEYS = ("spark.jars", "spark.jars.packages", "spark.driver.extraClassPath")


def has_postgres_driver(conf: Mapping[str, str]) -> bool:
    """Whether ``conf`` already names a PostgreSQL driver jar or Maven package."""
    return any("postgresql" in conf.get(key, "").lower() for key in _CLASSPATH_KEYS)


def with_postgres_driver(conf: Mapping[str, str], jar: str | None = None) -> dict[str, str]:
    """``conf`` with the PostgreSQL driver added to ``spark.jars`` for a project that reads
    through JDBC: ``jar`` (default: :func:`postgres_jdbc_jar`, Debian's jar when installed)
    unless ``conf`` already names a driver or is a Spark Connect client's (``spark.remote``).
    Without a jar ``conf`` is returned as it is, and a JDBC read raises
    :class:`JdbcDriverMissingError`, which says how to install one."""
    merged = dict(conf)
    if has_postgres_driver(merged) or "spark.remote" in merged:
        # under Spark Connect the driver must be on the server's classpath (spark-submit --jars)
        return merged
    jar = jar or postgres_jdbc_jar()
    if jar is None:
        return merged
    jars = merged.get("spark.jars", "").strip()
    merged["spark.jars"] = f"{jars},{jar}" if jars else jar
    return merged


@dataclass(frozen=True, kw_only=True)
class JdbcSource:
    """Rows of a PostgreSQL ``table`` (or the result of ``query``) above a column watermark."""

    name: str
    #: ``jdbc:postgresql://host:port/database`` (no password here: use ``password_env``)
    url: str
    #: the table to read (quoted as given: case and special characters are kept) ...
    table: str | None = None
    #: ... in this schema (None: the connection's search_path)
    schema: str | None = None
    #: ... or a SELECT whose result is read (exactly one of ``table`` and ``query``)
    query: str | None = None
    #: the watermark columns, in comparison order (the predicate's columns)
    watermark_columns: tuple[str, ...]
    #: environment variable holding the user name (None: the URL's or the driver's default)
    user_env: str | None = None
    #: environment variable holding the password
    password_env: str | None = None
    #: parallel JDBC reads, partitioned on the leading watermark column (1: one connection)
    num_partitions: int = 1
    #: rows per round trip (the driver's default, 0, would fetch the whole result at once)
    fetchsize: int = 10_000
    driver: str = POSTGRES_DRIVER
    #: where ``user_env`` / ``password_env`` are looked up (None: ``os.environ``)
    env: Mapping[str, str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "watermark_columns", tuple(self.watermark_columns))
        if (self.table is None) == (self.query is None):
            raise ConfigError(
                f"JDBC source {self.name!r} needs exactly one of 'table' and 'query'",
                pipeline=self.name,
                key="table",
                value={"table": self.table, "query": self.query},
            )
        if not self.watermark_columns:
            raise ConfigError(
                f"JDBC source {self.name!r} has no watermark columns; name at least one",
                pipeline=self.name,
                key="watermark_columns",
            )
        if self.num_partitions < 1 or self.fetchsize < 0:
            raise ConfigError(
                f"JDBC source {self.name!r}: num_partitions must be >= 1 and fetchsize >= 0 "
                f"(got {self.num_partitions}, {self.fetchsize})",
                pipeline=self.name,
                key="num_partitions",
                value=(self.num_partitions, self.fetchsize),
            )

    def relation(self) -> str:
        """The table (quoted) or the query (as a derived table) the predicate applies to."""
        if self.query is not None:
            return f"({self.query}) AS q"
        assert self.table is not None
        table = quote_identifier(self.table, SqlDialect.POSTGRES)
        if self.schema is None:
            return table
        return f"{quote_identifier(self.schema, SqlDialect.POSTGRES)}.{table}"

    def select_sql(self, predicate: Predicate) -> str:
        """The SELECT the database runs: every column of the rows ``predicate`` admits."""
        return f"SELECT * FROM {self.relation()} WHERE {to_sql(predicate, SqlDialect.POSTGRES)}"

    def read(self, spark: SparkSession, predicate: Predicate) -> ColumnRead:
        """A lazy frame over ``(select_sql) AS src``; with ``num_partitions > 1``, partitioned
        on the leading watermark column between the bounds of the rows to read."""
        check_predicate_columns(self.watermark_columns, predicate.watermark.columns)
        select = self.select_sql(predicate)
        dbtable = f"({select}) AS src"
        details: dict[str, object] = {"dbtable": dbtable, "url": redacted_url(self.url)}
        reader = self._reader(spark).option("dbtable", dbtable)
        if self.num_partitions > 1:
            partitioning = self._partitioning(spark, select)
            details["partitioning"] = partitioning
            if "lowerBound" in partitioning:
                reader = reader.options(
                    partitionColumn=self.watermark_columns[0],
                    lowerBound=str(partitioning["lowerBound"]),
                    upperBound=str(partitioning["upperBound"]),
                    numPartitions=str(self.num_partitions),
                )
        frame = self._load(reader)
        details["num_partitions"] = _num_partitions(frame)
        return ColumnRead(
            frame=frame, pushed_down=to_sql(predicate, SqlDialect.POSTGRES), details=details
        )

    def null_rows(self, spark: SparkSession, columns: Sequence[str]) -> DataFrame:
        """The rows with a NULL watermark column: the test runs in the database."""
        test = " OR ".join(f"{quote_identifier(c, SqlDialect.POSTGRES)} IS NULL" for c in columns)
        dbtable = f"(SELECT * FROM {self.relation()} WHERE {test}) AS src"
        return self._load(self._reader(spark).option("dbtable", dbtable))

    def columns(self) -> tuple[tuple[str, str | None], ...]:
        """The relation's columns, from one ``SELECT * ... LIMIT 0`` run by psycopg (no Spark,
        no row read), each with the Spark type Spark's PostgreSQL dialect reads it as (None for a
        type not in :data:`_SPARK_TYPES`: only its name is compared)."""
        import psycopg

        credentials: dict[str, Any] = {"connect_timeout": 10, **self._credentials()}
        conninfo = libpq_conninfo(self.url)
        with (
            psycopg.connect(conninfo, **credentials) as connection,
            connection.cursor() as cursor,
        ):
            cursor.execute(f"SELECT * FROM {self.relation()} LIMIT 0")  # type: ignore[arg-type]
            described = cursor.description or []
            return tuple(
                (c.name, _spark_type(c.type_code, c.precision, c.scale)) for c in described
            )

    def _credentials(self) -> dict[str, str]:
        """``user`` and ``password`` from the variables ``user_env``, ``password_env``."""
        env = os.environ if self.env is None else self.env
        found: dict[str, str] = {}
        for option, variable in (("user", self.user_env), ("password", self.password_env)):
            if variable is None:
                continue
            if variable not in env:
                raise ConfigError(
                    f"JDBC source {self.name!r} reads its {option} from the environment "
                    f"variable {variable!r}, which is not set; set it, or drop '{option}_env'",
                    pipeline=self.name,
                    key=f"{option}_env",
                    value=variable,
                )
            found[option] = env[variable]
        return found

    def _reader(self, spark: SparkSession) -> DataFrameReader:
        options = {"url": self.url, "driver": self.driver, "fetchsize": str(self.fetchsize)}
        return spark.read.format("jdbc").options(**options, **self._credentials())

    def _partitioning(self, spark: SparkSession, select: str) -> dict[str, object]:
        """Spark's partition options from ``min``/``max`` of the leading column, or the reason
        why the read stays one partition."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        column = self.watermark_columns[0]
        if '"' in column:
            # Spark quotes partitionColumn itself, without doubling an embedded quote.
            return {"reason": f"column {column!r} holds a double quote; read as one partition"}
        quoted = quote_identifier(column, SqlDialect.POSTGRES)
        bounds = self._load(
            self._reader(spark).option(
                "query", f"SELECT min({quoted}) AS lo, max({quoted}) AS hi FROM ({select}) AS src"
            )
        )
        kind = bounds.schema["lo"].dataType
        if isinstance(kind, (T.IntegralType, T.DecimalType, T.FloatType, T.DoubleType)):
            # Spark reads numeric bounds as longs: widen to whole numbers.
            lo, hi = F.floor("lo").cast("long"), F.ceil("hi").cast("long")
        elif isinstance(kind, (T.DateType, T.TimestampType, T.TimestampNTZType)):
            # Rendered in the session time zone, in which Spark parses the bounds back.
            lo, hi = F.col("lo"), F.col("hi")
        else:
            return {
                "reason": f"column {column!r} is {kind.simpleString()}, not numeric, date or "
                "timestamp; read as one partition"
            }
        row = bounds.select(lo.cast("string").alias("lo"), hi.cast("string").alias("hi")).first()
        if row is None or row["lo"] is None:
            return {"reason": "no row to read; one partition"}
        return {"partitionColumn": column, "lowerBound": row["lo"], "upperBound": row["hi"]}

    def _load(self, reader: DataFrameReader) -> DataFrame:
        try:
            frame = reader.load()
            # A classic load resolves the relation (loading the driver) at once; a Connect
            # client's is lazy until the plan is analysed, which reading the schema does.
            frame.schema  # noqa: B018
            return frame
        except Exception as exc:  # py4j / pyspark (classic or Connect) wrap the JVM's exception
            text = str(exc)
            if "ClassNotFoundException" in text or "No suitable driver" in text:
                hint = _SERVER_JAR_HINT if _is_connect(reader) else _JAR_HINT
                raise JdbcDriverMissingError(redacted_url(self.url), self.driver, hint) from exc
            raise


def _is_connect(reader: DataFrameReader) -> bool:
    """Whether ``reader`` is a Spark Connect client's (its plans run in a server)."""
    return type(reader).__module__.startswith("pyspark.sql.connect.")


def _num_partitions(frame: DataFrame) -> int | None:
    """The partitions Spark planned for the JDBC scan (it may take fewer than asked for a narrow
    range), read from the physical plan's ``JDBCRelation(...) [numPartitions=N]``: ``explain``
    works in classic Spark and under Spark Connect alike (an RDD does not exist under Connect).
    None when the plan does not say."""
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        frame.explain()  # planning only: no query runs against the database
    found = _PLANNED_PARTITIONS.search(printed.getvalue())
    return int(found.group(1)) if found else None


_PLANNED_PARTITIONS = re.compile(r"JDBCRelation\(.*?\) \[numPartitions=(\d+)\]", re.DOTALL)


#: PostgreSQL type OIDs -> the Spark type Spark's PostgreSQL dialect reads them as.
_SPARK_TYPES = {
    16: "boolean",
    20: "bigint",
    21: "smallint",
    23: "int",
    25: "string",
    700: "float",
    701: "double",
    1042: "string",
    1043: "string",
    1082: "date",
    1114: "timestamp",
    1184: "timestamp",
}
_NUMERIC = 1700
#: The URI parameters libpq knows of those a JDBC URL may carry (the driver's own are left out).
_LIBPQ_PARAMETERS = ("user", "password", "sslmode", "application_name", "options")


def _spark_type(oid: int, precision: int | None, scale: int | None) -> str | None:
    if oid == _NUMERIC:
        return None if precision is None else f"decimal({precision},{scale or 0})"
    return _SPARK_TYPES.get(oid)


def libpq_conninfo(url: str) -> str:
    """A ``jdbc:postgresql://host:port/db?...`` URL as libpq's URI (psycopg), keeping the
    parameters libpq knows; ValueError for another form (``jdbc:postgresql:db``)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit

    rest = url.removeprefix("jdbc:")
    if not rest.startswith("postgresql://"):
        raise ValueError(
            f"{redacted_url(url)!r} is not a jdbc:postgresql://host[:port]/database URL; only "
            "that form is read without Spark"
        )
    parts = urlsplit(rest)
    kept = [(k, v) for k, v in parse_qsl(parts.query) if k in _LIBPQ_PARAMETERS]
    return parts._replace(query=urlencode(kept)).geturl()


def redacted_url(url: str) -> str:
    """``url`` without a ``password=`` parameter's value (it ends up in metadata and errors)."""
    return re.sub(r"(?i)(password=)[^&;]*", r"\1***", url)


def jdbc_source(
    config: JdbcSourceConfig, name: str, watermark_columns: tuple[str, ...]
) -> JdbcSource:
    """The source ``config`` describes, over ``watermark_columns`` (``type: jdbc``)."""
    return JdbcSource(
        name=name,
        url=config.url,
        table=config.table,
        schema=config.db_schema,
        query=config.query,
        watermark_columns=watermark_columns,
        user_env=config.user_env,
        password_env=config.password_env,
        num_partitions=config.num_partitions,
        fetchsize=config.fetchsize,
    )
