"""docs/ui.md "In an existing Dagster project": the Python block, run as written in a project
folder of its own, gives Definitions holding the user's asset downstream of a pipeline's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from dagster import AssetKey, Definitions

ROOT = Path(__file__).resolve().parents[1]


def embedding_block() -> str:
    text = (ROOT / "docs" / "ui.md").read_text()
    found = re.search(r"<!-- python: embedding -->\s*```python\n(.*?)```", text, re.S)
    assert found, "docs/ui.md lost its embedding example"
    return found.group(1)


def test_the_embedding_example_merges_the_pipelines_into_a_users_definitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "landing").mkdir()
    pipeline = {
        "name": "orders",
        "source": {
            "type": "files",
            "uri": "landing",
            "format": "ndjson",
            "schema": "id BIGINT, updated_at TIMESTAMP",
        },
        "table": {"uri": "delta/orders"},
    }
    (tmp_path / "pipelines.yaml").write_text(yaml.safe_dump({"pipelines": [pipeline]}))
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(embedding_block(), "docs/ui.md", "exec"), namespace)
    defs = namespace["defs"]
    assert isinstance(defs, Definitions)
    graph = defs.resolve_asset_graph()
    assert set(graph.get(AssetKey("orders_report")).parent_keys) == {AssetKey("orders")}
    assert defs.resolve_job_def("orders_job") is not None
    assert defs.resolve_sensor_def("orders_sensor") is not None
