"""An HTTP JSON API read page by page, the watermark injected into the requests (seed 001).

The seed's ``source.configure`` keys, with the meanings chosen here::

    watermark_param_mapping:  {updated_at: updated_since}  # column -> parameter: the watermark's
                                                           # value of that column (lower bound)
    watermark_to_param:       updated_before               # parameter: the read's upper bound,
                                                           # a chunk's or a time window's
                                                           # end, else the run's time (now)
    watermark_param_location: query                        # or body (a JSON object); the seed's
                                                           # "params" means query
    watermark_param_format:   iso                          # iso | date | timestamp |
                                                           # timestamp_ms | a strftime pattern

An empty watermark (None, ``{}``, every value None) sends no watermark parameter at all, not even
``watermark_to_param``: "read everything". Values: ``iso`` is ``isoformat()`` (UTC offset kept);
``date`` the date part; ``timestamp`` / ``timestamp_ms`` the epoch seconds / milliseconds of an
aware datetime (exact integers, a fraction only when the value has one); a pattern with ``%`` is
``strftime``. Numbers and strings are sent as they are (in a body as JSON numbers / strings).

**Exactness.** An API filters with its own semantics (often ``>=``, sometimes at a coarser
precision than the column), so the parameters only narrow what is transferred: the exact
:class:`Predicate` is applied again, in Spark, to the rows received. A row is never read twice
by a normal run and never skipped.

**Pages.** ``pagination`` is :class:`NextLink` (a field of the response holds the next page's URL;
followed as given, with the same method and body) or :class:`PageNumber` (a page parameter counted
up until a page is empty or shorter than ``page_size``); None reads one page. More than
``max_pages`` pages raise rather than truncate. Pages are fetched by the driver in
:meth:`HttpApiSource.read` (an API's pages are small), then the records become a frame through
Spark's JSON parser with ``schema_ddl`` (ISO timestamps become TIMESTAMP values; a value the
schema cannot hold fails the run, a missing field is null). A key the records of the pages read
hold that ``schema_ddl`` does not declare is read too, so that the pipeline's ``schema.mode``
decides about it (``sources/column_schema.py``: fail, add to the table, rescue or ignore) instead
of Spark dropping it: as STRING (its text; a nested value as JSON), under ``add_columns`` in the
type of its JSON values (:func:`json_value_type`, as a Parquet footer types a column), and in the
table's type once an earlier run added it (:meth:`HttpApiSource._undeclared_schema`). Standard
library HTTP (``urllib``); a status >= 400 raises :class:`~watermark_assets.exceptions.
HttpApiError` naming the URL and the status.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time, timezone
from enum import Enum
from typing import TYPE_CHECKING, Any

from watermark_assets.config.sources import (
    NAMED_FORMATS,
    HttpApiSourceConfig,
    NextLinkPaginationConfig,
    PageNumberPaginationConfig,
    check_watermark_params,
)
from watermark_assets.config.unit import UNIT_PLACEHOLDER
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.core.column.predicate import Predicate, SqlDialect, to_sql
from watermark_assets.core.column.watermark import ColumnWatermark
from watermark_assets.exceptions import ConfigError, HttpApiError
from watermark_assets.sources.column import ColumnRead, UnitRead, check_predicate_columns
from watermark_assets.sources.http_fetch import open_url, request_headers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class ParamLocation(str, Enum):
    """Where the watermark parameters go."""

    QUERY = "query"
    BODY = "body"

    @classmethod
    def parse(cls, text: str) -> ParamLocation:
        """``query`` or ``body``; the seed's ``params`` is ``query``."""
        return cls.QUERY if text == "params" else cls(text)


@dataclass(frozen=True, kw_only=True)
class NextLink:
    """The response's field ``path`` (dotted) holds the next page's URL; absent or null: done."""

    path: str = "next"


@dataclass(frozen=True, kw_only=True)
class PageNumber:
    """Query parameter ``param`` counts pages from ``start``; an empty page, or one shorter than
    ``page_size`` (sent as ``size_param`` when given), is the last."""

    param: str = "page"
    start: int = 1
    size_param: str | None = None
    page_size: int | None = None


Pagination = NextLink | PageNumber | None


def format_param(value: object, value_format: str, *, for_body: bool = False) -> object:
    """One watermark value as a request parameter (module docstring); text unless ``for_body``
    keeps numbers and strings as JSON values."""
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        return value if for_body else str(value)
    if "%" in value_format and isinstance(value, (datetime, date, time)):
        return value.strftime(value_format)
    if value_format == "iso" and isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if value_format == "date" and isinstance(value, (datetime, date)):
        return (value.date() if isinstance(value, datetime) else value).isoformat()
    if value_format in ("timestamp", "timestamp_ms") and isinstance(value, datetime):
        if value.utcoffset() is None:
            raise ValueError(
                f"watermark value {value!r} has no time zone, so it has no epoch "
                f"{value_format}; use watermark_param_format 'iso' or a strftime pattern"
            )
        delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        digits = 6 if value_format == "timestamp" else 3
        whole, fraction = divmod(abs(micros), 10**digits)
        sign = "-" if micros < 0 else ""
        if not fraction:
            return f"{sign}{whole}"
        return f"{sign}{whole}.{fraction:0{digits}d}".rstrip("0")
    raise ValueError(
        f"watermark_param_format {value_format!r} cannot render {value!r}; use one of "
        f"{list(NAMED_FORMATS)} or a strftime pattern"
    )


def watermark_params(
    watermark: ColumnWatermark,
    mapping: Mapping[str, str],
    *,
    value_format: str = "iso",
    to_param: str | None = None,
    upper: datetime | None = None,
    for_body: bool = False,
) -> dict[str, object]:
    """The parameters a request carries for ``watermark``: ``{mapping[column]: value}`` plus
    ``{to_param: upper}``; nothing at all for an empty watermark."""
    if watermark.is_empty:
        return {}
    unknown = sorted(set(mapping) - set(watermark.columns))
    if unknown:
        raise ValueError(
            f"watermark_param_mapping names {unknown}, which are not watermark columns "
            f"{list(watermark.columns)}; map only watermark columns"
        )
    params = {
        name: format_param(value, value_format, for_body=for_body)
        for column, value in zip(watermark.columns, watermark.values)
        if (name := mapping.get(column)) is not None
    }
    if to_param is not None and upper is not None:
        params[to_param] = format_param(upper, value_format, for_body=for_body)
    return params


@dataclass(frozen=True, kw_only=True)
class HttpApiSource:
    """Records of a paged JSON API above a column watermark (module docstring)."""

    name: str
    #: the first page's URL (static query parameters may be part of it, or in ``params``)
    url: str
    #: the records' schema as Spark DDL (``"id BIGINT, updated_at TIMESTAMP, name STRING"``)
    schema_ddl: str
    #: the watermark columns, in comparison order; fields of each record
    watermark_columns: tuple[str, ...]
    method: str = "GET"
    #: seed: watermark column -> request parameter carrying its value
    watermark_param_mapping: Mapping[str, str] = field(default_factory=dict)
    #: seed: request parameter carrying the read's upper bound (a window's end, else the run's
    #: time), or None
    watermark_to_param: str | None = None
    #: seed: ``query`` (the seed's ``params``) or ``body``
    watermark_param_location: ParamLocation = ParamLocation.QUERY
    #: seed: ``iso``, ``date``, ``timestamp``, ``timestamp_ms`` or a strftime pattern
    watermark_param_format: str = "iso"
    #: static query parameters sent with the first request
    params: Mapping[str, str] = field(default_factory=dict)
    #: static JSON body (body location; the watermark parameters are added to it)
    body: Mapping[str, object] = field(default_factory=dict)
    pagination: Pagination = None
    #: dotted path of the records list in a page ("" when the page is the list)
    records_path: str = "data"
    headers: Mapping[str, str] = field(default_factory=dict)
    #: header -> environment variable holding its value (tokens stay out of the configuration)
    headers_env: Mapping[str, str] = field(default_factory=dict)
    timeout_seconds: float = 30.0
    max_pages: int = 10_000
    now: Clock = field(default=system_clock, repr=False, compare=False)
    env: Mapping[str, str] | None = field(default=None, repr=False, compare=False)
    #: the columns the run holds the records to (``schema_ddl``, then the table's columns it
    #: lacks) and ``schema.mode`` (:meth:`under_schema`)
    declared: tuple[tuple[str, str], ...] | None = None
    schema_mode: str = "fail"

    def under_schema(self, declared: Sequence[tuple[str, str]] | None, mode: str) -> HttpApiSource:
        """This source reading for ``declared`` under ``schema.mode`` ``mode``: how a key
        ``schema_ddl`` does not declare is typed (:meth:`_undeclared_schema`)."""
        known = None if declared is None else tuple(declared)
        return replace(self, declared=known, schema_mode=mode)

    def __post_init__(self) -> None:
        object.__setattr__(self, "watermark_columns", tuple(self.watermark_columns))
        location = self.watermark_param_location
        if not isinstance(location, ParamLocation):
            try:
                location = ParamLocation.parse(str(location))
            except ValueError:
                raise ConfigError(
                    f"HTTP source {self.name!r}: watermark_param_location {location!r} is not "
                    "'query' (or 'params') or 'body'",
                    pipeline=self.name,
                    key="watermark_param_location",
                    value=location,
                ) from None
            object.__setattr__(self, "watermark_param_location", location)
        object.__setattr__(self, "method", self.method.upper())
        if location is ParamLocation.BODY and self.method == "GET":
            raise ConfigError(
                f"HTTP source {self.name!r} puts the watermark in the body of a GET request; "
                "use method POST (or put the watermark in the query)",
                pipeline=self.name,
                key="method",
                value=self.method,
            )
        check_watermark_params(
            self.name,
            self.watermark_param_mapping,
            self.watermark_columns,
            self.watermark_param_format,
        )

    def for_unit(self, unit: UnitRead) -> HttpApiSource:
        """This source reading one unit's rows (:class:`~watermark_assets.sources.column.
        ReadsUnits`): the URL's ``{unit}`` holds the id, URL-quoted; ``unit.param`` carries it,
        mapped from the unit column when the read's predicate holds ``column = id`` (a unit
        run, whose one watermark column is the unit column), else as a static parameter (a
        cell's run, whose predicate is its window)."""
        update: dict[str, Any] = {}
        if unit.param is not None and unit.in_predicate:
            update["watermark_param_mapping"] = {self.watermark_columns[0]: unit.param}
        elif unit.param is not None:
            update["params"] = {**self.params, unit.param: unit.id}
        if UNIT_PLACEHOLDER in self.url:
            update["url"] = self.url.replace(UNIT_PLACEHOLDER, urllib.parse.quote(unit.id, safe=""))
        return replace(self, **update)

    def read(self, spark: SparkSession, predicate: Predicate) -> ColumnRead:
        """Fetch every page for ``predicate``'s watermark, then a frame of the records with the
        exact predicate applied in Spark (the API's own filter may be coarser)."""
        from pyspark.sql import functions as F

        watermark = predicate.watermark
        check_predicate_columns(self.watermark_columns, watermark.columns)
        in_body = self.watermark_param_location is ParamLocation.BODY
        injected = watermark_params(
            watermark,
            # a bound on the leading column only (a look-back, a lag, a boundary read) sends
            # that column's parameter: the others' values say nothing about the rows read
            {c: p for c, p in self.watermark_param_mapping.items() if c in watermark.columns},
            value_format=self.watermark_param_format,
            to_param=self.watermark_to_param,
            upper=_upper_bound(predicate, self.now),
            for_body=in_body,
        )
        records, requests = self._fetch_all(injected)
        lines = [(json.dumps(record),) for record in records]
        undeclared, text = self._undeclared_schema(records)
        schema = self.schema_ddl + "".join(
            f", `{key.replace('`', '``')}` {kind}" for key, kind in undeclared
        )
        parsed = spark.createDataFrame(lines, "value STRING").select(
            # FAILFAST: a record the schema cannot hold stops the run (Spark's
            # MALFORMED_RECORD_IN_PARSING when the rows are written) instead of becoming nulls.
            F.from_json("value", schema, {"mode": "FAILFAST"}).alias("record")
        )
        frame = parsed.select("record.*")
        if not predicate.admits_everything:
            frame = frame.where(to_sql(predicate, SqlDialect.SPARK))
        where = "body" if in_body else "query"
        pushed = ", ".join(f"{k}={v}" for k, v in injected.items()) or "(no parameter)"
        return ColumnRead(
            frame=frame,
            pushed_down=f"{where}: {pushed}",
            details={
                "pages_fetched": len(requests),
                "records_received": len(records),
                "requests": requests,
                "residual_filter": to_sql(predicate, SqlDialect.SPARK),
            },
            text_columns=text,
        )

    def _undeclared_schema(
        self, records: list[dict[str, Any]]
    ) -> tuple[list[tuple[str, str]], tuple[str, ...]]:
        """The keys of ``records`` that ``schema_ddl`` does not declare, each with the type it is
        read in, and those handed as text for ``schema.mode`` to parse:

        - a column the table holds (an earlier run added it): its type (a value it cannot hold
          fails the run, as for a declared column), or, under rescue and ignore, STRING, parsed
          by the policy (a value that does not fit is rescued, or nulled and counted);
        - a new key: under ``add_columns`` the type of its JSON values
          (:func:`json_value_type`: the table's new column takes it unless ``schema.hints``
          names one), else STRING (its text; a nested value as JSON)."""
        known = {name.lower(): kind for name, kind in self.declared or ()}
        loose = self.schema_mode in ("rescue", "ignore")
        typed: list[tuple[str, str]] = []
        text: list[str] = []
        for key in undeclared_keys(records, self.schema_ddl):
            kind = known.get(key.lower())
            if kind is None:
                values = [record.get(key) for record in records]
                kind = json_value_type(values) if self.schema_mode == "add_columns" else "string"
            elif loose and kind != "string":
                kind = "string"
                text.append(key)
            typed.append((key, kind))
        return typed, tuple(text)

    def _fetch_all(
        self, injected: Mapping[str, object]
    ) -> tuple[list[dict[str, Any]], list[dict[str, object]]]:
        in_body = self.watermark_param_location is ParamLocation.BODY
        query: dict[str, object] = {**self.params, **({} if in_body else injected)}
        body: dict[str, object] | None = None
        if in_body or self.body or self.method != "GET":
            body = {**self.body, **(injected if in_body else {})}
        pagination = self.pagination
        page_number = pagination.start if isinstance(pagination, PageNumber) else 0
        url: str | None = self.url
        records: list[dict[str, Any]] = []
        requests: list[dict[str, object]] = []
        while url is not None:
            if len(requests) >= self.max_pages:
                raise HttpApiError(
                    url,
                    None,
                    f"more than max_pages={self.max_pages} pages",
                    "Raise max_pages, or check that the pagination ends",
                )
            page_query = dict(query)
            if isinstance(pagination, PageNumber):
                page_query[pagination.param] = page_number
                if pagination.size_param and pagination.page_size:
                    page_query[pagination.size_param] = pagination.page_size
            full_url = _with_query(url, page_query)
            requests.append({"method": self.method, "url": full_url, "body": body})
            page = self._request(full_url, body)
            page_records = _records(page, self.records_path, full_url)
            records.extend(page_records)
            url = None
            if isinstance(pagination, NextLink):
                link = _dig(page, pagination.path)
                if link:
                    url = urllib.parse.urljoin(full_url, str(link))
                    query = {}  # the server's link carries its own cursor and filters
            elif isinstance(pagination, PageNumber):
                size = pagination.page_size
                if page_records and (size is None or len(page_records) >= size):
                    page_number += 1
                    url = self.url
        return records, requests

    def _request(self, url: str, body: Mapping[str, object] | None) -> Any:
        env = os.environ if self.env is None else self.env
        headers = {"Accept": "application/json"}
        headers |= request_headers(self.name, self.headers, self.headers_env, env)
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        fix = (
            "Nothing was read and the watermark is unchanged; fix the API or the source's URL, "
            "parameters and headers, then re-run"
        )
        with open_url(
            url,
            headers=headers,
            timeout=self.timeout_seconds,
            method=self.method,
            data=data,
            fix=fix,
        ) as response:
            raw = response.read()
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise HttpApiError(
                url,
                200,
                f"the body is not JSON ({exc}): {raw[:200]!r}",
                "Point the source at a JSON endpoint",
            ) from exc


def _upper_bound(predicate: Predicate, now: Clock) -> datetime:
    """What ``watermark_to_param`` sends: the read's exclusive upper bound when it has one (a
    replay chunk's or a time window's end), else the run's time."""
    upper = predicate.upper
    if upper is not None and isinstance(upper.value, datetime):
        return upper.value
    return now()


def _with_query(url: str, query: Mapping[str, object]) -> str:
    if not query:
        return url
    parts = urllib.parse.urlsplit(url)
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    pairs += [(k, str(v)) for k, v in query.items()]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(pairs)))


def _dig(page: Any, path: str) -> Any:
    value = page
    for key in path.split(".") if path else ():
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def undeclared_keys(records: list[dict[str, Any]], schema_ddl: str) -> list[str]:
    """The keys of ``records`` that ``schema_ddl`` does not declare (case-insensitive, as Spark
    matches them), each once, first seen first."""
    from watermark_assets.spark.ddl import parse_read_schema

    declared = {c.name.lower() for c in parse_read_schema(schema_ddl)}
    found: dict[str, str] = {}
    for record in records:
        for key in record:
            lowered = key.lower()
            if lowered not in declared and lowered not in found:
                found[lowered] = key
    return list(found.values())


def json_value_type(values: Sequence[object]) -> str:
    """The Spark type of a key's JSON values, as a Parquet footer states a column's: BIGINT when
    every non-null value is an integer, DOUBLE when they are numbers, BOOLEAN when booleans,
    else (text, nested, mixed, or only nulls) STRING."""
    kinds = {type(value) for value in values if value is not None}
    if not kinds or kinds - {bool, int, float}:
        return "string"
    if kinds == {bool}:
        return "boolean"
    if bool in kinds:
        return "string"
    return "bigint" if kinds == {int} else "double"


def _records(page: Any, path: str, url: str) -> list[dict[str, Any]]:
    records = _dig(page, path)
    if not isinstance(records, list) or not all(isinstance(r, Mapping) for r in records):
        keys = sorted(page) if isinstance(page, Mapping) else type(page).__name__
        raise HttpApiError(
            url,
            200,
            f"records_path {path!r} does not lead to a list of objects (the page has {keys})",
            "Set records_path to the dotted path of the records list ('' for a top-level list)",
        )
    return [dict(r) for r in records]


def http_api_source(
    config: HttpApiSourceConfig, name: str, watermark_columns: tuple[str, ...]
) -> HttpApiSource:
    """The source ``config`` describes, over ``watermark_columns`` (registered for
    ``type: http_api``)."""
    pagination: Pagination = None
    if isinstance(config.pagination, NextLinkPaginationConfig):
        pagination = NextLink(path=config.pagination.path)
    elif isinstance(config.pagination, PageNumberPaginationConfig):
        pagination = PageNumber(
            param=config.pagination.param,
            start=config.pagination.start,
            size_param=config.pagination.size_param,
            page_size=config.pagination.page_size,
        )
    return HttpApiSource(
        name=name,
        url=config.url,
        schema_ddl=config.schema_ddl,
        watermark_columns=watermark_columns,
        method=config.method,
        watermark_param_mapping=dict(config.watermark_param_mapping),
        watermark_to_param=config.watermark_to_param,
        watermark_param_location=ParamLocation.parse(config.watermark_param_location),
        watermark_param_format=config.watermark_param_format,
        params=dict(config.params),
        body=dict(config.body),
        pagination=pagination,
        records_path=config.records_path,
        headers=dict(config.headers),
        headers_env=dict(config.headers_env),
        timeout_seconds=config.timeout_seconds,
        max_pages=config.max_pages,
    )
