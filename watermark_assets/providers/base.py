"""The provider contract (seed 001): where a column watermark is kept, as raw JSON text.

Two shapes, one per way of storing:

- :class:`WatermarkProvider` keeps the watermark in its own store (a file, a PostgreSQL row):
  ``get_watermark(dataflow_id) -> str | None`` and ``update_watermark(dataflow_id, text, *,
  job_id, dataflow_run_id, keep=None) -> bool``, called after the destination commit succeeded.
- :class:`CommitCarriedProvider` keeps it *in the destination commit* (the Delta commit's
  ``commitInfo``): ``get_watermark`` reads it back, and ``commit_metadata(...)`` gives the entries
  the commit carries. There is no separate write, so data and watermark are atomic.

Providers never touch datetimes (seed, ADR-0004): they store and return the text the
:class:`~watermark_assets.providers.manager.WatermarkManager` serialised. They do not know the
watermark order either: the manager passes ``keep(existing_text) -> bool`` (True: the stored
watermark is at or above the new one, keep it), and the provider makes "read, decide, write" one
atomic step in its store. The order lives in one place (``ColumnWatermark``), the atomicity in
each backend.

``job_id`` is the Dagster job name, ``dataflow_run_id`` the Dagster run id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

Keep = Callable[[str], bool]
"""``keep(existing_text)``: True when the stored watermark must stay (it is not older)."""


@dataclass(frozen=True, kw_only=True)
class WatermarkRecord:
    """A stored watermark with its provenance (what the UI shows next to it)."""

    dataflow_id: str
    watermark: str
    """The raw JSON text, as the manager serialised it."""
    job_id: str | None
    dataflow_run_id: str | None
    updated_at: datetime | None
    """When the provider stored it (aware UTC); for Delta, the commit's timestamp."""
    delta_version: int | None = None
    """The Delta version of the commit that carries it (Delta provider only)."""
    boundary: str | None = None
    """The rows committed at the watermark's leading value, as JSON text
    (:class:`~watermark_assets.core.column.boundary.Boundary`); None: not recorded. Kept by the
    Delta commit that carries the watermark (every provider's commits carry one)."""


@runtime_checkable
class WatermarkReader(Protocol):
    """Reads a dataflow's watermark text."""

    name: str

    def get_watermark(self, dataflow_id: str) -> str | None:
        """The raw JSON text stored for ``dataflow_id``, or None when nothing is stored."""
        ...

    def get_record(self, dataflow_id: str) -> WatermarkRecord | None:
        """The stored text with its job, run and time, or None."""
        ...


@runtime_checkable
class WatermarkProvider(WatermarkReader, Protocol):
    """A provider with its own store, written after the destination commit succeeded."""

    def update_watermark(
        self,
        dataflow_id: str,
        watermark_value: str,
        *,
        job_id: str | None,
        dataflow_run_id: str | None,
        keep: Keep | None = None,
    ) -> bool:
        """Store ``watermark_value`` for ``dataflow_id`` unless ``keep(existing text)`` says the
        stored one stays; True when stored. Read, decision and write are one atomic step."""
        ...


@runtime_checkable
class CommitCarriedProvider(WatermarkReader, Protocol):
    """A provider whose store is the destination commit itself (no separate write)."""

    def commit_metadata(
        self,
        dataflow_id: str,
        watermark_value: str,
        *,
        job_id: str | None,
        dataflow_run_id: str | None,
    ) -> dict[str, str]:
        """The custom metadata entries the destination commit must carry."""
        ...
