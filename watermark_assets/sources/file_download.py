"""Files downloaded by date over HTTP(S): ``https://host/files/file{date:%Y%m%d}.csv`` (seed 003).

The time watermark's window is pushed down as the *date in the name*: a window ``[start, end)``
downloads the files whose date is in it (:class:`~watermark_assets.core.time.file_dates.
DateTemplate`: one daily file for a daily window, a partial window ``[D, D 12:00)`` still the file
of day ``D``), each once per read. Abstinence and grace are the time watermark's: a window the
tick does not request downloads nothing.

- **URL.** The template's text is written as the names are (a space, ``*``, ``#`` as they are):
  each path segment is percent-encoded once the date is in (:func:`file_url`); query parameters
  are encoded as values. Do not percent-encode the template yourself (``%20`` would become
  ``%2520``).
- **Download.** Each file is fetched with the shared HTTP pieces of :mod:`.http_fetch`
  (``headers``, ``headers_env``, ``timeout_seconds``) and written under the table's staging
  folder, ``{table}/_staging/{time}-{token}-download/{date epoch}/data{ext}`` (a crashed run's
  folder is removed like any stale staging folder; a finished read's is removed once its rows
  are staged). Spark reads those files by literal path with ``schema_ddl`` (``csv``, ``ndjson``:
  one JSON object a line, ``json``: one JSON document or array a file, ``parquet``).
- **The time column.** With ``date_column`` the rows get that column, a ``TIMESTAMP`` holding
  their file's date (the rows need no time of their own). Without it the rows' own
  ``time_column`` is read. Either way the exact window is applied to the rows in Spark, so a row
  whose own time is outside its file's window is read by no window.
- **Missing files.** A 404 is a *missing* file (the server no longer keeps that day, or does not
  have it yet): ``missing: skip`` (default) lists it in :attr:`ColumnRead.missing`, and the run
  commits nothing for the window (its rows and high watermark stay as they were; a window
  without history runs again on the next tick); ``missing: fail`` fails the run. Any other
  error status, or no response, fails the run naming the URL (secrets redacted).
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import urllib.parse
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from watermark_assets import storage
from watermark_assets.config.sources import FileDownloadSourceConfig
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.core.column.predicate import Predicate, SqlDialect, to_sql
from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.time.file_dates import DateTemplate
from watermark_assets.core.urls import redact_url
from watermark_assets.exceptions import ConfigError, HttpApiError
from watermark_assets.sources.column import ColumnRead
from watermark_assets.sources.http_fetch import open_url, request_headers
from watermark_assets.spark import io
from watermark_assets.staging import remove_tree

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DownloadFormat = Literal["csv", "ndjson", "json", "parquet"]
#: format -> (Spark reader format, options implied by it)
_READERS: Mapping[str, tuple[str, Mapping[str, str]]] = {
    "csv": ("csv", {"header": "true"}),
    "ndjson": ("json", {}),
    "json": ("json", {"multiLine": "true"}),
    "parquet": ("parquet", {}),
}
_SAFE_SUFFIX = re.compile(r"(\.[A-Za-z0-9]{1,8})+$")


def file_url(template: DateTemplate, date: datetime) -> str:
    """The URL of the file dated ``date``: the template rendered, each path segment and query
    value percent-encoded (module docstring)."""
    parts = urllib.parse.urlsplit(template.render(date))
    path = "/".join(urllib.parse.quote(segment, safe="") for segment in parts.path.split("/"))
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    return urllib.parse.urlunsplit(
        parts._replace(path=path, query=urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote))
    )


@dataclass(frozen=True, kw_only=True)
class FileDownloadSource:
    """Dated files over HTTP(S), one window's files per read (module docstring)."""

    name: str
    #: the URL template, e.g. ``https://host/files/file{date:%Y%m%d}.csv``
    url: str
    format: DownloadFormat
    schema_ddl: str
    #: the time watermark's column
    time_column: str
    #: the column that receives each row's file date (None: the rows hold ``time_column``)
    date_column: str | None = None
    #: Spark reader options over the format's own (``header``, ``delimiter``...)
    options: Mapping[str, str] = field(default_factory=dict)
    missing: Literal["skip", "fail"] = "skip"
    headers: Mapping[str, str] = field(default_factory=dict)
    headers_env: Mapping[str, str] = field(default_factory=dict)
    timeout_seconds: float = 60.0
    #: where the downloads are written: the table's ``_staging`` folder
    staging_uri: str
    now: Clock = field(default=system_clock, repr=False, compare=False)
    env: Mapping[str, str] | None = field(default=None, repr=False, compare=False)

    @property
    def template(self) -> DateTemplate:
        return DateTemplate.parse(self.url)

    def read(self, spark: SparkSession, predicate: Predicate) -> ColumnRead:
        """Download the window's files, then a frame of their rows with the window applied."""
        window = _window_of(self.name, predicate)
        template = self.template
        folder = storage.join(
            self.staging_uri, f"{self.now():%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:12]}-download"
        )
        env = os.environ if self.env is None else self.env
        headers = request_headers(self.name, self.headers, self.headers_env, env)
        downloaded: list[str] = []
        fetched: list[str] = []
        missing: list[str] = []
        total = 0
        try:
            for date in template.dates_in(window):
                url = file_url(template, date)
                suffix = _SAFE_SUFFIX.search(posixpath.basename(urllib.parse.urlsplit(url).path))
                target = storage.join(
                    folder, f"{int(date.timestamp())}/data{suffix.group(0) if suffix else ''}"
                )
                size = self._download(url, target, headers)
                if size is None:
                    missing.append(redact_url(url))
                    continue
                total += size
                downloaded.append(target)
                fetched.append(redact_url(url))
            frame = self._frame(spark, downloaded)
        except BaseException:
            remove_tree(folder)  # the run fails: nothing of it is kept
            raise
        residual = to_sql(predicate, SqlDialect.SPARK)
        return ColumnRead(
            frame=frame.where(residual),
            pushed_down="files: " + (", ".join(fetched + missing) or "(no file dated in window)"),
            details={
                "files_downloaded": fetched,
                "files_missing": missing,
                "bytes_downloaded": total,
                "residual_filter": residual,
            },
            missing=tuple(missing),
            scratch_uri=folder,
        )

    def _download(self, url: str, target: str, headers: Mapping[str, str]) -> int | None:
        """Write the file at ``url`` to ``target``; its size, or None for a missing file."""
        fix = "Nothing was committed; fix the server or the source's url, headers, then re-run"
        try:
            with open_url(url, headers=headers, timeout=self.timeout_seconds, fix=fix) as response:
                fs, path = storage.filesystem(target)
                fs.makedirs(posixpath.dirname(path), exist_ok=True)
                with fs.open(path, "wb") as out:
                    shutil.copyfileobj(response, out, 1 << 20)
                return int(fs.size(path))
        except HttpApiError as error:
            if error.status != 404:
                raise
            if self.missing == "fail":
                raise HttpApiError(
                    redact_url(url),
                    404,
                    "the server has no such file",
                    "source.missing is 'fail'; set it to 'skip' to leave the window as it is "
                    "and try again on a later tick",
                ) from error
            return None

    def _frame(self, spark: SparkSession, files: list[str]) -> DataFrame:
        from pyspark.sql import functions as F

        if not files:
            ddl = self.schema_ddl
            if self.date_column is not None:
                ddl += f", `{self.date_column.replace('`', '``')}` TIMESTAMP"
            return spark.createDataFrame([], ddl)
        spark_format, implied = _READERS[self.format]
        file_column = "_watermark_assets_downloaded_file"
        frame = io.read_files(
            spark,
            files,
            format=spark_format,
            schema=self.schema_ddl,
            options={**implied, **self.options},
            file_column=None if self.date_column is None else file_column,
        )
        if self.date_column is None:
            return frame
        # The file's date is the name of its folder (epoch seconds): no lookup table needed.
        seconds = F.regexp_extract(F.col(file_column), r"/(\d+)/[^/]*$", 1)
        dated = frame.withColumn(self.date_column, F.timestamp_seconds(seconds.cast("long")))
        return dated.drop(file_column)


def _window_of(name: str, predicate: Predicate) -> TimeWindow:
    """The window ``[start, end)`` of a time pipeline's read (``column >= start AND column <
    end``); a read without one is refused: this source downloads files by date."""
    bound = predicate.watermark
    upper = predicate.upper
    if (
        bound.is_empty
        or len(bound.columns) != 1
        or upper is None
        or not isinstance(bound.values[0], datetime)
        or not isinstance(upper.value, datetime)
    ):
        raise ConfigError(
            f"file_download source {name!r} reads time windows only (column >= start AND "
            f"column < end), not {to_sql(predicate, SqlDialect.SPARK)!r}; use it in a pipeline "
            "with watermark.kind: time",
            pipeline=name,
            key="source.type",
            value="file_download",
        )
    return TimeWindow(bound.values[0], upper.value)


def file_download_source(
    config: FileDownloadSourceConfig, name: str, watermark_columns: tuple[str, ...]
) -> FileDownloadSource:
    """The source ``config`` describes (``type: file_download``; ``staging_uri`` set by the time
    pipeline, whose one column is ``watermark_columns``)."""
    config.check_watermark(name, watermark_columns)  # ConfigError: a time pipeline's only
    assert config.staging_uri is not None
    return FileDownloadSource(
        name=name,
        url=config.url,
        format=config.format,
        schema_ddl=config.schema_ddl,
        time_column=watermark_columns[0],
        date_column=config.date_column,
        options=dict(config.options),
        missing=config.missing,
        headers=dict(config.headers),
        headers_env=dict(config.headers_env),
        timeout_seconds=config.timeout_seconds,
        staging_uri=config.staging_uri,
    )
