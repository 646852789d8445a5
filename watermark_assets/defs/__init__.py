"""Dagster glue: the only package of watermark_assets that imports dagster."""

from watermark_assets.defs.build import build_definitions

__all__ = ["build_definitions"]
