"""HttpApiSource against a real HTTP server on loopback that the tests start.

The server holds 25 orders, five per minute from 2026-04-03T09:15:00Z (the seed's watermark), and
filters like many APIs do: ``updated_at >= updated_since`` and ``< updated_before``, at whatever
precision the parameter has (a date keeps the whole day). It records every request. The source
must read exactly the rows above the watermark whatever the API's precision.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from watermark_assets.core.column import (
    ColumnWatermark,
    GreaterOrEqual,
    GreaterThan,
    WatermarkOperator,
    predicate,
)
from watermark_assets.exceptions import ConfigError, HttpApiError
from watermark_assets.sources.http_api import (
    HttpApiSource,
    NextLink,
    PageNumber,
    ParamLocation,
    format_param,
)

SEED_WATERMARK = '{"updated_at": {"__datetime__": "2026-04-03T09:15:00+00:00"}}'
BASE = datetime(2026, 4, 3, 9, 15, tzinfo=timezone.utc)
NOW = datetime(2026, 4, 3, 12, 0, tzinfo=timezone.utc)
SCHEMA = "id BIGINT, updated_at TIMESTAMP, name STRING"
RECORDS = [
    {"id": i, "updated_at": (BASE + timedelta(minutes=i // 5)).isoformat(), "name": f"o'{i}"}
    for i in range(25)
]
PAGE = 10


def parse_bound(text: str) -> datetime:
    """What the API accepts: epoch seconds or milliseconds, ISO dates and datetimes (UTC)."""
    try:
        number = float(text)
    except ValueError:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return datetime.fromtimestamp(number / 1000 if number > 1e11 else number, timezone.utc)


@dataclass
class Api:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)


class Handler(BaseHTTPRequestHandler):
    api: Api

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self.answer({})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.answer(json.loads(self.rfile.read(length) or b"{}"))

    def answer(self, body: dict[str, Any]) -> None:
        parts = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(parts.query))
        self.api.requests.append(
            {"method": self.command, "path": parts.path, "query": query, "body": body}
        )
        if parts.path == "/broken":
            return self.send(500, b'{"error": "database is down"}')
        if parts.path == "/malformed":
            page = {"data": [RECORDS[0], {"id": 99, "updated_at": "yesterday", "name": "x"}]}
            return self.send(200, json.dumps(page).encode())
        if parts.path == "/text":
            return self.send(200, b"<html>hello</html>")
        args = {**query, **body}
        rows = RECORDS
        if "updated_since" in args:
            since = parse_bound(str(args["updated_since"]))
            rows = [r for r in rows if datetime.fromisoformat(r["updated_at"]) >= since]
        if "updated_before" in args:
            before = parse_bound(str(args["updated_before"]))
            rows = [r for r in rows if datetime.fromisoformat(r["updated_at"]) < before]
        if parts.path == "/cursor":
            start = int(query.get("cursor", 0))
            page = {"data": rows[start : start + PAGE]}
            if start + PAGE < len(rows):
                following = {k: v for k, v in query.items() if k != "cursor"}
                following["cursor"] = str(start + PAGE)
                page["links"] = {"next": "/cursor?" + urllib.parse.urlencode(following)}
            return self.send(200, json.dumps(page).encode())
        number = int(args.get("page", 1))
        size = int(args.get("per_page", PAGE))
        page_rows = rows[(number - 1) * size : number * size]
        return self.send(200, json.dumps({"data": page_rows}).encode())

    def send(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def api() -> Iterator[Api]:
    state = Api(url="")
    handler = type("RecordingHandler", (Handler,), {"api": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def source(api: Api, path: str = "/orders", **overrides: Any) -> HttpApiSource:
    options: dict[str, Any] = {
        "name": "orders_api",
        "url": api.url + path,
        "schema_ddl": SCHEMA,
        "watermark_columns": ("updated_at",),
        "watermark_param_mapping": {"updated_at": "updated_since"},
        "pagination": PageNumber(param="page", size_param="per_page", page_size=PAGE),
        "now": lambda: NOW,
        **overrides,
    }
    return HttpApiSource(**options)


def ids(read: Any) -> list[int]:
    return sorted(int(r["id"]) for r in read.frame.select("id").collect())


def above(watermark: datetime, operator: WatermarkOperator = GreaterThan) -> list[int]:
    return [
        r["id"]
        for r in RECORDS
        if operator.admits((datetime.fromisoformat(r["updated_at"]),), (watermark,))
    ]


def test_the_seeds_configuration_and_watermark_verbatim(spark: Any, api: Api) -> None:
    configure = {
        "endpoint": "/orders",
        "watermark_param_mapping": {"updated_at": "updated_since"},
        "watermark_to_param": "updated_before",
        "watermark_param_location": "params",
        "watermark_param_format": "iso",
    }
    watermark = ColumnWatermark.from_json(SEED_WATERMARK)
    api_source = source(
        api,
        configure["endpoint"],
        watermark_param_mapping=configure["watermark_param_mapping"],
        watermark_to_param=configure["watermark_to_param"],
        watermark_param_location=configure["watermark_param_location"],
        watermark_param_format=configure["watermark_param_format"],
    )
    read = api_source.read(spark, predicate(watermark, GreaterThan))
    first = api.requests[0]
    assert first["query"]["updated_since"] == "2026-04-03T09:15:00+00:00"
    assert first["query"]["updated_before"] == "2026-04-03T12:00:00+00:00"
    assert first["body"] == {}
    # The API answered >= (25 rows); the source keeps the seed's > : the five rows AT the
    # watermark are not read again.
    assert read.details["records_received"] == 25
    assert ids(read) == list(range(5, 25)) == above(BASE)
    assert read.pushed_down == (
        "query: updated_since=2026-04-03T09:15:00+00:00, updated_before=2026-04-03T12:00:00+00:00"
    )


def test_replay_includes_the_rows_at_the_watermark(spark: Any, api: Api) -> None:
    watermark = ColumnWatermark.from_json(SEED_WATERMARK)
    read = source(api).read(spark, predicate(watermark, GreaterOrEqual))
    assert ids(read) == list(range(25)) == above(BASE, GreaterOrEqual)


WATERMARK = BASE + timedelta(minutes=2)  # ids 10-14 share it


@pytest.mark.parametrize(
    ("value_format", "sent"),
    [
        pytest.param("iso", "2026-04-03T09:17:00+00:00", id="iso keeps the UTC offset"),
        pytest.param("date", "2026-04-03", id="date sends the day, the API returns all of it"),
        pytest.param("timestamp", str(int(WATERMARK.timestamp())), id="epoch seconds"),
        pytest.param(
            "timestamp_ms", str(int(WATERMARK.timestamp()) * 1000), id="epoch milliseconds"
        ),
        pytest.param("%Y-%m-%dT%H:%M:%SZ", "2026-04-03T09:17:00Z", id="a strftime pattern"),
    ],
)
def test_formats_send_the_value_and_the_rows_stay_exact(
    spark: Any, api: Api, value_format: str, sent: str
) -> None:
    api_source = source(api, watermark_param_format=value_format)
    read = api_source.read(
        spark, predicate(ColumnWatermark.of({"updated_at": WATERMARK}), GreaterThan)
    )
    assert api.requests[0]["query"]["updated_since"] == sent
    assert ids(read) == list(range(15, 25)) == above(WATERMARK)


def test_body_location_posts_the_watermark_as_json(spark: Any, api: Api) -> None:
    api_source = source(
        api,
        "/search",
        method="POST",
        watermark_param_location="body",
        watermark_to_param="updated_before",
        watermark_param_format="timestamp",
        body={"status": "open"},
    )
    read = api_source.read(
        spark, predicate(ColumnWatermark.of({"updated_at": WATERMARK}), GreaterThan)
    )
    first = api.requests[0]
    assert first["method"] == "POST"
    assert first["body"] == {
        "status": "open",
        "updated_since": str(int(WATERMARK.timestamp())),
        "updated_before": str(int(NOW.timestamp())),
    }
    assert first["query"] == {"page": "1", "per_page": str(PAGE)}  # no watermark in the query
    assert ids(read) == above(WATERMARK)
    assert read.pushed_down.startswith("body: updated_since=")


def test_body_numbers_stay_json_numbers(spark: Any, api: Api) -> None:
    api_source = source(
        api,
        "/search",
        method="POST",
        watermark_columns=("id",),
        watermark_param_mapping={"id": "after_id"},
        watermark_param_location=ParamLocation.BODY,
    )
    read = api_source.read(spark, predicate(ColumnWatermark.of({"id": 20}), GreaterThan))
    assert api.requests[0]["body"] == {"after_id": 20}
    assert ids(read) == [21, 22, 23, 24]  # this API ignores after_id: the source filters


def test_page_numbers_over_three_pages(spark: Any, api: Api) -> None:
    read = source(api).read(spark, predicate(ColumnWatermark.empty(), GreaterThan))
    assert [r["query"]["page"] for r in api.requests] == ["1", "2", "3"]
    assert read.details["pages_fetched"] == 3
    assert ids(read) == list(range(25))


def test_next_links_over_three_pages(spark: Any, api: Api) -> None:
    api_source = source(api, "/cursor", pagination=NextLink(path="links.next"))
    read = api_source.read(spark, predicate(ColumnWatermark.empty(), GreaterThan))
    assert [r["query"].get("cursor") for r in api.requests] == [None, "10", "20"]
    assert ids(read) == list(range(25))


def test_next_links_keep_the_servers_filter(spark: Any, api: Api) -> None:
    watermark = ColumnWatermark.of({"updated_at": BASE + timedelta(minutes=1)})
    api_source = source(api, "/cursor", pagination=NextLink(path="links.next"))
    read = api_source.read(spark, predicate(watermark, GreaterThan))
    assert all("updated_since" in r["query"] for r in api.requests)
    assert len(api.requests) == 2  # 20 rows from minute 1: two pages
    assert ids(read) == list(range(10, 25))


def test_empty_watermark_sends_no_watermark_parameter(spark: Any, api: Api) -> None:
    api_source = source(api, watermark_to_param="updated_before")
    for empty in (None, {}, {"updated_at": None}):
        api.requests.clear()
        watermark = ColumnWatermark.of(empty)
        read = api_source.read(spark, predicate(watermark, GreaterThan))
        assert all(set(r["query"]) == {"page", "per_page"} for r in api.requests), empty
        assert read.pushed_down == "query: (no parameter)"
        assert ids(read) == list(range(25))


def test_a_tuple_watermark_resumes_inside_a_shared_timestamp(spark: Any, api: Api) -> None:
    api_source = source(api, watermark_columns=("updated_at", "id"))
    watermark = ColumnWatermark.of({"updated_at": WATERMARK, "id": 12})
    read = api_source.read(spark, predicate(watermark, GreaterThan))
    assert api.requests[0]["query"]["updated_since"] == WATERMARK.isoformat()
    assert ids(read) == list(range(13, 25))


def test_a_server_error_names_the_url_and_the_status(spark: Any, api: Api) -> None:
    api_source = source(api, "/broken")
    with pytest.raises(HttpApiError, match=r"/broken\?.*HTTP 500.*database is down") as caught:
        api_source.read(spark, predicate(ColumnWatermark.empty(), GreaterThan))
    assert caught.value.status == 500
    assert caught.value.url.startswith(api.url + "/broken")


def test_a_body_that_is_not_json_is_refused(spark: Any, api: Api) -> None:
    with pytest.raises(HttpApiError, match="not JSON"):
        source(api, "/text").read(spark, predicate(ColumnWatermark.empty(), GreaterThan))


def test_a_wrong_records_path_names_the_keys_found(spark: Any, api: Api) -> None:
    with pytest.raises(HttpApiError, match=r"records_path 'items'.*\['data'\]"):
        source(api, records_path="items").read(
            spark, predicate(ColumnWatermark.empty(), GreaterThan)
        )


def test_an_unreachable_api_is_a_clear_error(spark: Any) -> None:
    api_source = HttpApiSource(
        name="gone",
        url="http://127.0.0.1:9/orders",
        schema_ddl=SCHEMA,
        watermark_columns=("updated_at",),
        timeout_seconds=5,
    )
    with pytest.raises(HttpApiError, match=r"127\.0\.0\.1:9/orders.*no response"):
        api_source.read(spark, predicate(ColumnWatermark.empty(), GreaterThan))


@pytest.mark.parametrize(
    ("options", "key"),
    [
        pytest.param({"watermark_param_location": "body"}, "method", id="body with GET"),
        pytest.param(
            {"watermark_param_location": "header"},
            "watermark_param_location",
            id="unknown location",
        ),
        pytest.param(
            {"watermark_param_mapping": {"created_at": "since"}},
            "watermark_param_mapping",
            id="mapping a column that is not a watermark",
        ),
        pytest.param(
            {"watermark_param_format": "unix"}, "watermark_param_format", id="unknown format"
        ),
    ],
)
def test_invalid_configurations_are_refused(options: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        HttpApiSource(
            name="bad",
            url="http://127.0.0.1/x",
            schema_ddl=SCHEMA,
            watermark_columns=("updated_at",),
            **options,
        )
    assert caught.value.key == key


@pytest.mark.parametrize(
    ("value", "value_format", "expected"),
    [
        pytest.param(
            datetime(1970, 1, 1, 0, 0, 1, 500000, timezone.utc),
            "timestamp",
            "1.5",
            id="a fraction of a second is kept",
        ),
        pytest.param(
            datetime(1969, 12, 31, 23, 59, 59, 500000, timezone.utc),
            "timestamp",
            "-0.5",
            id="before 1970",
        ),
        pytest.param(
            datetime(1970, 1, 1, 0, 0, 0, 1500, timezone.utc),
            "timestamp_ms",
            "1.5",
            id="microseconds in milliseconds",
        ),
        pytest.param(42, "iso", "42", id="a number is sent as it is"),
    ],
)
def test_format_param(value: Any, value_format: str, expected: str) -> None:
    assert format_param(value, value_format) == expected


def test_an_epoch_of_a_naive_datetime_is_refused() -> None:
    with pytest.raises(ValueError, match="no time zone"):
        format_param(datetime(2026, 4, 3), "timestamp")


def test_a_record_the_schema_cannot_hold_fails_the_read(spark: Any, api: Api) -> None:
    read = source(api, "/malformed", pagination=None).read(
        spark, predicate(ColumnWatermark.empty(), GreaterThan)
    )
    with pytest.raises(Exception, match="MALFORMED_RECORD"):
        read.frame.collect()  # never a row with a null updated_at in its place
