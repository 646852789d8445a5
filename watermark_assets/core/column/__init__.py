"""Kind ``"column"``: watermarks over an ordered tuple of table columns (seed 001).

Standard library only. Modules: ``serialization`` (JSON with sentinels), ``watermark`` (the value,
its order and the operators), ``predicate`` (push-down rendering), ``lookback`` (backward window
and lag), ``replay`` (chunks and ``save_watermark``), ``merge`` (merge key names, the run's key
values against a file's bounds).
"""

from watermark_assets.core.column.lookback import Backward, ReadBound, effective_lower_bound
from watermark_assets.core.column.predicate import (
    Comparison,
    Predicate,
    SqlDialect,
    below,
    leading_bound,
    predicate,
    quote_identifier,
    sql_literal,
    to_dnf,
    to_http_params,
    to_sql,
)
from watermark_assets.core.column.replay import ReplayChunk, chunks_to_run, watermark_to_save
from watermark_assets.core.column.serialization import dumps, loads
from watermark_assets.core.column.watermark import (
    ColumnValue,
    ColumnWatermark,
    Equal,
    GreaterOrEqual,
    GreaterThan,
    WatermarkOperator,
    greatest_row,
    is_watermark_empty,
)

__all__ = [
    "Backward",
    "ColumnValue",
    "ColumnWatermark",
    "Comparison",
    "Equal",
    "GreaterOrEqual",
    "GreaterThan",
    "Predicate",
    "ReadBound",
    "ReplayChunk",
    "SqlDialect",
    "WatermarkOperator",
    "below",
    "chunks_to_run",
    "dumps",
    "effective_lower_bound",
    "greatest_row",
    "is_watermark_empty",
    "leading_bound",
    "loads",
    "predicate",
    "quote_identifier",
    "sql_literal",
    "to_dnf",
    "to_http_params",
    "to_sql",
    "watermark_to_save",
]
