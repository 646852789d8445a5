"""A file-download source (issue 8 section 1, seed 003): the time window pushed down as the date
in the file names.

- Pure: a template ``file{date:%Y%m%d}.csv`` names one file per period; a window reads the files
  whose date is in it; templates and partitionings that would split a file are refused.
- End to end (real Spark, real Delta, a real loopback HTTP server keeping "the last 7 days of
  daily files" of a frozen clock, the seed's abstinent example): the server's request log shows
  exactly which files each run downloads.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import project_config
from dagster import DagsterInstance, ExecuteInProcessResult
from deltalake import DeltaTable

from watermark_assets.config import TimePipelineConfig
from watermark_assets.core.errors import FileTemplateError
from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.time import Partitioning
from watermark_assets.core.time.file_dates import DateTemplate, FilePeriod
from watermark_assets.defs import build_definitions
from watermark_assets.delta.committer import DeltaCommitter
from watermark_assets.exceptions import ConfigError
from watermark_assets.kinds.time.defs import decide_tick
from watermark_assets.kinds.time.run import load_time_watermark
from watermark_assets.sources.file_download import file_url
from watermark_assets.sources.http_fetch import redact_url
from watermark_assets.vocabulary import table_rows

UTC = timezone.utc


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# --- the template and the files of a window (pure) ---

WINDOW_FILES = {
    "a daily window reads its day's file": (
        "f{date:%Y%m%d}.csv",
        ("2020-01-15", "2020-01-16"),
        ["f20200115.csv"],
    ),
    "a partial window [D, D 12:00) still reads the file of day D": (
        "f{date:%Y%m%d}.csv",
        ("2020-01-15", "2020-01-15T12:00"),
        ["f20200115.csv"],
    ),
    "a weekly window reads 7 daily files": (
        "f{date:%Y-%m-%d}",
        ("2020-01-06", "2020-01-13"),
        [f"f2020-01-{d:02}" for d in range(6, 13)],
    ),
    "a monthly window reads its month's file": (
        "f{date:%Y%m}",
        ("2020-02-01", "2020-03-01"),
        ["f202002"],
    ),
    "a day reads 24 hourly files": (
        "f{date:%Y%m%d}/h{date:%H}",
        ("2020-01-15", "2020-01-16"),
        [f"f20200115/h{h:02}" for h in range(24)],
    ),
    "a day of the year names a day": ("f{date:%Y-%j}", ("2020-02-01", "2020-02-02"), ["f2020-032"]),
    "an effective range starting mid-day reads the files dated in it": (
        "f{date:%Y%m%d}",
        ("2020-01-15T12:00", "2020-01-17T06:00"),
        ["f20200116", "f20200117"],
    ),
    "a range inside one day reads no file": (
        "f{date:%Y%m%d}",
        ("2020-01-15T01:00", "2020-01-15T02:00"),
        [],
    ),
}


@pytest.mark.parametrize(
    ("template", "window", "names"), WINDOW_FILES.values(), ids=WINDOW_FILES.keys()
)
def test_a_window_reads_the_files_dated_in_it(
    template: str, window: tuple[str, str], names: list[str]
) -> None:
    parsed = DateTemplate.parse(template)
    dates = parsed.dates_in(TimeWindow(day(window[0]), day(window[1])))
    assert [parsed.render(d) for d in dates] == names


def test_the_finest_directive_is_the_file_period() -> None:
    assert DateTemplate.parse("x{date:%Y%m}").period is FilePeriod.MONTHLY
    assert DateTemplate.parse("x{date:%Y}/{date:%b}/{date:%d}").period is FilePeriod.DAILY
    assert DateTemplate.parse("x{date:%Y%m%d%H}").period is FilePeriod.HOURLY


BAD_TEMPLATES = {
    "no date field": ("http://h/file.csv", "no {date:...} field"),
    "a field that is not a date": ("http://h/{day:%Y}", "{day:%Y} is not a date field"),
    "minutes": ("http://h/{date:%Y%m%d%H%M}", "%M is not an accepted directive"),
    "a day without its month": ("http://h/{date:%Y%d}", "do not name one date"),
    "a month without its year": ("http://h/{date:%m%d}", "do not name one date"),
    "a year alone": ("http://h/{date:%Y}", "a year alone is no file period"),
    "an unmatched brace": ("http://h/{date:%Y%m%d}}", "unmatched brace"),
}


@pytest.mark.parametrize(("template", "problem"), BAD_TEMPLATES.values(), ids=BAD_TEMPLATES.keys())
def test_a_template_that_cannot_date_one_file_is_refused(template: str, problem: str) -> None:
    with pytest.raises(FileTemplateError) as caught:
        DateTemplate.parse(template)
    assert problem in str(caught.value) and repr(template) in str(caught.value)


FITS = {
    "daily files, daily windows": ("{date:%Y%m%d}", "daily", "2020-01-01", None),
    "daily files, monthly windows": ("{date:%Y%m%d}", "monthly", "2020-01-01", None),
    "hourly files, hourly windows": ("{date:%Y%m%d%H}", "hourly", "2020-01-01", None),
    "monthly files, unpartitioned": ("{date:%Y%m}", "none", "2020-01-15", None),
    "daily files, hourly windows": ("{date:%Y%m%d}", "hourly", "2020-01-01", "coarser"),
    "monthly files, daily windows": ("{date:%Y%m}", "daily", "2020-01-01", "coarser"),
    "daily files, windows from 10:00": (
        "{date:%Y%m%d}",
        "daily",
        "2020-01-01T10:00",
        "start at 2020-01-01T10:00:00.00:00, inside a daily file",
    ),
}


@pytest.mark.parametrize(
    ("template", "partition", "start", "refused"), FITS.values(), ids=FITS.keys()
)
def test_files_must_not_straddle_the_windows(
    template: str, partition: str, start: str, refused: str | None
) -> None:
    parsed = DateTemplate.parse("x" + template)
    if refused is None:
        parsed.check_fits(Partitioning(partition), day(start))
    else:
        with pytest.raises(FileTemplateError, match=refused):
            parsed.check_fits(Partitioning(partition), day(start))


def test_names_with_a_space_or_a_star_are_percent_encoded_once() -> None:
    template = DateTemplate.parse("http://h:8/daily files/file *{date:%Y%m%d}.csv?kind=a b")
    assert file_url(template, day("2020-01-15")) == (
        "http://h:8/daily%20files/file%20%2A20200115.csv?kind=a%20b"
    )


def test_secrets_in_urls_are_redacted() -> None:
    assert redact_url("https://me:pw@h/f.csv?api_key=s3&day=1") == (
        "https://me:***@h/f.csv?api_key=***&day=1"
    )
    assert redact_url("https://h/f.csv?day=1") == "https://h/f.csv?day=1"


# --- configuration ---


def download_pipeline(tmp_path: Path, url: str, **watermark: Any) -> dict[str, Any]:
    return {
        "name": "files",
        "source": {
            "type": "file_download",
            "url": url,
            "format": "csv",
            "schema": "id BIGINT, amount DOUBLE",
            "date_column": "file_date",
        },
        "watermark": {"kind": "time", "column": "file_date", "from": "2020-01-15", **watermark},
        "table": {"uri": str(tmp_path / "delta" / "files")},
    }


BAD_CONFIGS = {
    "a column pipeline": (
        {"watermark": {"kind": "column", "columns": ["file_date"]}},
        ["'file_download' source takes a 'time' watermark", "watermark.kind 'column'"],
    ),
    "a unit pipeline": (
        {"watermark": {"kind": "unit", "column": "id", "units": "a,b"}},
        ["'file_download' source takes a 'time' watermark", "watermark.kind 'unit'"],
    ),
    "hourly windows over daily files": (
        {
            "watermark": {
                "kind": "time",
                "column": "file_date",
                "from": "2020-01-15",
                "partition": "hourly",
            }
        },
        ["daily files are coarser than hourly windows"],
    ),
    "a watermark column that is not the date column": (
        {"watermark": {"kind": "time", "column": "id", "from": "2020-01-15"}},
        ["watermark.column 'id' must be source.date_column 'file_date'"],
    ),
    "a date column the rows already have": (
        {"source_date_column": "amount"},
        ["date_column 'amount' is already a column"],
    ),
    "a template without a date": ({"url": "http://h/files/today.csv"}, ["no {date:...} field"]),
}


@pytest.mark.parametrize(("change", "expected"), BAD_CONFIGS.values(), ids=BAD_CONFIGS.keys())
def test_a_bad_file_download_configuration_says_what_and_how_to_fix_it(
    tmp_path: Path, change: dict[str, Any], expected: list[str]
) -> None:
    raw = download_pipeline(tmp_path, change.pop("url", "http://h/file{date:%Y%m%d}.csv"))
    if "source_date_column" in change:
        raw["source"]["date_column"] = change.pop("source_date_column")
    raw.update(change)
    with pytest.raises(ConfigError) as caught:
        project_config(raw)
    for text in expected:
        assert text in str(caught.value)


def test_a_file_download_pipeline_needs_no_watermark_kind(tmp_path: Path) -> None:
    raw = download_pipeline(tmp_path, "http://h/file{date:%Y%m%d}.csv")
    del raw["watermark"]["kind"]
    pipeline = project_config(raw).pipeline("files")
    assert isinstance(pipeline, TimePipelineConfig)
    source = pipeline.source  # the table's staging folder, filled in when loaded
    assert source.staging_uri == f"{tmp_path}/delta/files/_staging"  # type: ignore[union-attr]


# --- end to end: a loopback server keeping the last 7 days of daily files ---


@dataclass
class FileServer:
    """``GET {folder}/{prefix}YYYYMMDD.csv``: two rows a day, for the last ``keep_days`` days of
    the frozen clock; 404 otherwise. ``requests``: the decoded paths asked, in order."""

    now: datetime
    folder: str = "/files"
    prefix: str = "file"
    keep_days: int = 7
    #: csv (two columns) or ndjson (records with their own updated_at, one a file from the
    #: day before: read by no window)
    format: str = "csv"
    failing: set[str] = field(default_factory=set)
    requests: list[str] = field(default_factory=list)
    raw_paths: list[str] = field(default_factory=list)
    url: str = ""

    def file_for(self, path: str) -> str | None:
        today = self.now.replace(hour=0, minute=0, second=0, microsecond=0)
        for back in range(self.keep_days):
            date = today - timedelta(days=back)
            if path != f"{self.folder}/{self.prefix}{date:%Y%m%d}.{self.format}":
                continue
            ids = [int(f"{date:%Y%m%d}") * 10 + k for k in range(2)]
            if self.format == "csv":
                return "id,amount\n" + "".join(f"{i},{k + 0.5}\n" for k, i in enumerate(ids))
            times = [date + timedelta(hours=6), date - timedelta(minutes=1)]
            return "".join(
                json.dumps({"id": i, "updated_at": t.isoformat()}) + "\n"
                for i, t in zip(ids, times)
            )
        return None

    def template(self) -> str:
        return f"{self.url}{self.folder}/{self.prefix}{{date:%Y%m%d}}.{self.format}"


@contextmanager
def file_server(now: datetime) -> Iterator[FileServer]:
    """A :class:`FileServer` on loopback, its clock at ``now``; stopped on exit."""
    files = FileServer(now=now)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            raw = urllib.parse.urlsplit(self.path).path
            path = urllib.parse.unquote(raw)
            files.raw_paths.append(raw)
            files.requests.append(path)
            body = files.file_for(path)
            status = 500 if path in files.failing else 200 if body is not None else 404
            payload = (body or f"status {status}").encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    files.url = f"http://127.0.0.1:{http.server_address[1]}"
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield files
    finally:
        http.shutdown()
        http.server_close()


@pytest.fixture
def server() -> Iterator[FileServer]:
    with file_server(day("2020-01-15T12:00")) as files:
        yield files


class Scene:
    """A file-download time pipeline over ``server``, run with a frozen clock."""

    def __init__(
        self,
        tmp_path: Path,
        server: FileServer,
        raw: dict[str, Any] | None = None,
        **watermark: Any,
    ) -> None:
        raw = raw or download_pipeline(tmp_path, server.template(), **watermark)
        self.config = project_config(raw)
        pipeline = self.config.pipeline("files")
        assert isinstance(pipeline, TimePipelineConfig)
        self.pipeline = pipeline
        self.server = server
        self.defs = build_definitions(self.config, clock=self)
        self.instance = DagsterInstance.ephemeral()

    def __call__(self) -> datetime:  # the clock of the code location and of the server
        return self.server.now

    def at(self, now: str) -> Scene:
        self.server.now = day(now)
        return self

    def due(self) -> list[str]:
        return list(decide_tick(self.pipeline, self.server.now).keys)

    def run(self, first: str | None = None, last: str | None = None) -> ExecuteInProcessResult:
        """Materialize ``first``..``last`` in one run (None: the unpartitioned job); the server's
        request log starts empty."""
        self.server.requests.clear()
        job = self.defs.resolve_job_def("files_job")
        tags = {}
        if last is not None:
            tags = {
                "dagster/asset_partition_range_start": first or "",
                "dagster/asset_partition_range_end": last,
            }
            first = None
        return job.execute_in_process(
            instance=self.instance, partition_key=first, tags=tags, raise_on_error=False
        )

    def rows(self) -> list[tuple[int, str]]:
        table = DeltaTable(self.pipeline.table.uri).to_pyarrow_table(columns=["id", "file_date"])
        return sorted(
            (i, f"{d:%Y%m%d}")
            for i, d in zip(table.column("id").to_pylist(), table.column("file_date").to_pylist())
        )


def windows_of(metadata: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``time/windows``' rows by their start."""
    return {row["start"]: row for row in table_rows(metadata["time/windows"])}


def metadata(result: ExecuteInProcessResult) -> dict[str, Any]:
    assert result.success
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert all(checks.values()), checks
    (materialization, *_) = result.asset_materializations_for_node("files")
    return {key: value.value for key, value in materialization.metadata.items()}


def rows_of(*days: str) -> list[tuple[int, str]]:
    return [(int(d) * 10 + k, d) for d in days for k in range(2)]


@pytest.mark.spark
def test_the_seeds_abstinent_7_downloads_only_the_new_file_each_day(
    spark: Any, tmp_path: Path, server: FileServer
) -> None:
    """Abstinent 7, a server keeping 7 days of daily files: "on 2020-01-15, file20200115 is
    generated, and file20200115 is downloaded; on 2020-01-16, file20200116 is generated, and
    file20200116 is downloaded, and file20200115 is ignored; on 2020-01-17, file20200117 is
    generated, and file20200117 is downloaded, and file20200116 and file20200115 are ignored"."""
    scene = Scene(tmp_path, server, abstinent_days=7)
    downloads = {}
    for today in ("20200115", "20200116", "20200117"):
        key = f"{today[:4]}-{today[4:6]}-{today[6:]}"
        scene.at(f"{key}T12:00")
        assert scene.due() == [key]
        meta = metadata(scene.run(key))
        downloads[today] = list(server.requests)
        window = windows_of(meta)[f"{key}T00:00:00Z"]
        assert window["pushed_down"] == f"files: {server.url}/files/file{today}.csv"
        assert window["high_watermark"] == f"{key}T12:00:00Z"  # the partial day, to now
    assert downloads == {d: [f"/files/file{d}.csv"] for d in downloads}
    assert scene.rows() == rows_of("20200115", "20200116", "20200117")


@pytest.mark.spark
def test_abstinent_0_downloads_yesterdays_file_again_without_duplicates(
    spark: Any, tmp_path: Path, server: FileServer
) -> None:
    """ "If Abstinent days is 0, then on 2020-01-16 ... it will repeat downloading file
    file20200115": the run replaces both its windows in ONE commit, so the table holds the
    re-downloaded file's rows once."""
    scene = Scene(tmp_path, server, abstinent_days=0)
    metadata(scene.at("2020-01-15T12:00").run("2020-01-15"))
    assert scene.at("2020-01-16T12:00").due() == ["2020-01-15", "2020-01-16"]
    before = DeltaCommitter(scene.pipeline.table.uri).current_version()

    meta = metadata(scene.run("2020-01-15", "2020-01-16"))

    assert server.requests == ["/files/file20200115.csv", "/files/file20200116.csv"]
    assert meta["delta/versions"] == [before + 1]  # type: ignore[operator]
    assert windows_of(meta)["2020-01-15T00:00:00Z"]["rows_removed"] == 2
    assert scene.rows() == rows_of("20200115", "20200116")


@pytest.mark.spark
def test_the_seeds_abstinent_1_unpartitioned(
    spark: Any, tmp_path: Path, server: FileServer
) -> None:
    """Abstinent 1: "on 2020-01-16, the effective range is 0, therefore the file is not
    downloaded; on 2020-01-17, the file starts downloading again"."""
    scene = Scene(tmp_path, server, **{"from": "2020-01-09"}, partition="none", abstinent_days=1)
    first = metadata(scene.at("2020-01-15").run())  # [01-09, 01-15): the 6 files kept
    assert server.requests == [f"/files/file202001{d:02}.csv" for d in range(9, 15)]
    assert first["replace/window"] == "[2020-01-09T00:00:00Z, 2020-01-15T00:00:00Z)"

    assert not decide_tick(scene.pipeline, day("2020-01-16")).runs
    metadata(scene.at("2020-01-16").run())  # even when run by hand: an empty range
    assert server.requests == []

    assert decide_tick(scene.pipeline, day("2020-01-17")).runs
    metadata(scene.at("2020-01-17").run())
    assert server.requests == ["/files/file20200116.csv"]
    # The range [01-15, 01-16) was abstained from: file20200115 was never downloaded.
    assert scene.rows() == rows_of(*(f"202001{d:02}" for d in (9, 10, 11, 12, 13, 14, 16)))


@pytest.mark.spark
def test_a_missing_day_is_reported_and_commits_nothing(
    spark: Any, tmp_path: Path, server: FileServer
) -> None:
    """A 404 (the server no longer keeps the day, or does not have it yet) is "missing": the run
    succeeds and says so; the window keeps its rows and high watermark, and a window without
    history stays due."""
    scene = Scene(tmp_path, server, **{"from": "2020-01-01"})
    metadata(scene.at("2020-01-15T12:00").run("2020-01-09"))  # kept today: downloaded
    assert scene.rows() == rows_of("20200109")
    version = DeltaCommitter(scene.pipeline.table.uri).current_version()
    watermark, _ = load_time_watermark(scene.pipeline)

    # Two days later the server no longer keeps 01-09; 01-02 it never had.
    meta = metadata(scene.at("2020-01-17T12:00").run("2020-01-02"))
    missing_url = f"{server.url}/files/file20200102.csv"
    assert meta["source/missing"] == [missing_url]
    assert windows_of(meta)["2020-01-02T00:00:00Z"]["missing"] == missing_url  # the one file
    assert "1 source file(s) missing" in meta["runs"]
    assert "2020-01-02" in scene.due()  # no history: the next tick asks for it again

    meta = metadata(scene.run("2020-01-09"))
    assert (
        meta["delta/versions"] == []
        and windows_of(meta)["2020-01-09T00:00:00Z"]["high_watermark"] is None
    )
    assert DeltaCommitter(scene.pipeline.table.uri).current_version() == version
    assert scene.rows() == rows_of("20200109")  # the rows are kept, not replaced by nothing
    assert load_time_watermark(scene.pipeline)[0] == watermark


@pytest.mark.spark
def test_missing_fail_fails_the_run_naming_the_file(
    spark: Any, tmp_path: Path, server: FileServer
) -> None:
    raw = download_pipeline(tmp_path, server.template(), **{"from": "2020-01-01"})
    raw["source"]["missing"] = "fail"
    scene = Scene(tmp_path, server, raw)
    result = scene.at("2020-01-15T12:00").run("2020-01-02")
    assert not result.success
    message = str(result.all_events)
    assert f"{server.url}/files/file20200102.csv failed (HTTP 404)" in message
    assert "source.missing is 'fail'" in message
    assert DeltaCommitter(scene.pipeline.table.uri).current_version() is None


@pytest.mark.spark
def test_a_name_with_a_space_or_a_star_is_quoted(
    spark: Any, tmp_path: Path, server: FileServer
) -> None:
    server.folder, server.prefix = "/daily files", "file *"
    scene = Scene(tmp_path, server)
    metadata(scene.at("2020-01-15T12:00").run("2020-01-15"))
    assert server.requests == ["/daily files/file *20200115.csv"]
    assert server.raw_paths[-1] == "/daily%20files/file%20%2A20200115.csv"
    assert scene.rows() == rows_of("20200115")


@pytest.mark.spark
def test_a_server_error_fails_the_run_and_commits_nothing(
    spark: Any, tmp_path: Path, server: FileServer
) -> None:
    server.failing.add("/files/file20200115.csv")
    raw = download_pipeline(tmp_path, server.template() + "?token=s3cret", **{})
    scene = Scene(tmp_path, server, raw)
    result = scene.at("2020-01-15T12:00").run("2020-01-15")
    assert not result.success
    message = str(result.all_events)
    assert f"{server.url}/files/file20200115.csv?token=*** failed (HTTP 500)" in message
    assert "s3cret" not in message
    assert DeltaCommitter(scene.pipeline.table.uri).current_version() is None
    staging = Path(scene.pipeline.table.uri) / "_staging"
    assert not staging.exists() or not any(staging.iterdir())  # the download folder is gone


@pytest.mark.spark
def test_ndjson_rows_with_their_own_time_are_filtered_to_the_window(
    spark: Any, tmp_path: Path, server: FileServer
) -> None:
    """Without date_column the rows' own time column is read: the window's filter keeps the row
    of 06:00 and drops the one stamped a minute before its file's day."""
    server.format = "ndjson"
    raw = download_pipeline(tmp_path, server.template(), column="updated_at")
    raw["source"].update(format="ndjson", schema="id BIGINT, updated_at TIMESTAMP")
    del raw["source"]["date_column"]
    scene = Scene(tmp_path, server, raw)
    meta = metadata(scene.at("2020-01-15T12:00").run("2020-01-15"))
    assert meta["rows/read"] == 1
    table = DeltaTable(scene.pipeline.table.uri).to_pyarrow_table(columns=["id"])
    assert table.column("id").to_pylist() == [202001150]
