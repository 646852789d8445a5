"""Sources as strategies: where rows come from and how a watermark's predicate reaches them.

Each column source (``table``: Delta, Parquet, CSV, JSON; ``jdbc``; ``http_api``) implements
:class:`watermark_assets.sources.column.ColumnSource`. The file-path sources (landing files
through Spark, another writer's Parquet files committed in place) move here in the reshape.
"""
