"""The IO managers: they load a pipeline's Delta table for downstream assets. Every kind's asset
commits in its body; an IO manager stores nothing."""

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


#: The resource key of the column engine's IO manager (column, time, unit pipelines).
COLUMN_IO_MANAGER_KEY = "column_watermark_io_manager"


class ColumnWatermarkIOManager(WatermarkDeltaIOManager):
    """Loads a column pipeline's table for downstream assets (a ``deltalake.DeltaTable``), as
    for the file pipelines; the asset commits in its body."""
