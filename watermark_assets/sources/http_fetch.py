"""The HTTP requests of the HTTP sources (``http_api``, ``file_download``): standard library only.

- :func:`request_headers`: static headers plus the ones read from environment variables
  (``headers_env``: tokens stay out of the configuration); an unset variable is a
  :class:`~watermark_assets.exceptions.ConfigError` naming it.
- :func:`open_url`: one request with a timeout; a status >= 400 or no response raises
  :class:`~watermark_assets.exceptions.HttpApiError` with the status and the URL as
  :func:`redact_url` shows it (no password, no token).
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.client import HTTPResponse
from typing import cast

from watermark_assets.core.urls import redact_url as redact_url
from watermark_assets.exceptions import ConfigError, HttpApiError


def request_headers(
    source: str,
    headers: Mapping[str, str],
    headers_env: Mapping[str, str],
    env: Mapping[str, str],
) -> dict[str, str]:
    """``headers`` plus each ``headers_env`` header's value from ``env``."""
    resolved = dict(headers)
    for header, variable in headers_env.items():
        if variable not in env:
            raise ConfigError(
                f"HTTP source {source!r} reads header {header!r} from the environment "
                f"variable {variable!r}, which is not set; set it",
                pipeline=source,
                key="headers_env",
                value=variable,
            )
        resolved[header] = env[variable]
    return resolved


@contextmanager
def open_url(
    url: str,
    *,
    headers: Mapping[str, str],
    timeout: float,
    method: str = "GET",
    data: bytes | None = None,
    fix: str,
) -> Iterator[HTTPResponse]:
    """The response to one request (read it inside the ``with``); ``fix`` ends the message of
    the :class:`HttpApiError` raised for a status >= 400 or no response."""
    request = urllib.request.Request(url, data=data, headers=dict(headers), method=method)
    shown = redact_url(url)
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        snippet = exc.read(300).decode("utf-8", "replace")
        raise HttpApiError(shown, exc.code, f"{exc.reason}: {snippet!r}", fix) from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise HttpApiError(shown, None, f"no response ({exc})", _unreachable_fix(url)) from exc
    with response:
        yield cast(HTTPResponse, response)


def _unreachable_fix(url: str) -> str:
    fix = "Check that the server is reachable at this URL"
    if urllib.parse.urlsplit(url).hostname in ("127.0.0.1", "localhost", "::1"):
        fix += (
            " (a server on this machine: is it started? The demo's API is started by "
            "`watermark-assets demo` and by the demo's code location under `dagster dev`; "
            "`watermark-assets serve-demo-api` serves it alone)"
        )
    return fix
