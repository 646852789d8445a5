"""One row per merge key, kept in Spark before the rows are written (a merge upserts each key once).

:func:`latest_per_key` is a lazy transformation (a window over the key columns, no action, nothing
collected to the driver); :func:`~watermark_assets.sources.column.stage_rows` applies it between
observing the rows read and writing them, so the next watermark is still observed over every row
read.

Which row is kept, for each key:

1. the one with the greatest watermark tuple (the watermark columns compared in their configured
   order, as the watermark is; a null watermark value is below every value);
2. ties on the whole tuple (the source holds the same key twice at the same watermark) are broken
   by the other columns, compared in the frame's column order, greatest first (Spark's ordering:
   nulls lowest, NaN above every number), so the same rows always keep the same row, whatever
   order the source delivered them in; rows equal in every column are one row. Map and variant
   columns cannot be ordered by Spark and take no part in this; two rows differing only there
   keep either one.

A row with a null in a key column is never grouped with another (each stays, and the Delta merge
refuses it with its column named: a row without a key cannot be merged).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

_NULL_KEY_ROW = "__watermark_assets_null_key_row"
_RANK = "__watermark_assets_rank"


def latest_per_key(
    frame: DataFrame, keys: Sequence[str], watermark_columns: Sequence[str]
) -> DataFrame:
    """``frame`` with one row per value of ``keys``: the greatest (module docstring)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    incomplete = F.lit(False)
    for key in keys:
        incomplete = incomplete | column_named(key).isNull()
    ordered = [*watermark_columns]
    ordered += [
        f.name
        for f in frame.schema.fields
        if f.name not in watermark_columns and f.name not in keys and orderable(f.dataType)
    ]
    window = Window.partitionBy(
        *(column_named(k) for k in keys), column_named(_NULL_KEY_ROW)
    ).orderBy(*(column_named(c).desc_nulls_last() for c in ordered))
    return (
        frame.withColumn(_NULL_KEY_ROW, F.when(incomplete, F.monotonically_increasing_id()))
        .withColumn(_RANK, F.row_number().over(window))
        .where(column_named(_RANK) == 1)
        .drop(_RANK, _NULL_KEY_ROW)
    )


def column_named(name: str) -> Column:
    """A top-level column by its name, whatever characters it holds (no nested-field parsing)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def orderable(data_type: DataType) -> bool:
    """Whether Spark can sort (and hash) a column of this type (maps and variants cannot)."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(data_type, MapType):
        return False
    if isinstance(data_type, StructType):
        return all(orderable(f.dataType) for f in data_type.fields)
    if isinstance(data_type, ArrayType):
        return orderable(data_type.elementType)
    return data_type.typeName() != "variant"
