"""The file provider: one small JSON file per dataflow on any fsspec location.

``{root}/{dataflow_id}.json`` (the id percent-encoded, so it is one file name) holds::

    {"dataflow_id": "orders", "watermark": "<the watermark JSON text>",
     "job_id": "orders_job", "dataflow_run_id": "<Dagster run id>",
     "updated_at": "2026-04-03T09:16:02.120000+00:00"}

The watermark is kept as the manager's text, untouched (providers never parse watermarks).
Writes are atomic (``storage.write_text_atomic``: a temporary file then a rename, one PUT on S3),
and an update with ``keep`` is a compare-and-swap (``storage.replace_text_unless``): on a local
disk the read, the decision and the write happen under an exclusive lock on ``{file}.lock``; on S3
the write is conditional (``If-None-Match: *`` for the first version, ``If-Match`` on the ETag
read), and a writer that loses the race reads the winner's record and decides again. So
concurrent updates of one dataflow never go backwards and never lose the newest watermark.
"""

from __future__ import annotations

import json
from datetime import datetime

from watermark_assets import names, storage
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.core.errors import WatermarkProviderError
from watermark_assets.providers.base import Keep, WatermarkRecord


class FileWatermarkProvider:
    """Watermarks as JSON files under ``root_uri`` (local path, ``memory://``, ``s3://``...)."""

    name = "file"

    def __init__(self, root_uri: str, *, now: Clock = system_clock) -> None:
        self.root_uri = root_uri.rstrip("/")
        self._now = now

    def location(self, dataflow_id: str) -> str:
        """The file of ``dataflow_id``."""
        if not dataflow_id:
            raise WatermarkProviderError(
                "a dataflow id is needed to name its watermark file; got ''", provider=self.name
            )
        return storage.join(self.root_uri, names.provider_file(dataflow_id))

    def get_watermark(self, dataflow_id: str) -> str | None:
        record = self.get_record(dataflow_id)
        return None if record is None else record.watermark

    def get_record(self, dataflow_id: str) -> WatermarkRecord | None:
        uri = self.location(dataflow_id)
        text = storage.read_text(uri)
        return None if text is None else _record(uri, text)

    def update_watermark(
        self,
        dataflow_id: str,
        watermark_value: str,
        *,
        job_id: str | None,
        dataflow_run_id: str | None,
        keep: Keep | None = None,
    ) -> bool:
        uri = self.location(dataflow_id)
        envelope = json.dumps(
            {
                "dataflow_id": dataflow_id,
                "watermark": watermark_value,
                "job_id": job_id,
                "dataflow_run_id": dataflow_run_id,
                "updated_at": self._now().isoformat(),
            }
        )
        if keep is None:
            storage.write_text_atomic(uri, envelope)
            return True
        return storage.replace_text_unless(
            uri, envelope, keep=lambda current: keep(_record(uri, current).watermark)
        )


def _record(uri: str, text: str) -> WatermarkRecord:
    try:
        data = json.loads(text)
        watermark = data["watermark"]
        if not isinstance(watermark, str):
            raise TypeError(f"'watermark' is {watermark!r}, not the watermark's JSON text")
        updated_at = data.get("updated_at")
        return WatermarkRecord(
            dataflow_id=str(data.get("dataflow_id", "")),
            watermark=watermark,
            job_id=data.get("job_id"),
            dataflow_run_id=data.get("dataflow_run_id"),
            updated_at=None if updated_at is None else datetime.fromisoformat(updated_at),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise WatermarkProviderError(
            f"watermark file {uri!r} is not a watermark record ({exc!r}). It was not "
            "overwritten: inspect it, then fix or delete it (deleting means 'read everything')",
            provider="file",
        ) from exc
