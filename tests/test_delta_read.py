"""A Delta table's columns as the package reads them (``delta/read.read_columns``): the rows of
the table's current version, exactly what ``deltalake`` itself reads, and a process that ends
right after such a read ends normally.

``deltalake``'s own reader goes through a Python filesystem; Arrow's threads release its file
objects after the read returned, and a process ending at that moment aborted in the
interpreter's finalization ("terminate called without an active exception", exit status 134:
``watermark-assets explain PIPELINE MISSING_FILE`` in 2 of 3 runs, a bare read-and-exit in 15 of
20; on S3 in 8 of 12). Local and S3 tables are read through Arrow's own filesystems instead.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from watermark_assets import storage
from watermark_assets.delta.read import read_columns

#: the partition values a table holds: Delta percent-encodes them in folder names
VALUES = ["a b", "c*d", "e%f", "ü/x", "plain"]

#: case -> (the table's folder name, how it is written after the first commit)
CASES = {
    "a plain folder, two appends": ("table", "append"),
    "a space and a star in the folder's name": ("my table * 1", "append"),
    "a non-ASCII folder name": ("tabellé", "append"),
    "an overwrite: the removed files are not read": ("table", "overwrite"),
}


def write_table(uri: str, then: str) -> None:
    options = storage.delta_options(uri)
    first = pa.table({"k": VALUES, "v": list(range(len(VALUES)))})
    write_deltalake(uri, first, partition_by=["k"], storage_options=options)
    second = pa.table({"k": ["a b"], "v": [99]})
    write_deltalake(uri, second, partition_by=["k"], mode=then, storage_options=options)


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """Where the tables go: a folder, or a new bucket of the tests' S3 server (its settings
    installed); gives a table's URI by its folder name."""
    if request.param == "local":
        yield lambda name: str(tmp_path / name)
        return
    server = request.getfixturevalue("s3_storage")
    bucket = server.new_bucket()
    yield lambda name: f"s3://{bucket}/{name}"


def rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda row: (row["k"], row["v"]))


@pytest.mark.parametrize(("folder", "then"), CASES.values(), ids=CASES.keys())
def test_the_columns_read_are_the_current_versions_rows_as_deltalake_reads_them(
    store: Callable[[str], str], folder: str, then: str
) -> None:
    uri = store(folder)
    write_table(uri, then)
    table = DeltaTable(uri, storage_options=storage.delta_options(uri))

    read = read_columns(table, ["k", "v"])

    assert rows(read) == rows(table.to_pyarrow_table(columns=["k", "v"]))
    expected = len(VALUES) + 1 if then == "append" else 1
    assert read.num_rows == expected
    assert read.column_names == ["k", "v"]


#: a process that reads what a run or a command reads of a table, and ends at once: a column
#: (read_columns), or the txns of the table's last checkpoint (DeltaLog.checkpoint_txns, read
#: by every state read after a checkpoint)
READ_AND_EXIT = """
import sys
from deltalake import DeltaTable
from watermark_assets import storage
from watermark_assets.delta.committer import committer_for
from watermark_assets.delta.read import read_columns
uri, read, settings = sys.argv[1:]
storage.configure_from_portable(settings)
if read == "column":
    table = DeltaTable(uri, storage_options=storage.delta_options(uri))
    print(read_columns(table, ["k"]).num_rows)
else:
    print(committer_for(uri).log.checkpoint_txns("app")[0])
"""

#: fresh processes: on deltalake's own reader, at most a few in a run of this many end well
PROCESSES = 6


@pytest.mark.slow
@pytest.mark.spark  # processes (no JVM)
@pytest.mark.parametrize(
    ("read", "printed"),
    [
        pytest.param("column", str(len(VALUES) + 1), id="a column of the table's rows"),
        pytest.param("checkpoint", "1", id="the txns of its last checkpoint"),
    ],
)
def test_a_process_that_ends_right_after_reading_a_table_exits_normally(
    store: Callable[[str], str], read: str, printed: str
) -> None:
    uri = store("a table * here")
    write_table(uri, "append")
    DeltaTable(uri, storage_options=storage.delta_options(uri)).create_checkpoint()
    settings = storage.portable_settings()
    statuses = []
    for _ in range(PROCESSES):
        done = subprocess.run(
            [sys.executable, "-c", READ_AND_EXIT, uri, read, settings],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        statuses.append((done.returncode, done.stdout.strip(), done.stderr.strip()[-300:]))
    assert statuses == [(0, printed, "")] * PROCESSES


#: a location (an S3 endpoint configured or not) -> the filesystem Arrow reads it through (None:
#: deltalake's own) and the path in it
ARROW_FILESYSTEMS = {
    "a local path, as written": ("/data/my table *", False, "LocalFileSystem", "/data/my table *"),
    "deltalake's file URI, percent-decoded": (
        "file:///data/my%20table%20*",
        False,
        "LocalFileSystem",
        "/data/my table *",
    ),
    "S3 with an endpoint configured": (
        "s3://bucket/my%20table",
        True,
        "S3FileSystem",
        "bucket/my table",
    ),
    "S3 with no endpoint nor region known: deltalake's": ("s3://bucket/t", False, None, None),
    "a store Arrow has no filesystem for": ("memory://t", False, None, None),
}


@pytest.mark.parametrize(
    ("uri", "configured", "kind", "path"), ARROW_FILESYSTEMS.values(), ids=ARROW_FILESYSTEMS.keys()
)
def test_each_location_is_read_through_arrows_own_filesystem_where_it_has_one(
    monkeypatch: pytest.MonkeyPatch, uri: str, configured: bool, kind: str | None, path: str | None
) -> None:
    from watermark_assets.config.storage import StorageConfig

    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    previous = storage.installed()
    endpoint = {"endpoint_url": "http://127.0.0.1:9", "allow_http": True}
    storage.configure(StorageConfig.model_validate(endpoint) if configured else None)
    try:
        found = storage.arrow_filesystem(uri)
    finally:
        storage.configure(previous)
    if kind is None:
        assert found is None
    else:
        assert found is not None
        assert (type(found[0]).__name__, found[1]) == (kind, path)
