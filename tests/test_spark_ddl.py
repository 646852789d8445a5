"""The DDL check of a source's ``schema``: the pure-Python parser agrees with Spark's own.

Spark's oracle is what ``spark.read_batch`` calls: ``DataFrameReader.schema(ddl)``, which parses
the string on the JVM with ``StructType.fromDDL`` (Spark's ``singleTableSchema`` rule). PySpark's
``_parse_datatype_string`` (behind ``pyspark.sql.types.StructType.fromDDL``) is not used: it
also accepts a lone type (``int``) and the legacy ``a: int`` form, which the reader refuses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import write_ndjson

from watermark_assets.exceptions import SparkSchemaError
from watermark_assets.spark.batch import CORRUPT_RECORD_COLUMN, ReadSpec, read_batch
from watermark_assets.spark.ddl import Column, parse_column_list, parse_read_schema

VALID = [
    pytest.param("id BIGINT, event_time TIMESTAMP, name STRING", id="the README's example"),
    pytest.param("id bigint, Name string", id="keywords in lower case and names in any case"),
    pytest.param(
        "a STRING, b INT, c BIGINT, d DOUBLE, e FLOAT, f BOOLEAN, g DATE, h TIMESTAMP, "
        "i TIMESTAMP_NTZ, j BINARY, k SMALLINT, l TINYINT, m LONG, n SHORT, o BYTE, p REAL, "
        "q INTEGER, r TIMESTAMP_LTZ",
        id="every primitive type and its aliases",
    ),
    pytest.param("price DECIMAL(10,2), d DECIMAL, e DECIMAL(5), f DEC(38, 0)", id="decimals"),
    pytest.param("tags ARRAY<STRING>", id="an array"),
    pytest.param("attrs MAP<STRING, ARRAY<INT>>", id="a map of arrays, closed by '>>'"),
    pytest.param("user STRUCT<id: BIGINT, name STRING>", id="a struct with and without colons"),
    pytest.param(
        "a ARRAY<STRUCT<x: MAP<STRING,ARRAY<DECIMAL(10,2)>>, y: STRUCT<z: INT>>>",
        id="nesting three levels deep",
    ),
    pytest.param("s STRUCT<>", id="an empty struct"),
    pytest.param(
        "s STRUCT<a: INT NOT NULL COMMENT 'inner', b STRING>", id="a struct field not null"
    ),
    pytest.param("id BIGINT NOT NULL COMMENT 'the id', n INT", id="not null and a comment"),
    pytest.param("id BIGINT COMMENT 'it''s' ", id="a comment with a doubled quote"),
    pytest.param("id BIGINT COMMENT 'one' \"two\"", id="adjacent strings make one comment"),
    pytest.param('id BIGINT COMMENT "double quoted"', id="a comment in double quotes"),
    pytest.param("`event id` STRING, `a``b` INT", id="backquoted names with a space, a backquote"),
    pytest.param("`a-b` INT, `x.y` STRING", id="backquoted names with a dash and a dot"),
    pytest.param("_id INT, a1 INT, 1a INT", id="names with digits and underscores"),
    pytest.param("int INT, string STRING, comment STRING, timestamp TIMESTAMP", id="keyword names"),
    pytest.param("id BIGINT -- the key\n, name STRING -- trailing", id="-- comments"),
    pytest.param("/* lead */ id /* mid */ BIGINT", id="block comments"),
    pytest.param("\n  id BIGINT,\n\tname STRING\n", id="newlines and tabs"),
    pytest.param(
        "a INTERVAL YEAR, b INTERVAL YEAR TO MONTH, c INTERVAL DAY TO SECOND, "
        "d INTERVAL HOUR TO MINUTE, e INTERVAL SECOND, f INTERVAL MONTH",
        id="year-month and day-time intervals",
    ),
    pytest.param("a INTERVAL, b VOID, c VARIANT, d NUMERIC(3,1), e DEC", id="rarer types"),
    pytest.param("a ARRAY < INT >, b MAP<INT,INT> NOT NULL", id="spaces inside angle brackets"),
    pytest.param(
        "a STRING COLLATE UTF8_LCASE NOT NULL, b STRING COLLATE system.builtin.UNICODE_CI",
        id="collations of strings",
    ),
]

INVALID = [
    pytest.param("", "at the end", id="an empty schema"),
    pytest.param("id BIGINT,", "at the end", id="a trailing comma"),
    pytest.param("id BIGNT", "'BIGNT'", id="a misspelt type"),
    pytest.param("id", "at the end", id="a name without a type"),
    pytest.param("BIGINT", "at the end", id="a type without a name"),
    pytest.param("id: BIGINT", "':'", id="a colon after a top-level name"),
    pytest.param("id BIGINT name STRING", "'name'", id="a missing comma"),
    pytest.param("event-id STRING", "'-'", id="an unquoted name with a dash"),
    pytest.param("event id STRING", "'id'", id="an unquoted name with a space"),
    pytest.param("`event id STRING", "'`'", id="an unclosed backquote"),
    pytest.param("tags ARRAY<STRING", "at the end", id="an unclosed array"),
    pytest.param("tags ARRAY", "'ARRAY'", id="an array without its element type"),
    pytest.param("attrs MAP<STRING>", "'>'", id="a map without its value type"),
    pytest.param("s STRUCT<a INT,>", "'>'", id="a trailing comma in a struct"),
    pytest.param("price DECIMAL(39,2)", "'DECIMAL'", id="a decimal precision above 38"),
    pytest.param("price DECIMAL(5,6)", "'DECIMAL'", id="a decimal scale above its precision"),
    pytest.param("price DECIMAL(1,2,3)", "'DECIMAL'", id="three decimal parameters"),
    pytest.param("code CHAR", "'CHAR'", id="char without a length"),
    pytest.param("n INT(11)", "'INT'", id="a length on an int"),
    pytest.param("id BIGINT NOT", "at the end", id="NOT without NULL"),
    pytest.param("id BIGINT COMMENT", "at the end", id="COMMENT without text"),
    pytest.param("id BIGINT COMMENT 'open", '"\'"', id="an unclosed comment string"),
    pytest.param("id BIGINT /* open", "'/*'", id="an unclosed block comment"),
    pytest.param("10L BIGINT", "'10L'", id="a name Spark reads as a number"),
    pytest.param("a INTERVAL MONTH TO YEAR", "'YEAR'", id="an interval from small to large"),
    pytest.param("a INTERVAL DAY TO DAY", "'DAY'", id="an interval DAY TO DAY"),
    pytest.param("id BIGINT;", "';'", id="a semicolon"),
    pytest.param("a INTERVAL HOUR TO HOUR", "'HOUR'", id="an interval HOUR TO HOUR"),
    pytest.param("a1.b INT", "'.'", id="an unquoted name with a dot"),
    pytest.param("é INT", "'é'", id="an unquoted name with a non-ASCII letter"),
    pytest.param("a INT NOT NULL NOT NULL", "'NOT'", id="NOT NULL twice"),
    pytest.param("a INT COMMENT 'x' NOT NULL", "'NOT'", id="NOT NULL after the comment"),
    pytest.param("a INT DEFAULT 1", "'DEFAULT'", id="a default value"),
    pytest.param("a ARRAY<>", "'<>'", id="an empty array type"),
    pytest.param("a INT COLLATE UTF8_LCASE", "'COLLATE'", id="a collation of an int"),
    pytest.param("code CHAR(3)", "'CHAR'", id="char, which the reader refuses"),
    pytest.param("s STRUCT<label: VARCHAR(10)>", "'VARCHAR'", id="a nested varchar"),
]


@pytest.mark.parametrize("ddl", VALID)
def test_valid_column_lists_parse(ddl: str) -> None:
    assert parse_read_schema(ddl)


@pytest.mark.parametrize(("ddl", "near"), INVALID)
def test_invalid_column_lists_name_the_position_and_the_fix(ddl: str, near: str) -> None:
    with pytest.raises(SparkSchemaError) as raised:
        parse_read_schema(ddl)
    error = raised.value
    assert error.ddl == ddl
    assert near in str(error)
    assert 0 <= error.position <= len(ddl)
    assert "'name TYPE, ...'" in str(error), "the message says how to write a schema"


@pytest.mark.parametrize(
    ("ddl", "columns"),
    [
        pytest.param(
            "`event id` BIGINT NOT NULL COMMENT 'key', tags array<string>",
            [
                Column("event id", "bigint", nullable=False, comment="key"),
                Column("tags", "array<string>"),
            ],
            id="names, canonical types, nullability and comments",
        ),
        pytest.param(
            "m MAP<STRING, STRUCT<a: DECIMAL(5), b INTERVAL DAY TO SECOND>>",
            [Column("m", "map<string,struct<a:decimal(5,0),b:interval day to second>>")],
            id="nested types in Spark's spelling",
        ),
        pytest.param(
            "`a``b` INT COMMENT 'it''s' ' \\'here\\''",
            [Column("a`b", "int", comment="it's 'here'")],
            id="escaped backquotes and quotes",
        ),
    ],
)
def test_the_columns_read_back(ddl: str, columns: list[Column]) -> None:
    assert parse_column_list(ddl) == columns


def test_char_and_varchar_are_spark_ddl_that_the_file_reader_refuses() -> None:
    ddl = "code CHAR(3), label VARCHAR(10)"
    assert parse_column_list(ddl) == [Column("code", "char(3)"), Column("label", "varchar(10)")]
    with pytest.raises(SparkSchemaError, match="expected STRING") as raised:
        parse_read_schema(ddl)
    assert (raised.value.position, raised.value.token) == (5, "CHAR")


def _spark_accepts(spark: Any, ddl: str) -> bool:
    from pyspark.errors.exceptions.captured import CapturedException

    try:
        spark.read.schema(ddl)  # parses on the JVM: ParseException, AnalysisException, ...
    except CapturedException:
        return False
    return True


def _ours_accepts(ddl: str) -> bool:
    try:
        parse_read_schema(ddl)
    except SparkSchemaError:
        return False
    return True


@pytest.mark.spark
@pytest.mark.parametrize("ddl", [*VALID, *(pytest.param(p.values[0], id=p.id) for p in INVALID)])
def test_the_parser_agrees_with_the_spark_reader(spark: Any, ddl: str) -> None:
    assert _ours_accepts(ddl) == _spark_accepts(spark, ddl)


@pytest.mark.spark
@pytest.mark.parametrize(
    "ddl",
    [
        pytest.param("id BIGINT, name STRING", id="a plain column list"),
        pytest.param("id BIGINT, name STRING -- the last column", id="ending with a -- comment"),
    ],
)
def test_the_reader_adds_its_corrupt_record_column_after_any_schema(
    spark: Any, tmp_path: Path, ddl: str
) -> None:
    """``read_batch`` appends the corrupt-record column to the schema: a trailing ``--`` comment
    must not swallow it, and a malformed line still lands in it."""
    landing = tmp_path / "landing"
    write_ndjson(landing, "1706450400-a.ndjson", [{"id": 1, "name": "a"}, "not json"])
    spec = ReadSpec(
        source_uri=str(landing),
        files=["1706450400-a.ndjson"],
        file_partitions={"1706450400-a.ndjson": "2024-01-28"},
        format="ndjson",
        schema_ddl=ddl,
        csv_options={},
        derived_columns={},
        partition_by=[],
        ingested_at_iso="2024-01-28T15:00:00+00:00",
    )
    frame, has_corrupt = read_batch(spark, spec)
    rows = sorted(frame.select("id", "name", CORRUPT_RECORD_COLUMN).collect(), key=str)
    assert has_corrupt
    assert [tuple(row) for row in rows] == [(1, "a", None), (None, None, "not json")]
