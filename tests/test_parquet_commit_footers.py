"""A ``parquet_commit`` batch reads each file's Parquet footer ONCE: the same read gives the add
action's statistics and the schema the files are checked against (``schema.mode``). Before, the
schema check read every footer a second time (a remote object store: one more request a file)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_schema_file_commit import NEW, OLD, ingest, land


@pytest.mark.parametrize(
    ("schemas", "mode"),
    [
        pytest.param([OLD], "fail", id="one file"),
        pytest.param([OLD, OLD, OLD], "fail", id="three files, one schema"),
        pytest.param([OLD, NEW, NEW], "add_columns", id="three files, a column added"),
        pytest.param([OLD, NEW], "ignore", id="two files, a column ignored"),
    ],
)
def test_each_footer_is_read_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    schemas: list[pa.Schema],
    mode: str,
) -> None:
    table = tmp_path / "clicks"
    files = [
        land(table, f"a-{i:03d}.parquet", schema, [{"click_id": i, "page": "/a"}])
        for i, schema in enumerate(schemas)
    ]
    reads = Counter[str]()
    read_metadata, read_schema = pq.read_metadata, pq.read_schema

    def counted_metadata(where: Any, *args: Any, **kwargs: Any) -> pq.FileMetaData:
        reads[Path(str(where)).name] += 1
        return read_metadata(where, *args, **kwargs)

    def counted_schema(where: Any, *args: Any, **kwargs: Any) -> pa.Schema:
        reads[Path(str(getattr(where, "path", where))).name] += 1
        return read_schema(where, *args, **kwargs)

    monkeypatch.setattr(pq, "read_metadata", counted_metadata)
    monkeypatch.setattr(pq, "read_schema", counted_schema)

    result = ingest(table, *files, mode=mode)

    assert result.outcome.version == 0, result.outcome.reason
    assert reads == Counter({Path(f).name: 1 for f in files})
