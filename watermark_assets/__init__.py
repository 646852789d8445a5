"""watermark_assets: watermark-based incremental ingestion on Spark into Delta Lake, for Dagster."""

__version__ = "0.1.0"
