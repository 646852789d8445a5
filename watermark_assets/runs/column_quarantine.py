"""Quarantine of a column source's malformed records: the file kind's quarantine table, each record
once.

A CSV or JSON column source hands its unparsable records to the run
(:attr:`~watermark_assets.sources.column.ColumnRead.malformed`), counted while the rows are
written. When there are some, a second pass writes them, in the file kind's quarantine shape
(:data:`~watermark_assets.spark.batch.QUARANTINE_SCHEMA`: ``_source_file`` relative to the source
folder, ``_ingested_at``, the raw text, the error; ``_dagster_partition`` NULL), into the table
``{table}_quarantine`` in ONE commit of their own, before the data commit. That commit is an
:class:`~watermark_assets.engine.write.Append` through :func:`~watermark_assets.engine.write.write`
of the files this module moved in itself (``placed``): ``write``'s crash points
(``before_windows_commit``, ``after_commit``) stay the data commit's, and a stale attempt's files
are removed here before the next attempt stages again.

Exactly once, by content: such a source is read whole on every run and its bad records stay in
its files, so a record already in the quarantine table (same ``_source_file`` and text) is not
quarantined again (a left anti join against the table). The commit carries the txn
``watermark_assets/{pipeline}/column_quarantine`` read before that join: a concurrent run that
quarantined meanwhile makes it stale, and the records are joined and written again. A run killed
after this commit and before its data commit re-reads its rows; its bad records are already
there, and stay once. The price: a source holding bad records pays a second pass over its files
and a read of the quarantine table on each run (the bad records are still in its files).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING

from watermark_assets import names, storage
from watermark_assets.delta.committer import TxnVersion, committer_for
from watermark_assets.delta.stats import describe_data_files
from watermark_assets.engine.execute import MAX_COMMIT_ATTEMPTS
from watermark_assets.engine.write import Append, RunRecord, write
from watermark_assets.exceptions import DeltaCommitError
from watermark_assets.sources.column import (
    CORRUPT_RECORD_COLUMN,
    RECORD_FILE_COLUMN,
    MalformedRecords,
)
from watermark_assets.staging import (
    list_parquet,
    move_into_table,
    remove_tree,
    staging_dir,
)
from watermark_assets.state.commit_metadata import QUARANTINE_METADATA_KEY

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from watermark_assets.runs.column_spec import ColumnSpec


#: The txn app id of a column pipeline's quarantine commits (its optimistic lock).
quarantine_app_id = names.column_quarantine_app_id


def quarantine_malformed(
    pipeline: ColumnSpec,
    malformed: MalformedRecords,
    spark: SparkSession,
    *,
    token: str,
    run_id: str,
    now: datetime,
) -> int:
    """Commit the read's malformed records not quarantined yet; how many were (module doc).

    Call it after the rows' write (the count of malformed records is observed there)."""
    if not int(malformed.counted.get.get("records", 0)):
        return 0
    return quarantine_records(pipeline, _records(malformed, now), spark, token=token, run_id=run_id)


def quarantine_null_watermark(
    pipeline: ColumnSpec,
    rows: DataFrame,
    spark: SparkSession,
    *,
    token: str,
    run_id: str,
    now: datetime,
) -> int:
    """Commit the rows with a NULL watermark column (``null_watermark: quarantine``) not
    quarantined yet, each as its JSON text with the source's location as ``_source_file``; how
    many were. Exactly once by content, as malformed records."""
    from pyspark.sql import functions as F

    from watermark_assets.spark.batch import (
        INGESTED_AT_COLUMN,
        PARTITION_KEY_COLUMN,
        SOURCE_FILE_COLUMN,
    )

    columns = pipeline.columns
    nulls = F.concat_ws(", ", *[F.when(F.col(f"`{c}`").isNull(), F.lit(c)) for c in columns])
    error = F.concat(F.lit("NULL watermark column(s): "), nulls)
    records = rows.select(
        F.lit(f"{pipeline.source.type} {pipeline.source.location}").alias(SOURCE_FILE_COLUMN),
        F.lit(now.isoformat()).cast("timestamp").alias(INGESTED_AT_COLUMN),
        F.lit(None).cast("string").alias(PARTITION_KEY_COLUMN),
        F.to_json(F.struct(*[F.col(f"`{c}`") for c in sorted(rows.columns)])).alias("raw_record"),
        error.alias("error"),
        F.lit(None).cast("bigint").alias("file_size"),
    )
    return quarantine_records(pipeline, records, spark, token=f"{token}-nulls", run_id=run_id)


def quarantine_records(
    pipeline: ColumnSpec,
    quarantined: DataFrame,
    spark: SparkSession,
    *,
    token: str,
    run_id: str,
) -> int:
    """Commit ``quarantined`` (in the quarantine table's columns) less the records the table
    holds already, in ONE commit under the pipeline's quarantine txn; how many were."""
    from pyspark.sql import Observation

    from watermark_assets.spark import io

    uri = pipeline.table.quarantine  # swept of crash leftovers by stage_column_batch
    committer = committer_for(uri)
    app_id = quarantine_app_id(pipeline.name)
    for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
        current = committer.transaction_version(app_id)  # before the table is read
        records = _new_records(spark, quarantined, uri)
        staging = staging_dir(uri, f"{token}-{attempt}")
        written = Observation("watermark_assets_column_quarantine")
        try:
            io.write_parquet(records.observe(written, _count()), staging)
            count = int(written.get.get("records", 0))
            if not count:
                return 0
            files = list_parquet(staging)
            moved = move_into_table(files, staging, uri, f"{token}-{attempt}")
        finally:
            remove_tree(staging)
        schema = storage.parquet_schema(storage.join(uri, moved[0]))
        committer.add_missing_columns(schema)  # metadata only (engine/write.py: not a mode)
        entry = json.dumps({"pipeline": pipeline.name, "kind": "column", "run_id": run_id})
        committed = write(
            committer,
            (),
            Append(),
            RunRecord((TxnVersion.next_of(app_id, current),), {QUARANTINE_METADATA_KEY: entry}),
            schema=schema,
            partition_by=[],
            placed=(describe_data_files(uri, moved, []),),
        )
        if not committed.outcome.stale:
            return count
        fs, root = storage.filesystem(uri)
        for path in moved:  # moved in, never committed: not part of the table
            fs.rm(f"{root}/{path}")
    raise DeltaCommitError(
        f"gave up quarantining {pipeline.name!r}'s malformed records in {uri!r} after "
        f"{MAX_COMMIT_ATTEMPTS} attempts: other runs of it kept quarantining. Nothing was "
        "committed by this run; run it again",
        table_uri=uri,
    )


def _count() -> Column:
    from pyspark.sql import functions as F

    return F.count(F.lit(1)).alias("records")


def _records(malformed: MalformedRecords, now: datetime) -> DataFrame:
    """The malformed records in the quarantine table's columns; ``error`` also names the
    columns that came out NULL of the record's partial parse (which is why it reads every
    column: Spark refuses a raw CSV/JSON scan for the corrupt-record column alone, and this
    way the second pass needs no cache of the whole source)."""
    from pyspark.sql import functions as F

    from watermark_assets.spark.batch import (
        INGESTED_AT_COLUMN,
        PARTITION_KEY_COLUMN,
        SOURCE_FILE_COLUMN,
    )
    from watermark_assets.spark.paths import relative_to_root

    frame = malformed.frame
    internal = (CORRUPT_RECORD_COLUMN, RECORD_FILE_COLUMN)
    unparsed = F.concat_ws(
        ", ",
        *[F.when(F.col(f"`{c}`").isNull(), F.lit(c)) for c in frame.columns if c not in internal],
    )
    error = F.concat(F.lit(malformed.reason + "; NULL after parsing: "), unparsed)
    return frame.where(F.col(CORRUPT_RECORD_COLUMN).isNotNull()).select(
        relative_to_root(F.col(RECORD_FILE_COLUMN), malformed.root).alias(SOURCE_FILE_COLUMN),
        F.lit(now.isoformat()).cast("timestamp").alias(INGESTED_AT_COLUMN),
        F.lit(None).cast("string").alias(PARTITION_KEY_COLUMN),
        F.col(CORRUPT_RECORD_COLUMN).alias("raw_record"),
        error.alias("error"),
        F.lit(None).cast("bigint").alias("file_size"),
    )


def _new_records(spark: SparkSession, records: DataFrame, uri: str) -> DataFrame:
    """``records`` without those the quarantine table already holds (same file, same text)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    from watermark_assets.spark import io
    from watermark_assets.spark.batch import SOURCE_FILE_COLUMN

    try:
        table = DeltaTable(uri, storage_options=storage.delta_options(uri))
    except TableNotFoundError:
        return records
    uris = table.file_uris()
    if not uris:
        return records
    keys = [SOURCE_FILE_COLUMN, "raw_record"]
    known = io.read_files(
        spark, uris, format="parquet", schema=f"{SOURCE_FILE_COLUMN} STRING, raw_record STRING"
    ).select(*keys)
    return records.join(known.distinct(), on=keys, how="left_anti")
