"""A pipeline's schema policy (``schema:``): what a run does when its source's files stop
matching the declared schema (``source.schema``, Spark DDL; or, Parquet without one, the table's).

``mode``:

- ``fail`` (the default): the run stops before Spark writes anything, naming the file, the column
  and both types, and the fix;
- ``add_columns``: a column a file brings is read too (nullable, its ``hints`` type, else the
  Parquet footer's, else STRING) so that the commit adds it to the table; a value whose type
  changed still fails as in ``fail``;
- ``rescue``: never fails on a schema change: columns the schema lacks, and values that do not
  fit their declared type, go to the ``_rescued_data`` column as JSON with the row's source file
  (``{"col": "raw value", "_source": "..."}``); nothing becomes a silent NULL;
- ``ignore``: columns the schema lacks are left out, values that do not fit become NULL; both are
  counted and named in the run's metadata.

``hints``: ``{column: TYPE}`` (Spark types, e.g. ``{region: STRING, amount: DECIMAL(10,2)}``), the
type a column brought by a file is read as (``add_columns``), and the type an inferred column
takes whatever its values look like.

``infer`` (file pipelines reading CSV with a header or JSON lines, without ``source.schema``): the
first run infers the schema from the first ``sample_files`` files of its batch
(:mod:`~watermark_assets.sources.schema_inference`) and creates the table with it; every later
run reads with the table's columns, as if they were declared (a later file that looks different
goes through ``mode``).
"""

from __future__ import annotations

from enum import Enum

from pydantic import Field, field_validator

from watermark_assets.config.base import Model
from watermark_assets.exceptions import SparkSchemaError
from watermark_assets.spark.ddl import parse_read_schema


class SchemaMode(str, Enum):
    """What a run does when a file's columns or types differ from the declared schema."""

    FAIL = "fail"
    ADD_COLUMNS = "add_columns"
    RESCUE = "rescue"
    IGNORE = "ignore"


class SchemaPolicy(Model):
    """``schema:`` of a pipeline (module docstring)."""

    mode: SchemaMode = Field(
        default=SchemaMode.FAIL,
        description="fail (default: stop before anything is written, naming the file, the column "
        "and both types), add_columns (new columns become nullable table columns in the commit "
        "of the data that brought them), rescue (columns the schema lacks and values that do not "
        "fit go to _rescued_data as JSON with the source file) or ignore (left out / NULL, "
        "counted in the run's metadata).",
    )
    hints: dict[str, str] = Field(
        default_factory=dict,
        description="Types of columns a file brings, pinned: {column: Spark type}, e.g. "
        "{region: STRING, amount: 'DECIMAL(10,2)'} (add_columns reads them so; infer types "
        "them so whatever their values look like).",
    )

    infer: bool = Field(
        default=False,
        description="Without source.schema (CSV with a header, JSON lines): the first run infers "
        "the schema from a sample of its files (hints pin chosen columns) and creates the table "
        "with it; later runs read with the table's columns (default: false, source.schema "
        "required).",
    )
    sample_files: int = Field(
        default=10,
        ge=1,
        le=1000,
        description="infer: how many of the first run's files are sampled (their first "
        "records, in path order; default 10; without infer it is not used).",
    )

    @field_validator("mode", mode="before")
    @classmethod
    def _known_mode(cls, value: object) -> object:
        known = [m.value for m in SchemaMode]
        if isinstance(value, str) and value not in known:
            raise ValueError(f"schema.mode {value!r} is not a mode; give one of {known}")
        return value

    @field_validator("hints")
    @classmethod
    def _hint_types(cls, value: dict[str, str]) -> dict[str, str]:
        return {name: hint_type(name, text) for name, text in value.items()}

    def hint_of(self, column: str) -> str | None:
        """The hinted type of ``column`` (case-insensitive, as Spark matches columns), or None."""
        lowered = {name.lower(): text for name, text in self.hints.items()}
        return lowered.get(column.lower())


def hint_type(name: str, text: object) -> str:
    """``text`` as Spark's canonical type (``int``, ``decimal(10,2)``...) when it is one type,
    else ValueError naming ``schema.hints.<name>`` and an example."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(
            f"schema.hints.{name} {text!r} is not a Spark type; write e.g. STRING, BIGINT, "
            "DOUBLE, TIMESTAMP or 'DECIMAL(10,2)'"
        )
    quoted = "`" + name.replace("`", "``") + "`"
    try:
        columns = parse_read_schema(f"{quoted} {text}")
    except SparkSchemaError as error:
        raise ValueError(
            f"schema.hints.{name} {text!r} is not a Spark type ({error}); write e.g. STRING, "
            "BIGINT, DOUBLE, TIMESTAMP or 'DECIMAL(10,2)'"
        ) from None
    if len(columns) != 1 or columns[0].comment is not None or not columns[0].nullable:
        raise ValueError(
            f"schema.hints.{name} {text!r} is refused: give one type only (a new column is "
            "nullable), e.g. STRING"
        )
    return columns[0].type
