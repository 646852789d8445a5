"""The sources' configuration: where a pipeline's rows come from (``source:``), and the secondary
inputs listing a unit pipeline's ids (``watermark.secondary_input:``).

The models are declarative: what a source *does* lives in ``sources/``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from watermark_assets.config import registry
from watermark_assets.config.base import Model as _Model
from watermark_assets.core.time.file_dates import DateTemplate
from watermark_assets.core.urls import redact_url
from watermark_assets.exceptions import ConfigError, SecondaryInputError
from watermark_assets.spark.ddl import parse_read_schema

if TYPE_CHECKING:
    from watermark_assets.config.file_path import FilePipelineConfig
    from watermark_assets.config.shared import TableConfig
    from watermark_assets.sources.column import ColumnSource
    from watermark_assets.sources.files import FileSource
    from watermark_assets.sources.secondary_input import SecondaryInput


class SourceFormat(str, Enum):
    """How landing files are read. ``ndjson`` reads ``.ndjson`` and ``.ndjson.gz`` alike."""

    NDJSON = "ndjson"
    CSV = "csv"
    PARQUET = "parquet"


_SUFFIXES: Mapping[SourceFormat, tuple[str, ...]] = {
    SourceFormat.NDJSON: (".ndjson", ".ndjson.gz", ".json", ".json.gz", ".jsonl", ".jsonl.gz"),
    SourceFormat.CSV: (".csv", ".csv.gz"),
    SourceFormat.PARQUET: (".parquet",),
}


class _FileSourceBase(_Model):
    uri: str = Field(description="Folder the files land in: a local path or file:// URI.")
    name: str = Field(
        default="main",
        description="Source name, used in the checkpoint file name "
        "{pipeline}_{source}_checkpoint.json.",
    )

    def check_table(self, table: TableConfig) -> None:
        """ValueError when this source cannot write into ``table`` (any table by default)."""


def names_columns(format: str, options: Mapping[str, str] | None = None) -> bool:
    """Whether files of ``format`` read with ``options`` name their columns: Parquet, CSV with
    a header, JSON lines (not whole-file JSON). Here, not in ``sources/file_columns.py`` (which
    reads those names), so that the configuration can refuse ``schema.infer`` where it cannot
    work."""
    lowered = {k.lower(): str(v) for k, v in (options or {}).items()}
    if format == "csv":
        return lowered.get("header", "false").strip().lower() == "true"
    if format in ("json", "ndjson"):
        return lowered.get("multiline", "false").strip().lower() != "true"
    return format == "parquet"


class LandingFilesSourceConfig(_FileSourceBase):
    """Landing files that Spark reads and writes into the table as Parquet."""

    type: Literal["files"]
    format: SourceFormat = Field(
        default=SourceFormat.NDJSON, description="File format: ndjson (also .gz), csv or parquet."
    )
    schema_ddl: str | None = Field(
        default=None,
        alias="schema",
        description="Spark DDL schema of the records, e.g. 'id BIGINT, ts TIMESTAMP'. Required for "
        "ndjson and csv (malformed records are quarantined) unless the pipeline's schema.infer "
        "is true; parquet uses the table's, else its own. Files whose columns or types change: "
        "the pipeline's schema: section.",
    )
    csv_options: dict[str, str] = Field(
        default_factory=lambda: {"header": "true"},
        description="Options passed to Spark's CSV reader. With a header (the default), "
        "columns are matched by the header's names, not their position.",
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("schema_ddl")
    @classmethod
    def _schema_is_spark_ddl(cls, value: str | None) -> str | None:
        # Checked here, not when Spark first reads: a SparkSchemaError (a ValueError) names the
        # position and the fix.
        if value is not None and value.strip():
            parse_read_schema(value)
        return value

    def schema_needed(self, infer: bool) -> None:
        """ValueError unless this source knows its records' schema: ``source.schema``, Parquet
        (its footer), or ``infer`` (the pipeline's ``schema.infer``) on files that name their
        columns (CSV with a header, JSON lines)."""
        fmt = self.format.value
        if infer:
            if self.schema_ddl:
                raise ValueError(
                    "schema.infer is true but source.schema is given: the declared schema is "
                    "used as it is; remove one of them"
                )
            options = self.csv_options if self.format is SourceFormat.CSV else None
            if self.format is SourceFormat.PARQUET or not names_columns(fmt, options):
                raise ValueError(
                    f"schema.infer needs files that name their columns (CSV with header: "
                    f"'true', JSON lines), not format {fmt!r} with {dict(options or {})}; "
                    "give source.schema instead"
                )
        elif self.format is not SourceFormat.PARQUET and not self.schema_ddl:
            raise ValueError(
                f"source.schema is required for format {fmt!r} so that malformed records can "
                "be quarantined; add e.g. schema: 'id BIGINT, ts TIMESTAMP', or let the first "
                "run infer it: schema: {infer: true}"
            )

    @property
    def suffixes(self) -> tuple[str, ...]:
        """File name endings this source ingests; other files are ignored."""
        return _SUFFIXES[self.format]

    def build(self, pipeline: FilePipelineConfig) -> FileSource:
        """The source strategy of ``pipeline`` (whose source this is)."""
        return registry.build("file_source", self, pipeline)  # type: ignore[no-any-return]


class ParquetCommitSourceConfig(_FileSourceBase):
    """Parquet files another writer puts under the table folder, committed where they are:
    no Spark, no copy."""

    type: Literal["parquet_commit"]

    def check_table(self, table: TableConfig) -> None:
        """The files must lie inside the table (add actions are relative to its root) and are
        not rewritten (no derived columns)."""
        inside = table.uri.rstrip("/") + "/"
        if not (self.uri.rstrip("/") + "/").startswith(inside):
            raise ValueError(
                f"source.uri {self.uri!r} must be inside table.uri {table.uri!r}: the Delta add "
                "actions reference files relative to the table root. Let the writer put its "
                f"Parquet files under {inside}"
            )
        if table.derived_columns:
            raise ValueError(
                "a parquet_commit source does not rewrite files; remove table.derived_columns"
            )

    @property
    def format(self) -> SourceFormat:
        """Always Parquet: the files become the table's files."""
        return SourceFormat.PARQUET

    @property
    def suffixes(self) -> tuple[str, ...]:
        return _SUFFIXES[SourceFormat.PARQUET]

    def build(self, pipeline: FilePipelineConfig) -> FileSource:
        """The source strategy of ``pipeline`` (whose source this is)."""
        return registry.build("file_source", self, pipeline)  # type: ignore[no-any-return]


FileSourceConfig = Annotated[
    LandingFilesSourceConfig | ParquetCommitSourceConfig, Field(discriminator="type")
]

#: The accepted ``source.type`` values of a file-path pipeline, and what each one does.
FILE_SOURCE_TYPES: Mapping[str, str] = {
    "files": "landing files that Spark reads and writes into the table as Parquet",
    "parquet_commit": "Parquet files another writer puts under the table, committed in place",
}


class _ColumnSourceBase(_Model):
    def build(self, name: str, watermark_columns: Sequence[str] = ()) -> ColumnSource:
        """The source strategy this configuration describes, from the builder its ``type``
        registered (``config/registry.py``) for pipeline ``name`` over ``watermark_columns``."""
        return registry.build(  # type: ignore[no-any-return]
            "column_source", self, name, tuple(watermark_columns)
        )

    @property
    def rows_ddl(self) -> str | None:
        """The Spark DDL of the rows this source yields, which ``schema.mode`` compares the rows
        read with: its ``schema`` (None: the source declares none, e.g. a Delta table's own)."""
        ddl = getattr(self, "schema_ddl", None)
        return ddl if isinstance(ddl, str) else None

    def check_watermark(self, name: str, watermark_columns: Sequence[str]) -> None:
        """ConfigError when this source cannot read a pipeline ``name`` over
        ``watermark_columns`` (any by default): the pipeline's model asks when it is validated,
        the source's builder before it builds."""


class DeltaTableSourceConfig(_ColumnSourceBase):
    """A Delta table read through its log (``deltalake``): files skipped by statistics, then the
    predicate pushed into Spark's Parquet scan."""

    type: Literal["delta_table"] = "delta_table"
    uri: str = Field(description="Delta table root of the source: a local path or file:// URI.")
    storage_options: dict[str, str] | None = Field(
        default=None, description="delta-rs storage options (S3 endpoint, credentials...)."
    )

    @property
    def location(self) -> str:
        """Where the rows come from, as the UI shows it (each source type says it its way)."""
        return self.uri


class ParquetSourceConfig(_ColumnSourceBase):
    """A folder of Parquet files (Hive-style partition folders allowed); Spark's own push-down."""

    type: Literal["parquet"] = "parquet"
    uri: str = Field(description="Folder of the Parquet files: a local path or file:// URI.")

    @property
    def location(self) -> str:
        """Where the rows come from, as the UI shows it (each source type says it its way)."""
        return self.uri


class _TextSourceConfig(_ColumnSourceBase):
    uri: str = Field(description="Folder of the files: a local path or file:// URI.")
    schema_ddl: str = Field(
        alias="schema",
        description="Spark DDL schema of the rows, e.g. 'id BIGINT, updated_at TIMESTAMP' "
        "(required: an inferred schema could type a watermark column differently per run).",
    )
    options: dict[str, str] = Field(
        default_factory=dict, description="Spark reader options (header, delimiter, ...)."
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("schema_ddl")
    @classmethod
    def _schema_is_spark_ddl(cls, value: str) -> str:
        parse_read_schema(value)
        return value

    @property
    def location(self) -> str:
        """Where the rows come from, as the UI shows it (each source type says it its way)."""
        return self.uri


class CsvSourceConfig(_TextSourceConfig):
    """CSV files: a full scan, then the predicate applied in Spark."""

    type: Literal["csv"] = "csv"
    options: dict[str, str] = Field(
        default_factory=lambda: {"header": "true"},
        description="Spark CSV reader options; default {header: 'true'}.",
    )


class JsonSourceConfig(_TextSourceConfig):
    """JSON files (one object a line): a full scan, then the predicate applied in Spark."""

    type: Literal["json"] = "json"


class JdbcSourceConfig(_ColumnSourceBase):
    """A PostgreSQL table (or query) read through Spark JDBC: the watermark's WHERE clause runs
    in the database; ``num_partitions > 1`` reads in parallel on the leading watermark column.

    Spark needs the PostgreSQL driver jar on its classpath: the code location adds Debian's
    ``/usr/share/java/postgresql.jar`` to ``spark.jars`` when it is there (``make jdbc``
    installs it); elsewhere set ``spark.conf`` ``spark.jars.packages:
    org.postgresql:postgresql:42.7.4``.
    """

    type: Literal["jdbc"] = "jdbc"
    url: str = Field(
        description="JDBC URL of the database, e.g. 'jdbc:postgresql://127.0.0.1:5432/shop' "
        "(no password here: use password_env)."
    )
    table: str | None = Field(
        default=None,
        description="The table to read, quoted as given (case and special characters kept). "
        "Exactly one of table and query.",
    )
    query: str | None = Field(
        default=None,
        description="A SELECT whose result is read (the watermark predicate is applied to it "
        "in the database). Exactly one of table and query.",
    )
    db_schema: str | None = Field(
        default=None,
        alias="schema",
        description="Schema of the table (default: the connection's search_path).",
    )
    user_env: str | None = Field(
        default=None,
        description="Environment variable holding the user name (default: the URL's user=).",
    )
    password_env: str | None = Field(
        default=None, description="Environment variable holding the password."
    )
    num_partitions: int = Field(
        default=1,
        ge=1,
        description="Parallel JDBC reads, partitioned on the leading watermark column (a "
        "numeric, date or timestamp column); 1: one connection.",
    )
    fetchsize: int = Field(
        default=10_000,
        ge=0,
        description="Rows per round trip (0, the driver's default, fetches the whole result "
        "at once).",
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: str) -> str:
        if not value.startswith("jdbc:postgresql:"):
            raise ValueError(
                f"{value!r} is not a PostgreSQL JDBC URL; write it as "
                "'jdbc:postgresql://HOST:PORT/DATABASE' (the PostgreSQL driver is the one "
                "supported)"
            )
        return value

    @model_validator(mode="after")
    def _table_or_query(self) -> JdbcSourceConfig:
        if (self.table is None) == (self.query is None):
            given = "both" if self.table is not None else "neither"
            raise ValueError(
                f"source.table and source.query: {given} given; set exactly one, e.g. "
                "'table: orders' or 'query: SELECT * FROM orders WHERE NOT deleted'"
            )
        return self

    @property
    def location(self) -> str:
        """The URL (a ``password=`` parameter masked) and the table or ``(query)``."""
        url = re.sub(r"(?i)(password=)[^&;]*", r"\1***", self.url)
        if self.table is None:
            return f"{url} (query)"
        return f"{url} {self.db_schema + '.' if self.db_schema else ''}{self.table}"


class NextLinkPaginationConfig(_Model):
    """Pages linked by a field of each response holding the next page's URL."""

    type: Literal["next_link"] = "next_link"
    path: str = Field(
        default="next",
        description="Dotted path of the next page's URL in a response (absent or null: the "
        "last page), e.g. 'links.next'.",
    )


class PageNumberPaginationConfig(_Model):
    """Pages counted by a query parameter until a page is empty or shorter than page_size."""

    type: Literal["page_number"] = "page_number"
    param: str = Field(default="page", description="Query parameter holding the page number.")
    start: int = Field(default=1, ge=0, description="Number of the first page.")
    size_param: str | None = Field(
        default=None, description="Query parameter sending page_size (None: not sent)."
    )
    page_size: int | None = Field(
        default=None,
        ge=1,
        description="Records per full page: a shorter page is the last (None: only an empty "
        "page ends the read).",
    )


_PAGINATION_TYPES = ("next_link", "page_number")

PaginationConfig = Annotated[
    NextLinkPaginationConfig | PageNumberPaginationConfig, Field(discriminator="type")
]


class HttpApiSourceConfig(_ColumnSourceBase):
    """A paged JSON API: the watermark goes into the requests (``watermark_param_*``), the exact
    predicate is applied again in Spark to the records received."""

    type: Literal["http_api"] = "http_api"
    url: str = Field(description="URL of the first page, e.g. 'https://api.example.com/orders'.")
    method: Literal["GET", "POST"] = Field(
        default="GET", description="HTTP method of every page request (POST for a body)."
    )
    schema_ddl: str = Field(
        alias="schema",
        description="Spark DDL schema of the records, e.g. 'id BIGINT, updated_at TIMESTAMP' "
        "(a record the schema cannot hold fails the run; a missing field is null).",
    )
    watermark_param_mapping: dict[str, str] = Field(
        default_factory=dict,
        description="Watermark column -> request parameter carrying the watermark's value of "
        "that column (the read's lower bound), e.g. {updated_at: updated_since}.",
    )
    watermark_to_param: str | None = Field(
        default=None,
        description="Request parameter carrying the read's upper bound (the run's time), "
        "e.g. updated_before. None: not sent.",
    )
    watermark_param_location: Literal["query", "params", "body"] = Field(
        default="query",
        description="Where the watermark parameters go: query ('params' is the same) or body "
        "(a JSON object; needs method POST).",
    )
    watermark_param_format: str = Field(
        default="iso",
        description="How a datetime watermark is sent: iso, date, timestamp (epoch seconds), "
        "timestamp_ms or a strftime pattern ('%Y-%m-%dT%H:%M:%SZ').",
    )
    params: dict[str, str] = Field(
        default_factory=dict, description="Static query parameters of the first request."
    )
    body: dict[str, Any] = Field(
        default_factory=dict,
        description="Static JSON body (the watermark parameters are added to it in body location).",
    )
    pagination: PaginationConfig | None = Field(
        default=None,
        description="{type: next_link, path} or {type: page_number, param, start, size_param, "
        "page_size}; None: one page.",
    )
    records_path: str = Field(
        default="data",
        description="Dotted path of the records list in a page ('' when the page is the list).",
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="Static request headers (no secrets: headers_env)."
    )
    headers_env: dict[str, str] = Field(
        default_factory=dict,
        description="Header -> environment variable holding its value, e.g. "
        "{Authorization: ORDERS_API_TOKEN}.",
    )
    timeout_seconds: float = Field(default=30.0, gt=0, description="Per request.")
    max_pages: int = Field(
        default=10_000, ge=1, description="More pages than this fail the run (never truncated)."
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("method", mode="before")
    @classmethod
    def _upper_method(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("schema_ddl")
    @classmethod
    def _schema_is_spark_ddl(cls, value: str) -> str:
        parse_read_schema(value)
        return value

    @field_validator("watermark_param_format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value not in NAMED_FORMATS and "%" not in value:
            raise ValueError(
                f"{value!r} is not a watermark format; use one of {list(NAMED_FORMATS)} or a "
                "strftime pattern such as '%Y-%m-%dT%H:%M:%SZ'"
            )
        return value

    @model_validator(mode="after")
    def _body_needs_post(self) -> HttpApiSourceConfig:
        if self.watermark_param_location == "body" and self.method == "GET":
            raise ValueError(
                "source.watermark_param_location is 'body' but source.method is 'GET'; set "
                "method: POST, or watermark_param_location: query"
            )
        return self

    def check_watermark(self, name: str, watermark_columns: Sequence[str]) -> None:
        """ConfigError unless ``watermark_param_mapping`` names only watermark columns."""
        check_watermark_params(
            name, self.watermark_param_mapping, watermark_columns, self.watermark_param_format
        )

    @property
    def location(self) -> str:
        """The method and the first page's URL."""
        return f"{self.method} {self.url}"


class FileDownloadSourceConfig(_ColumnSourceBase):
    """Files named by date, downloaded over HTTP(S) (time pipelines only): a window downloads the
    files whose date is in it, e.g. ``url: https://host/files/file{date:%Y%m%d}.csv``."""

    type: Literal["file_download"] = "file_download"
    url: str = Field(
        description="URL template: {date:PATTERN} fields with strftime directives %Y %y %m %b %B "
        "%d %j %H; the finest is the file period (hourly, daily, monthly), e.g. "
        "'https://host/files/file{date:%Y%m%d}.csv'. Names are written as they are (spaces, "
        "'*'): the URL is percent-encoded when built."
    )
    format: Literal["csv", "ndjson", "json", "parquet"] = Field(
        description="csv, ndjson (one JSON object a line), json (one document or array a "
        "file) or parquet."
    )
    schema_ddl: str = Field(
        alias="schema",
        description="Spark DDL schema of the rows, e.g. 'id BIGINT, amount DOUBLE' (required: "
        "an inferred schema could change from file to file).",
    )
    options: dict[str, str] = Field(
        default_factory=dict,
        description="Spark reader options over the format's own (csv: header 'true'; json: "
        "multiLine 'true').",
    )
    date_column: str | None = Field(
        default=None,
        description="A TIMESTAMP column added to the rows holding their file's date (its "
        "period's start); the watermark's column must then be this one. None: the rows hold "
        "the watermark's column themselves.",
    )
    missing: Literal["skip", "fail"] = Field(
        default="skip",
        description="A file the server answers 404 for: skip (the window commits nothing and "
        "keeps its rows and high watermark; the run says which files) or fail (the run fails).",
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="Static request headers (no secrets: headers_env)."
    )
    headers_env: dict[str, str] = Field(
        default_factory=dict,
        description="Header -> environment variable holding its value, e.g. "
        "{Authorization: FILES_TOKEN}.",
    )
    timeout_seconds: float = Field(default=60.0, gt=0, description="Per file request.")
    staging_uri: str | None = Field(
        default=None,
        description="Where files are downloaded before Spark reads them (default: the table's "
        "_staging folder); removed once the rows are staged.",
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("url")
    @classmethod
    def _dated_http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http:// or https:// URL template")
        DateTemplate.parse(value)  # FileTemplateError names the problem and the fix
        return value

    @field_validator("schema_ddl")
    @classmethod
    def _schema_is_spark_ddl(cls, value: str) -> str:
        parse_read_schema(value)
        return value

    @property
    def rows_ddl(self) -> str:
        """``schema``, then the ``date_column`` the source adds to every row (a TIMESTAMP)."""
        if self.date_column is None:
            return self.schema_ddl
        return f"{self.schema_ddl}, `{self.date_column.replace('`', '``')}` TIMESTAMP"

    @model_validator(mode="after")
    def _date_column_is_new(self) -> FileDownloadSourceConfig:
        names = [f.name for f in parse_read_schema(self.schema_ddl)]
        if self.date_column is not None and self.date_column in names:
            raise ValueError(
                f"source.date_column {self.date_column!r} is already a column of the schema; "
                "name a new column, or leave date_column out to use the rows' own"
            )
        return self

    def check_watermark(self, name: str, watermark_columns: Sequence[str]) -> None:
        """ConfigError unless a time pipeline builds this source: one time column, and the
        staging folder it set."""
        if self.staging_uri is None or len(watermark_columns) != 1:
            raise ConfigError(
                f"file_download source of {name!r} is built by a time pipeline (one time column "
                "and a staging folder); use watermark.kind: time",
                pipeline=name,
                key="source.type",
                value=self.type,
            )

    @property
    def location(self) -> str:
        """The URL template (secrets redacted)."""
        return f"GET {redact_url(self.url)}"


ColumnSourceConfig = Annotated[
    DeltaTableSourceConfig
    | ParquetSourceConfig
    | CsvSourceConfig
    | JsonSourceConfig
    | JdbcSourceConfig
    | HttpApiSourceConfig
    # time pipelines only (WATERMARK_KINDS): it reads windows, by the date in the file names
    | FileDownloadSourceConfig,
    Field(discriminator="type"),
]

#: The accepted ``source.type`` values of a column pipeline, and what each one reads.
COLUMN_SOURCE_TYPES: Mapping[str, str] = {
    "delta_table": "a Delta table (statistics skip files, the filter is pushed into the scan)",
    "parquet": "a folder of Parquet files (the filter is pushed into the scan)",
    "csv": "CSV files (full scan, then the filter)",
    "json": "JSON-lines files (full scan, then the filter)",
    "jdbc": "a PostgreSQL table or query through Spark JDBC (the WHERE clause runs in the "
    "database)",
    "http_api": "a paged JSON API (the watermark is sent as request parameters)",
}
#: The accepted ``source.type`` values of a time pipeline: the column sources and files
#: downloaded by the date in their names.
TIME_SOURCE_TYPES: Mapping[str, str] = {
    **COLUMN_SOURCE_TYPES,
    "file_download": "files named by date over HTTP(S) (a window downloads the files dated in it)",
}


class FileSecondaryInputConfig(_Model):
    """A file listing the unit ids: CSV with a header row, JSON lines or Parquet."""

    type: Literal["file"] = "file"
    path: str = Field(description="The file: a local path or fsspec URL (s3://...).")
    fields: list[str] = Field(
        default_factory=lambda: ["id"],
        description="Column(s) holding the id; several are joined with '~'.",
    )
    format: Literal["csv", "jsonl", "parquet"] | None = Field(
        default=None, description="csv, jsonl or parquet; default: from the file's suffix."
    )

    def build(self) -> SecondaryInput:
        """The input :func:`~watermark_assets.sources.secondary_input.read_units` reads."""
        return registry.build("secondary_input", self)  # type: ignore[no-any-return]


class DeltaTableSecondaryInputConfig(_Model):
    """A Delta table listing the unit ids (a preceding pipeline's table)."""

    type: Literal["delta_table"] = "delta_table"
    uri: str = Field(description="The Delta table's root: a local path or URI.")
    fields: list[str] = Field(default_factory=lambda: ["id"], description="Column(s) of the id.")

    def build(self) -> SecondaryInput:
        """The input :func:`~watermark_assets.sources.secondary_input.read_units` reads."""
        return registry.build("secondary_input", self)  # type: ignore[no-any-return]


class PostgresSecondaryInputConfig(_Model):
    """A PostgreSQL table or query listing the unit ids."""

    type: Literal["postgres"] = "postgres"
    conninfo: str = Field(description="libpq connection string (password in PGPASSWORD).")
    table: str | None = Field(default=None, description="The table (or give query).")
    db_schema: str | None = Field(default=None, alias="schema", description="The table's schema.")
    query: str | None = Field(default=None, description="A SELECT instead of a table.")
    fields: list[str] = Field(default_factory=lambda: ["id"], description="Column(s) of the id.")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _table_or_query(self) -> PostgresSecondaryInputConfig:
        # exactly one of table and query, and fields (ValueError naming the fix)
        try:
            check_postgres_listing(self.table, self.db_schema, self.query, self.fields)
        except SecondaryInputError as error:
            raise ValueError(str(error)) from None
        return self

    def build(self) -> SecondaryInput:
        """The input :func:`~watermark_assets.sources.secondary_input.read_units` reads."""
        return registry.build("secondary_input", self)  # type: ignore[no-any-return]


SecondaryInputConfig = Annotated[
    FileSecondaryInputConfig | DeltaTableSecondaryInputConfig | PostgresSecondaryInputConfig,
    Field(discriminator="type"),
]

#: column sources that read a folder (or a Delta table's folder)
FOLDER_SOURCES = (DeltaTableSourceConfig, ParquetSourceConfig, CsvSourceConfig, JsonSourceConfig)


# --- checks a source's strategy makes too (sources/ calls these: one copy of each rule) -------

#: How a datetime watermark can be sent by name (``watermark_param_format``), besides a strftime
#: pattern.
NAMED_FORMATS = ("iso", "date", "timestamp", "timestamp_ms")


def check_watermark_params(
    name: str, mapping: Mapping[str, str], watermark_columns: Sequence[str], value_format: str
) -> None:
    """ConfigError unless an HTTP source's ``mapping`` names only watermark columns and its
    ``value_format`` is a named format or a strftime pattern."""
    unknown = sorted(set(mapping) - set(watermark_columns))
    if unknown or not (value_format in NAMED_FORMATS or "%" in value_format):
        raise ConfigError(
            f"HTTP source {name!r}: watermark_param_mapping may name only watermark "
            f"columns {list(watermark_columns)} (not {unknown}), and "
            f"watermark_param_format must be one of {list(NAMED_FORMATS)} or a strftime "
            f"pattern (got {value_format!r})",
            pipeline=name,
            key="watermark_param_mapping" if unknown else "watermark_param_format",
            value=unknown or value_format,
        )


#: The longest excerpt of a query (or of an unreadable line) kept in a message.
EXCERPT = 200


def excerpt(text: str) -> str:
    """``text`` without its line end, cut to :data:`EXCERPT` characters."""
    text = text.rstrip("\r\n")
    return text if len(text) <= EXCERPT else text[:EXCERPT] + "..."


def listing_fields(fields: Sequence[str], source: str) -> tuple[str, ...]:
    """The id columns of a secondary input (``source`` in words), checked: distinct names."""
    checked = (fields,) if isinstance(fields, str) else tuple(fields)
    if (
        not checked
        or not all(isinstance(f, str) and f for f in checked)
        or len(set(checked)) != len(checked)
    ):
        raise SecondaryInputError(
            source,
            f"fields {list(checked)!r} are not a list of distinct column names",
            'Give the column(s) holding the id, e.g. fields: ["id"]',
        )
    return checked


def postgres_listing(table: str | None, schema: str | None, query: str | None) -> str:
    """A PostgreSQL secondary input in words, for messages (never its conninfo)."""
    if table is not None:
        name = f"{schema}.{table}" if schema else table
        return f"PostgreSQL table {name!r}"
    return f"PostgreSQL query {excerpt(' '.join(str(query).split()))!r}"


def check_postgres_listing(
    table: str | None, schema: str | None, query: str | None, fields: Sequence[str]
) -> tuple[str, ...]:
    """SecondaryInputError unless exactly one of ``table`` and ``query`` is given (``schema``
    with a table only) and ``fields`` are distinct names; the fields, checked."""
    if (table is None) == (query is None):
        raise SecondaryInputError(
            "on PostgreSQL",
            "it names " + ("both a table and a query" if table else "no table or query"),
            "Give exactly one of table and query",
        )
    if query is not None and schema is not None:
        raise SecondaryInputError(
            postgres_listing(table, schema, query),
            "schema applies to a table, not to a query",
            "Qualify the tables in the query instead",
        )
    return listing_fields(fields, postgres_listing(table, schema, query))
