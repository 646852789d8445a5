"""WatermarkManager: (de)serialisation, the watermark order, and "save only after the commit".

The manager is the only code between a pipeline and a provider (seed 001, "Contract"):

- ``get_watermark(dataflow_id) -> dict | None``: the seed's dict (sentinels decoded);
- ``load(dataflow_id, columns) -> ColumnWatermark``: the same as a value (empty when nothing is
  stored), checked against the configured columns;
- ``save_watermark(dataflow_id, watermark, *, job_id, dataflow_run_id) -> bool``: serialise and
  store through the provider;
- ``commit_then_save(dataflow_id, watermark, commit, *, job_id, dataflow_run_id)``: the order the
  seed requires ("the driver saves that value only after the destination write succeeds; on failure
  nothing is written"). ``commit(entries)`` makes the destination commit with ``entries`` in its
  custom metadata; if it raises, nothing is saved and the next run starts from the same watermark.

**Never backwards, in one place.** A save passes the provider ``keep(existing_text)``, which is
``ColumnWatermark.from_json(existing_text).covers(new)``: a stored watermark at or above the new
one stays, and the provider makes the read-decide-write atomic (a file lock, a row lock). For the
Delta provider the commit carries ``stored.merge(new)`` instead: the value read just before
committing. That read and the commit are atomic only under the committer's optimistic lock (a Delta
``txn`` app id per dataflow, which the runs layer uses); without it two concurrent commits of ONE
dataflow could record out of order, and the reader takes the newest commit. A stored text that
cannot be read raises; it is never overwritten blindly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, TypeVar

from watermark_assets.core.column import serialization
from watermark_assets.core.column.watermark import ColumnValue, ColumnWatermark
from watermark_assets.core.errors import ColumnMismatchError, WatermarkProviderError
from watermark_assets.providers.base import (
    CommitCarriedProvider,
    Keep,
    WatermarkProvider,
    WatermarkRecord,
)

T = TypeVar("T")

WatermarkInput: TypeAlias = ColumnWatermark | Mapping[str, ColumnValue | None]


class WatermarkManager:
    """Reads and saves column watermarks of dataflows through one provider (module docstring)."""

    def __init__(self, provider: WatermarkProvider | CommitCarriedProvider) -> None:
        self.provider = provider

    @property
    def saves_with_commit(self) -> bool:
        """True when the destination commit itself stores the watermark (Delta metadata)."""
        return isinstance(self.provider, CommitCarriedProvider)

    def get_watermark(self, dataflow_id: str) -> dict[str, Any] | None:
        """The seed's dict for ``dataflow_id``, or None when nothing is stored."""
        text = self.provider.get_watermark(dataflow_id)
        if text is None:
            return None
        value = serialization.loads(text)
        if value is not None and not isinstance(value, dict):
            return ColumnWatermark.from_json(text).as_dict()  # raises the precise error
        return value

    def get_record(self, dataflow_id: str) -> WatermarkRecord | None:
        """The stored text with its job, run and time (for the UI)."""
        return self.provider.get_record(dataflow_id)

    def load(self, dataflow_id: str, columns: Sequence[str]) -> ColumnWatermark:
        """The stored watermark over ``columns``, or the empty one (read everything).

        A stored watermark over other columns raises ColumnMismatchError: the configuration
        changed, and reading with the old values would be a guess.
        """
        return self.load_record(dataflow_id, columns)[0]

    def load_record(
        self, dataflow_id: str, columns: Sequence[str]
    ) -> tuple[ColumnWatermark, WatermarkRecord | None]:
        """:meth:`load` and the record it came from (its provenance, its boundary rows)."""
        record = self.provider.get_record(dataflow_id)
        text = None if record is None else record.watermark
        watermark = (
            ColumnWatermark.empty(columns) if text is None else ColumnWatermark.from_json(text)
        )
        return self._checked(watermark, columns), record

    @staticmethod
    def _checked(watermark: ColumnWatermark, columns: Sequence[str]) -> ColumnWatermark:
        if watermark.columns and watermark.columns != tuple(columns):
            raise ColumnMismatchError(tuple(columns), watermark.columns)
        return watermark if watermark.columns else ColumnWatermark.empty(columns)

    def save_watermark(
        self,
        dataflow_id: str,
        watermark: WatermarkInput,
        *,
        job_id: str | None = None,
        dataflow_run_id: str | None = None,
    ) -> bool:
        """Store ``watermark`` unless the stored one is at or above it; True when stored.

        Only for providers with their own store: the Delta provider saves with the commit
        (use :meth:`commit_then_save`).
        """
        provider = self.provider
        if not isinstance(provider, WatermarkProvider):
            raise WatermarkProviderError(
                f"the {provider.name} provider stores the watermark of {dataflow_id!r} in the "
                "destination commit, so it cannot be saved on its own; use "
                "WatermarkManager.commit_then_save (the commit carries it)",
                provider=provider.name,
                dataflow_id=dataflow_id,
            )
        new = _as_watermark(watermark)
        return provider.update_watermark(
            dataflow_id,
            new.to_json(),
            job_id=job_id,
            dataflow_run_id=dataflow_run_id,
            keep=_keep_unless_newer(new),
        )

    def commit_then_save(
        self,
        dataflow_id: str,
        watermark: WatermarkInput,
        commit: Callable[[Mapping[str, str]], T],
        *,
        job_id: str | None = None,
        dataflow_run_id: str | None = None,
    ) -> T:
        """Run ``commit(entries)``, then save ``watermark``; a failing commit saves nothing.

        ``entries`` is the custom metadata the destination commit must carry: the watermark entry
        for the Delta provider (the commit is the save), ``{}`` for the others (they save after
        ``commit`` returned). Returns what ``commit`` returned.
        """
        provider = self.provider
        new = _as_watermark(watermark)
        if isinstance(provider, CommitCarriedProvider):
            stored_text = provider.get_watermark(dataflow_id)
            if stored_text is not None:
                new = ColumnWatermark.from_json(stored_text).merge(new)
            entries = provider.commit_metadata(
                dataflow_id, new.to_json(), job_id=job_id, dataflow_run_id=dataflow_run_id
            )
            return commit(entries)
        result = commit({})
        self.save_watermark(dataflow_id, new, job_id=job_id, dataflow_run_id=dataflow_run_id)
        return result


def _as_watermark(watermark: WatermarkInput) -> ColumnWatermark:
    return watermark if isinstance(watermark, ColumnWatermark) else ColumnWatermark.of(watermark)


def _keep_unless_newer(new: ColumnWatermark) -> Keep:
    """``keep(existing_text)``: the stored watermark stays when it is at or above ``new``."""

    def keep(existing_text: str) -> bool:
        return ColumnWatermark.from_json(existing_text).covers(new)

    return keep
