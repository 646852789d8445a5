"""The sources the pipelines read, as external assets upstream of them: the UI's lineage shows
one node per source location (``source/data/sources/orders``) with an edge to every pipeline
that reads it, so pipelines sharing an upstream show it. A pipeline reading another pipeline's
table depends on that pipeline's asset instead (event-time pipelines name theirs already).

External assets are not materialized by this code location: the key is derived from the
source's location as the UI shows it (``source.location``: secrets masked), one component per
path segment, each reduced to letters, digits and ``_``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from dagster import AssetKey, AssetSpec

from watermark_assets.config import AnyPipeline
from watermark_assets.defs.keys import asset_key

#: the group of the external source assets in the UI
SOURCES_GROUP = "sources"


def source_location(pipeline: AnyPipeline) -> str | None:
    """Where the pipeline's rows come from, as the UI shows it; None for a source that is
    another pipeline (its asset is the upstream)."""
    source = getattr(pipeline, "source", None)
    if source is None or getattr(source, "type", None) == "pipeline":
        return None
    location = getattr(source, "location", None) or getattr(source, "uri", None)
    return None if location is None else str(location)


def source_key(location: str, cwd: str | None = None) -> AssetKey:
    """``data/sources/orders`` -> ``source/data/sources/orders``;
    ``GET http://127.0.0.1:8765/payments`` -> ``source/http/127_0_0_1_8765/payments``. A local
    path under ``cwd`` (default: the working directory, the project's root under ``dagster
    dev``) is named relative to it, so the key does not depend on where the project lies."""
    text = re.sub(r"^[A-Z]+ ", "", location.strip())  # an HTTP method before the URL
    local = text.removeprefix("file://")
    if os.path.isabs(local):
        root = os.path.abspath(cwd or os.getcwd())
        if os.path.commonpath([root, os.path.abspath(local)]) == root:
            text = os.path.relpath(local, root)
    parts = [re.sub(r"[^A-Za-z0-9_]+", "_", p).strip("_") for p in re.split(r"://|/", text)]
    return AssetKey(["source", *(p for p in parts if p)])


def _normal(uri: str) -> str:
    return uri.rstrip("/").removeprefix("file://")


def upstream_key(pipeline: AnyPipeline, pipelines: Sequence[AnyPipeline]) -> AssetKey | None:
    """The asset ``pipeline`` reads: another pipeline's whose table is its source, else its
    source's external asset; None when it names its upstreams itself (event time)."""
    location = source_location(pipeline)
    if location is None:
        return None
    for other in pipelines:
        if other is not pipeline and _normal(other.table.uri) == _normal(location):
            return asset_key(other)
    return source_key(location)


def source_specs(pipelines: Sequence[AnyPipeline]) -> list[AssetSpec]:
    """One external asset per source location the pipelines read (not another's table)."""
    readers: dict[AssetKey, list[AnyPipeline]] = {}
    for pipeline in pipelines:
        key = upstream_key(pipeline, pipelines)
        if key is not None and key.path[0] == "source" and len(key.path) > 1:
            readers.setdefault(key, []).append(pipeline)
    return [
        AssetSpec(
            key,
            description=f"A {found[0].source.type} source read by "
            f"{', '.join(p.name for p in found)}: {source_location(found[0])}",
            group_name=SOURCES_GROUP,
            kinds=_kinds(found[0].source),
            metadata={"source/location": source_location(found[0]) or ""},
        )
        for key, found in readers.items()
    ]


def _kinds(source: Any) -> set[str]:
    """The UI's icon: Dagster's kind for a Delta table, a JDBC URL's database (``postgresql``),
    else the source's type."""
    if source.type == "delta_table":
        return {"delta"}
    if source.type == "jdbc":
        return {str(source.url).split(":")[1] if str(source.url).count(":") > 1 else "jdbc"}
    return {source.type}


def with_upstream(asset: Any, key: AssetKey | None) -> Any:
    """``asset`` depending on ``key`` too (None: as it is)."""
    if key is None:
        return asset
    return asset.map_asset_specs(lambda spec: spec.merge_attributes(deps=[key]))
