"""The IO manager of the file-path assets: it loads a pipeline's Delta table for downstream
assets. The assets commit in their bodies (``defs/assets.py``), as every kind does."""

from __future__ import annotations

from typing import Any

from dagster import ConfigurableIOManager, InputContext, OutputContext
from deltalake import DeltaTable

from watermark_assets import storage


class WatermarkDeltaIOManager(ConfigurableIOManager):
    """Loads an ingestion asset's table as a ``deltalake.DeltaTable`` (its ``table_uri``
    definition metadata). Stores nothing: the asset's body made its Delta commit and returned
    its metadata."""

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        """Nothing to store: the asset committed in its body."""

    def load_input(self, context: InputContext) -> Any:
        upstream = context.upstream_output
        metadata = upstream.definition_metadata if upstream is not None else {}
        uri = metadata.get("table_uri")
        if not uri:
            raise ValueError(f"asset {context.asset_key} has no 'table_uri' definition metadata")
        return DeltaTable(str(uri), storage_options=storage.delta_options(str(uri)))
