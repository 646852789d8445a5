"""Shared fixtures: ONE Spark session per test session, configs and landing files on tmp_path."""

from __future__ import annotations

import gzip
import json
import os
import sys
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from watermark_assets.config import ProjectConfig, parse_config
from watermark_assets.sources.jdbc import postgres_jdbc_jar

# Spark's Python workers must run this interpreter (pyarrow, fsspec are installed here).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

TEST_SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
}
# The PostgreSQL JDBC driver (`make jdbc`) must be on the classpath when the ONE session starts;
# without the jar the JDBC tests skip and say why.
if postgres_jdbc_jar():
    TEST_SPARK_CONF["spark.jars"] = str(postgres_jdbc_jar())


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one Spark session of the test run (local[2])."""
    from watermark_assets.spark.session import get_spark

    session = get_spark("local[2]", TEST_SPARK_CONF)
    yield session
    session.stop()


def pipeline_yaml(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    """A file-path pipeline 'events' (``source.type: files``) reading hourly NDJSON landing
    folders under tmp_path."""
    pipeline: dict[str, Any] = {
        "name": "events",
        "source": {
            "type": "files",
            "uri": str(tmp_path / "landing"),
            "format": "ndjson",
            "schema": "id BIGINT, event_time TIMESTAMP, name STRING",
        },
        "watermark": {"partition_template": "date=%Y-%m-%d/hour=%H"},
        "table": {
            "uri": str(tmp_path / "delta" / "events"),
            "partition_by": ["event_date"],
            "derived_columns": {"event_date": "to_date(event_time)"},
        },
        "partitions": {"granularity": "daily", "start": "2024-01-01"},
        "checkpoint": {"interval_files": 1, "interval_secs": 0},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(pipeline.get(key), dict):
            pipeline[key] = {**pipeline[key], **value}
        else:
            pipeline[key] = value
    return pipeline


def project_config(*pipelines: dict[str, Any]) -> ProjectConfig:
    text = yaml.safe_dump(
        {"spark": {"master": "local[2]", "conf": TEST_SPARK_CONF}, "pipelines": list(pipelines)}
    )
    return parse_config(text, env={}, base=Path.cwd(), origin="test config")


def write_ndjson(root: Path, relative: str, records: Sequence[dict[str, Any] | str]) -> Path:
    """Write records (dicts, or raw lines for malformed ones) as gzip NDJSON at root/relative."""
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    opener = gzip.open if relative.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as handle:  # type: ignore[operator]
        handle.write("\n".join(lines) + "\n")
    return path


def event_records(first_id: int, count: int, when: datetime) -> list[dict[str, Any]]:
    stamp = when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [
        {"id": first_id + n, "event_time": stamp, "name": f"e{first_id + n}"} for n in range(count)
    ]
