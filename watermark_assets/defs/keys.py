"""A pipeline's asset key, made in one place: its ``key_prefix``, then its name.

Every Dagster object of a pipeline (its asset, checks, job selection, sensors' and partition
truths' events, the upstream edges of the pipelines reading its table) takes its key from
:func:`asset_key`; ``tests/test_layers.py`` refuses an ``AssetKey`` built from a pipeline's name
anywhere else. Without ``key_prefix`` the key is the pipeline's name, as it always was.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagster import AssetKey

if TYPE_CHECKING:
    from watermark_assets.config import AnyPipeline


def asset_key(pipeline: AnyPipeline) -> AssetKey:
    """The pipeline's asset key: ``[*key_prefix, name]``."""
    return AssetKey(list(pipeline.asset_key_path))


def node_name(pipeline: AnyPipeline) -> str:
    """The name of the op that materializes the pipeline's asset (Dagster's, from the key:
    ``sales__raw__orders`` for ``sales/raw/orders``; the pipeline's name without a prefix)."""
    return asset_key(pipeline).to_python_identifier()


def pipeline_name_of(key: AssetKey) -> str:
    """The pipeline whose asset ``key`` is: the key's last part (a pipeline's name is unique in
    its project, whatever its prefix)."""
    return key.path[-1]
