"""The demo's HTTP API on loopback: ``GET /payments?since=ISO&until=ISO`` -> ``{"data": [...]}``.

``watermark-assets demo`` starts it on ``127.0.0.1`` (port :data:`DEFAULT_PORT` when free, else
any free one) and points the ``payments_api_daily`` pipeline at it through
``$WATERMARK_ASSETS_DEMO_API`` (the configuration's ``${WATERMARK_ASSETS_DEMO_API:-...}``
default is the default port). Under ``dagster dev`` (or ``dg dev``) the code location serves it
while it is loaded with the demo's configuration (:func:`serve_for_code_location`), so a run or
a UI backfill of that asset finds it; ``watermark-assets serve-demo-api`` serves it alone.
When nothing answers at the URL, a run fails saying so and how to start it. Standard library
only; the records come from :func:`~watermark_assets.demo.data.demo_payments` (no state).
"""

from __future__ import annotations

import json
import socket
import threading
import urllib.parse
from collections.abc import MutableMapping
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from watermark_assets.demo.data import demo_payments

API_ENV_VAR = "WATERMARK_ASSETS_DEMO_API"
DEFAULT_PORT = 8765
PATH = "/payments"


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # the demo prints its own lines
        pass

    def do_GET(self) -> None:
        parts = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(parts.query))
        try:
            if parts.path != PATH:
                raise LookupError(f"no such path {parts.path!r}; the demo API serves {PATH}")
            since, until = (_instant(query.get(k)) for k in ("since", "until"))
        except (LookupError, ValueError) as error:
            self._send(404 if isinstance(error, LookupError) else 400, {"error": str(error)})
            return
        self._send(200, {"data": demo_payments(since, until)})

    def _send(self, status: int, body: object) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _instant(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


def _port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class DemoApi:
    """The API served from a background thread; :meth:`stop` ends it."""

    def __init__(self, port: int = 0) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{PATH}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def start_demo_api(env: MutableMapping[str, str]) -> DemoApi | None:
    """Start the API and export its URL in ``env``; None when ``env`` already names an API
    (the user's own server)."""
    if env.get(API_ENV_VAR):
        return None
    api = DemoApi(DEFAULT_PORT if _port_is_free(DEFAULT_PORT) else 0)
    env[API_ENV_VAR] = api.url
    return api


def serve_for_code_location(
    env: MutableMapping[str, str], port: int = DEFAULT_PORT
) -> DemoApi | None:
    """The API on ``port`` for as long as this process lives, started by the code location
    loaded with the demo's configuration (its code server, or a run worker outside of one);
    None when ``env`` names an API of the user's own, or the port is taken: another process of
    the location (the code server, for its run workers) serves it, or something else does (then
    a run says that nothing answers as the demo API does)."""
    if env.get(API_ENV_VAR) or not _port_is_free(port):
        return None
    try:
        return DemoApi(port)
    except OSError:  # taken since the probe: another process of the location won the race
        return None


def serve_demo_api(port: int = DEFAULT_PORT) -> None:
    """Serve in the foreground until interrupted (``watermark-assets serve-demo-api``)."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
    print(f"demo API at http://127.0.0.1:{server.server_address[1]}{PATH} (Ctrl-C stops it)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
