"""The folder a pipeline reads from, and whether it exists (never "Idle" when it does not); the
server it reads from, and whether it accepts a connection.

A file-path pipeline's landing folder (``files``, ``parquet_commit``: the table folder), and the
source folder of a pipeline reading a Delta table, Parquet, CSV or JSON files (column, time and
unit pipelines). :func:`watermark_assets.storage.missing_folder` decides what "does not exist"
means (on S3: no object under the prefix, or no bucket). A pipeline reading PostgreSQL (JDBC) or
an HTTP API: its host and port must take a TCP connection (:func:`unreachable_source`), checked
before the run reads anything, so that the error names the pipeline and ``source.url`` instead of
Spark's JDBC stack or a page request's.
"""

from __future__ import annotations

import socket
import urllib.parse

from watermark_assets import storage
from watermark_assets.config import (
    AnyPipeline,
    HttpApiSourceConfig,
    JdbcSourceConfig,
    source_folder,
)
from watermark_assets.exceptions import LandingFolderMissingError, SourceUnreachableError

#: seconds a connection to a source's server may take before it counts as unreachable
CONNECT_TIMEOUT = 5.0


def missing_source(pipeline: AnyPipeline) -> LandingFolderMissingError | None:
    """The error of a pipeline whose folder does not exist (existing and empty is fine), or
    None (it exists, or the pipeline reads no folder)."""
    folder = source_folder(pipeline)
    if folder is None:
        return None
    uri, what = folder
    detail = storage.missing_folder(uri)
    return None if detail is None else LandingFolderMissingError(pipeline.name, uri, detail, what)


def check_source_folder(pipeline: AnyPipeline) -> None:
    """Raise :class:`LandingFolderMissingError` when the pipeline's folder does not exist."""
    problem = missing_source(pipeline)
    if problem is not None:
        raise problem


def server_address(pipeline: AnyPipeline) -> tuple[str, str, int] | None:
    """(``source.url`` as shown, host, port) of a pipeline reading PostgreSQL through JDBC or an
    HTTP API; None for any other source, or a URL naming several hosts (PostgreSQL fail-over)."""
    from watermark_assets.core.urls import redact_url
    from watermark_assets.sources.jdbc import redacted_url

    source = getattr(pipeline, "source", None)
    if isinstance(source, JdbcSourceConfig):
        rest = source.url.removeprefix("jdbc:")
        if not rest.startswith("postgresql://"):  # jdbc:postgresql:DATABASE: this host
            return redacted_url(source.url), "localhost", 5432
        parts = urllib.parse.urlsplit(rest)
        if "," in parts.netloc.rpartition("@")[2]:
            return None
        return redacted_url(source.url), parts.hostname or "localhost", parts.port or 5432
    if isinstance(source, HttpApiSourceConfig):
        parts = urllib.parse.urlsplit(source.url)
        if parts.hostname is None:
            return None
        default = 443 if parts.scheme == "https" else 80
        return redact_url(source.url), parts.hostname, parts.port or default
    return None


def unreachable_source(
    pipeline: AnyPipeline, timeout: float = CONNECT_TIMEOUT
) -> SourceUnreachableError | None:
    """The error of a pipeline whose database or HTTP server takes no TCP connection, or None
    (it does, or the pipeline reads no server). Only reachability: a wrong password or table
    stays the reader's own error."""
    found = server_address(pipeline)
    if found is None:
        return None
    url, host, port = found
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as error:
        detail = error.strerror or str(error) or type(error).__name__
    kind = "database" if isinstance(pipeline.source, JdbcSourceConfig) else "server"
    fix = f"Start the {kind}, or fix the host and port in source.url (a typo, or it moved)"
    if kind == "server" and host in ("localhost", "127.0.0.1", "::1"):
        fix += (
            " (the demo's API: `watermark-assets demo` and the demo's code location under "
            "`dagster dev` start it, `watermark-assets serve-demo-api` serves it alone)"
        )
    return SourceUnreachableError(pipeline.name, url, f"{host}:{port}", detail, fix)


def check_source(pipeline: AnyPipeline) -> None:
    """Before a run reads anything: :class:`LandingFolderMissingError` when the pipeline's folder
    does not exist, :class:`SourceUnreachableError` when its database or server takes no
    connection."""
    check_source_folder(pipeline)
    problem = unreachable_source(pipeline)
    if problem is not None:
        raise problem
