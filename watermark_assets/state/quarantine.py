"""A data commit's quarantine, made exactly once: a data commit names its quarantine files, and a
reader that finds the quarantine commit missing (a kill between the two) completes it."""

from __future__ import annotations

import json

import pyarrow as pa

from watermark_assets import storage
from watermark_assets.config import Pipeline
from watermark_assets.delta.committer import TxnVersion, committer_for
from watermark_assets.delta.stats import describe_data_files
from watermark_assets.state.commit_metadata import QUARANTINE_METADATA_KEY, quarantine_app_id
from watermark_assets.state.load import PipelineState


def complete_quarantine(pipeline: Pipeline, state: PipelineState) -> list[int]:
    """Add the quarantine files of ``state.quarantine_pending`` to the quarantine table, exactly
    once and in data-version order; the data versions completed by this call.

    The data commit decided them (and moved the files into the quarantine table's folder); this
    only makes them visible. The quarantine table's txn of :func:`quarantine_app_id` holds the
    last data version completed: pending commits at or below it are done (by this process before
    a crash, or by another one), and a concurrent completion is a stale outcome, re-checked.
    """
    uri = pipeline.table.quarantine
    committer = committer_for(uri)
    app_id = quarantine_app_id(pipeline.name)
    done: list[int] = []
    for version, relative in state.quarantine_pending:
        while True:
            current = committer.transaction_version(app_id)
            if current is not None and current >= version:
                break
            files = describe_data_files(uri, relative, [])
            schema = pa.unify_schemas(
                [storage.parquet_schema(storage.join(uri, path)) for path in relative]
            )
            committer.add_missing_columns(schema)  # e.g. file_size, added after 0.1
            outcome = committer.commit(
                files,
                schema=schema,
                partition_by=[],
                txns=[TxnVersion(app_id, version, current)],
                custom_metadata={
                    QUARANTINE_METADATA_KEY: json.dumps(
                        {"pipeline": pipeline.name, "data_version": version}
                    )
                },
            )
            if not outcome.stale:
                done.append(version)
                break
    return done
