"""A real S3 server for tests and benchmarks: moto's, on 127.0.0.1 and a free port, in a thread.

Every request the server answers is recorded (method, path, query, status), so a test asserts
what the storage layer really sent, e.g. how many LIST requests a listing cost::

    with S3Server() as server:
        server.reset()
        ...
        assert server.count("LIST", bucket) <= 3
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, make_server

#: moto accepts any credentials; these are what the tests configure
ACCESS_KEY_ID = "testing-key-id"
SECRET_ACCESS_KEY = "testing-secret-key"
REGION = "us-east-1"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    status: int
    headers: dict[str, str]

    @property
    def kind(self) -> str:
        """LIST (a bucket listing), PUT, GET, HEAD, DELETE, POST or OTHER."""
        bucket_level = self.path.strip("/").count("/") == 0
        if self.method == "GET" and bucket_level and "list-type" in self.query:
            return "LIST"
        if self.method == "GET" and bucket_level and not self.query:
            return "LIST"  # ListObjects v1
        return self.method


class _Recorder:
    """The WSGI app around moto's: records each request once answered."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app
        self.requests: list[Request] = []
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        seen: dict[str, int] = {}

        def recording_start(status: str, headers: Any, *args: Any) -> Any:
            seen["status"] = int(status.split()[0])
            return start_response(status, headers, *args)

        result = self.app(environ, recording_start)
        headers = {
            key[5:].replace("_", "-").lower(): str(value)
            for key, value in environ.items()
            if key.startswith("HTTP_IF_")
        }
        request = Request(
            environ["REQUEST_METHOD"],
            environ.get("PATH_INFO", ""),
            parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True),
            seen.get("status", 0),
            headers,
        )
        with self.lock:
            self.requests.append(request)
        return result


class _QuietHandler(MotoRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:  # no line per request on stderr
        pass


class S3Server:
    """moto's S3 server on 127.0.0.1 (a free port), recording requests; a context manager."""

    def __init__(self) -> None:
        self._recorder = _Recorder(DomainDispatcherApplication(create_backend_app))
        self._server: BaseWSGIServer = make_server(
            "127.0.0.1", 0, self._recorder, threaded=True, request_handler=_QuietHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> S3Server:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._thread.join()

    @property
    def requests(self) -> list[Request]:
        with self._recorder.lock:
            return list(self._recorder.requests)

    def reset(self) -> None:
        """Forget the requests recorded so far."""
        with self._recorder.lock:
            self._recorder.requests.clear()

    def count(self, kind: str, bucket: str | None = None, *, status: int | None = None) -> int:
        """How many requests of ``kind`` (LIST, PUT, GET...) to ``bucket`` (any: None)."""
        return sum(1 for r in self._of(kind, bucket) if status is None or r.status == status)

    def _of(self, kind: str, bucket: str | None) -> Iterable[Request]:
        for request in self.requests:
            if request.kind != kind:
                continue
            if bucket is not None and request.path.strip("/").split("/")[0] != bucket:
                continue
            yield request

    def storage_block(self, **extra: Any) -> dict[str, Any]:
        """The project's ``storage:`` block for this server (a YAML mapping / model data)."""
        return {
            "endpoint_url": self.endpoint_url,
            "allow_http": True,
            "region": REGION,
            "access_key_id": ACCESS_KEY_ID,
            "secret_access_key": SECRET_ACCESS_KEY,
            **extra,
        }

    def client(self) -> Any:
        """A plain boto3 client of this server (to set up buckets and keys)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY_ID,
            aws_secret_access_key=SECRET_ACCESS_KEY,
        )

    def new_bucket(self, prefix: str = "wa") -> str:
        """A new, empty bucket with a unique name."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name


def load_keys(bucket: str, keys: Iterable[str], body: bytes = b"{}\n") -> int:
    """Put ``keys`` straight into the in-process server's store (fast set-up of many keys; the
    server then answers for them like for any other); how many were put."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    count = 0
    for key in keys:
        backend.put_object(bucket, key, body)
        count += 1
    return count


def put_keys(client: Any, bucket: str, keys: Iterable[str], *, threads: int = 16) -> int:
    """Put an empty-JSON object at each key, ``threads`` at a time; how many were put."""
    from concurrent.futures import ThreadPoolExecutor

    def one(key: str) -> None:
        client.put_object(Bucket=bucket, Key=key, Body=b"{}\n")

    with ThreadPoolExecutor(threads) as pool:
        return sum(1 for _ in pool.map(one, keys))


def chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
