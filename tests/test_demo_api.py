"""The demo's HTTP API under `dagster dev`: the code location loaded with the demo's
configuration serves it (``demo/api.serve_for_code_location``), so a UI run or backfill of
``payments_api_daily`` finds it without a second terminal."""

from __future__ import annotations

import json
import socket
import urllib.request

from _ports import free_port

from watermark_assets.demo.api import API_ENV_VAR, serve_for_code_location


def get(port: int, query: str) -> object:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/payments?{query}", timeout=10) as r:
        return json.loads(r.read())


def test_the_code_location_serves_the_demo_api_once_per_port() -> None:
    port = free_port()
    api = serve_for_code_location({}, port)
    assert api is not None
    try:
        answer = get(port, "since=2024-01-28T00:00:00Z&until=2024-01-29T00:00:00Z")
        assert isinstance(answer, dict) and answer["data"], "a day of payments"
        # a run worker of the same location: the code server serves it already
        assert serve_for_code_location({}, port) is None
    finally:
        api.stop()


def test_an_api_of_the_users_own_is_left_alone() -> None:
    port = free_port()
    assert serve_for_code_location({API_ENV_VAR: "http://example.test/payments"}, port) is None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))  # still free: nothing was started
