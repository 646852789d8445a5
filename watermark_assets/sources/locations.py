"""The folder a pipeline reads from, and whether it exists (never "Idle" when it does not).

A file-path pipeline's landing folder (``files``, ``parquet_commit``: the table folder), and the
source folder of a pipeline reading a Delta table, Parquet, CSV or JSON files (column, time and
unit pipelines). :func:`watermark_assets.storage.missing_folder` decides what "does not exist"
means (on S3: no object under the prefix, or no bucket).
"""

from __future__ import annotations

from watermark_assets import storage
from watermark_assets.config import AnyPipeline, source_folder
from watermark_assets.exceptions import LandingFolderMissingError


def missing_source(pipeline: AnyPipeline) -> LandingFolderMissingError | None:
    """The error of a pipeline whose folder does not exist (existing and empty is fine), or
    None (it exists, or the pipeline reads no folder)."""
    folder = source_folder(pipeline)
    if folder is None:
        return None
    uri, what = folder
    detail = storage.missing_folder(uri)
    return None if detail is None else LandingFolderMissingError(pipeline.name, uri, detail, what)


def check_source_folder(pipeline: AnyPipeline) -> None:
    """Raise :class:`LandingFolderMissingError` when the pipeline's folder does not exist."""
    problem = missing_source(pipeline)
    if problem is not None:
        raise problem
