"""Spark's DDL column lists (``id BIGINT, ts TIMESTAMP``), checked without starting Spark.

A source's ``schema`` is handed to Spark's reader (``DataFrameReader.schema``), which parses it
with Spark's SQL grammar (``singleTableSchema``) when the first batch is read. This module is a
small, pure-Python parser of the same grammar, so that the configuration refuses a schema Spark
would refuse when it is loaded, not when files are already being read. It follows Spark 4's
``SqlBaseParser.g4`` (``colTypeList``, ``complexColType``, ``dataType``) and the checks of its
``AstBuilder`` (type parameters, decimal precision); ``tests/test_spark_ddl.py`` runs a table of
strings through this parser and through Spark's own and asserts that they agree.

Accepted, case-insensitively: columns ``name TYPE [NOT NULL] [COMMENT 'text']`` separated by
commas; names plain (letters, digits, ``_``) or backquoted (```` `a b` ````, ```` `` ```` for a
backquote); the primitive types (``STRING``, ``INT``, ``BIGINT``, ``DECIMAL(p,s)``, ``CHAR(n)``,
``INTERVAL DAY TO SECOND``, ...) and the nested ``ARRAY<T>``, ``MAP<K, V>``, ``STRUCT<a: T, ...>``
(the colon is optional); ``STRING COLLATE name``; ``--`` and nested ``/* */`` comments.
:func:`parse_read_schema` also refuses ``CHAR``/``VARCHAR``, which Spark's file reader refuses.

Not checked here, left to Spark: whether a collation name exists (ICU locales are open-ended),
and duplicate column names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from watermark_assets.exceptions import SparkSchemaError

__all__ = ["Column", "columns_ddl", "parse_column_list", "parse_read_schema"]

#: Spark's primitive type keywords -> (the canonical name, how many parameters it takes).
_PRIMITIVES: Mapping[str, tuple[str, tuple[int, ...]]] = {
    "BOOLEAN": ("boolean", (0,)),
    "TINYINT": ("tinyint", (0,)),
    "BYTE": ("tinyint", (0,)),
    "SMALLINT": ("smallint", (0,)),
    "SHORT": ("smallint", (0,)),
    "INT": ("int", (0,)),
    "INTEGER": ("int", (0,)),
    "BIGINT": ("bigint", (0,)),
    "LONG": ("bigint", (0,)),
    "FLOAT": ("float", (0,)),
    "REAL": ("float", (0,)),
    "DOUBLE": ("double", (0,)),
    "DATE": ("date", (0,)),
    "TIMESTAMP": ("timestamp", (0,)),
    "TIMESTAMP_NTZ": ("timestamp_ntz", (0,)),
    "TIMESTAMP_LTZ": ("timestamp", (0,)),
    "STRING": ("string", (0,)),
    "BINARY": ("binary", (0,)),
    "VOID": ("void", (0,)),
    "VARIANT": ("variant", (0,)),
    "INTERVAL": ("interval", (0,)),
    "DECIMAL": ("decimal", (0, 1, 2)),
    "DEC": ("decimal", (0, 1, 2)),
    "NUMERIC": ("decimal", (0, 1, 2)),
    "CHAR": ("char", (1,)),
    "CHARACTER": ("char", (1,)),
    "VARCHAR": ("varchar", (1,)),
}
_COMPLEX = ("ARRAY", "MAP", "STRUCT")
_YEAR_MONTH = ("YEAR", "MONTH")
_DAY_TIME = ("DAY", "HOUR", "MINUTE", "SECOND")
_MAX_DECIMAL_PRECISION = 38
#: Words Spark's lexer reads as numbers, not names (10L, 2S, 1Y, 1D, 1F, 1BD, 1E5): quote them.
_NUMERIC_LITERAL = re.compile(r"\d+(?:[LSYDF]|BD|E\d+)?", re.IGNORECASE)

_TYPE_EXAMPLES = "STRING, INT, BIGINT, DOUBLE, BOOLEAN, DATE, TIMESTAMP, DECIMAL(10,2)"

# One token per match, tried in order; whitespace and comments are skipped by the tokenizer.
_TOKEN = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<line_comment>--[^\r\n]*)
    | (?P<block_comment>/\*)
    | (?P<backquoted>`(?:[^`]|``)*`)
    | (?P<unclosed_backquote>`)
    | (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
    | (?P<unclosed_string>['"])
    | (?P<word>[A-Za-z0-9_]+)
    | (?P<symbol><>|[<>(),:.])
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True)
class Column:
    """One column of a DDL column list: its name, its type (Spark's canonical spelling, e.g.
    ``array<struct<a:int>>``), whether it may be null and its comment."""

    name: str
    type: str
    nullable: bool = True
    comment: str | None = None


@dataclass(frozen=True)
class _Token:
    kind: str  # word | backquoted | string | symbol | end
    text: str
    position: int


def _tokens(ddl: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(ddl):
        match = _TOKEN.match(ddl, position)
        assert match is not None  # the last alternative matches any character
        kind = match.lastgroup or "other"
        if kind == "block_comment":
            position = _skip_block_comment(ddl, position)
            continue
        if kind in ("unclosed_backquote", "unclosed_string"):
            raise SparkSchemaError(
                ddl, position, match.group(), "a closing " + match.group() + " (it is never closed)"
            )
        if kind == "other":
            raise SparkSchemaError(
                ddl,
                position,
                match.group(),
                "letters, digits, '_' or one of , < > ( ) : . outside quotes (a name with "
                f"{match.group()!r} in it goes in backquotes)",
            )
        if kind not in ("space", "line_comment"):
            tokens.append(_Token(kind, match.group(), position))
        position = match.end()
    tokens.append(_Token("end", "", len(ddl)))
    return tokens


def _skip_block_comment(ddl: str, start: int) -> int:
    """The position after the ``/* ... */`` comment at ``start`` (they nest, as in Spark)."""
    depth, position = 0, start
    while position < len(ddl):
        if ddl.startswith("/*", position):
            depth, position = depth + 1, position + 2
        elif ddl.startswith("*/", position):
            depth, position = depth - 1, position + 2
            if depth == 0:
                return position
        else:
            position += 1
    raise SparkSchemaError(ddl, start, "/*", "a closing */ (the comment is never closed)")


class _Parser:
    def __init__(self, ddl: str) -> None:
        self.ddl = ddl
        self.tokens = _tokens(ddl)
        self.index = 0
        self.char_tokens: list[_Token] = []

    @property
    def token(self) -> _Token:
        return self.tokens[self.index]

    def fail(self, expected: str, token: _Token | None = None) -> SparkSchemaError:
        token = token or self.token
        return SparkSchemaError(self.ddl, token.position, token.text, expected)

    def advance(self) -> _Token:
        token = self.token
        self.index += 1
        return token

    def at_word(self, *words: str) -> bool:
        return self.token.kind == "word" and self.token.text.upper() in words

    def at_symbol(self, symbol: str) -> bool:
        return self.token.kind == "symbol" and self.token.text == symbol

    def expect_symbol(self, symbol: str, expected: str) -> None:
        if not self.at_symbol(symbol):
            raise self.fail(expected)
        self.advance()

    # --- colTypeList EOF

    def column_list(self) -> list[Column]:
        columns = [self.column(top_level=True)]
        while self.at_symbol(","):
            self.advance()
            columns.append(self.column(top_level=True))
        if self.token.kind != "end":
            raise self.fail("',' and the next column, or the end of the schema")
        return columns

    def name(self, what: str = "a column name") -> str:
        token = self.token
        if token.kind == "backquoted":
            self.advance()
            return token.text[1:-1].replace("``", "`")
        if token.kind == "word" and not token.text.isdigit():
            if _NUMERIC_LITERAL.fullmatch(token.text):
                raise self.fail(f"a name, not the number {token.text!r}: quote it (`{token.text}`)")
            self.advance()
            return token.text
        raise self.fail(f"{what} (letters, digits, '_', or any text in backquotes)")

    def column(self, *, top_level: bool) -> Column:
        name = self.name()
        if not top_level and self.at_symbol(":"):
            self.advance()
        data_type = self.data_type()
        nullable = True
        if self.at_word("NOT"):
            self.advance()
            if not self.at_word("NULL"):
                raise self.fail("NULL after NOT")
            self.advance()
            nullable = False
        comment = None
        if self.at_word("COMMENT"):
            self.advance()
            if self.token.kind != "string":
                raise self.fail("a quoted comment after COMMENT, e.g. COMMENT 'the user id'")
            # Adjacent literals are one string, as in Spark ('a' 'b' is 'ab').
            comment = ""
            while self.token.kind == "string":
                comment += _unquote(self.advance().text)
        return Column(name, data_type, nullable, comment)

    # --- dataType

    def data_type(self) -> str:
        token = self.token
        if token.kind != "word":
            raise self.fail(f"a type ({_TYPE_EXAMPLES}, ARRAY<...>, MAP<...>, STRUCT<...>)")
        keyword = token.text.upper()
        if keyword in _COMPLEX and (self.peek_symbol("<") or self.peek_symbol("<>")):
            self.advance()
            return self.complex_type(keyword)
        if keyword == "INTERVAL" and self.peek_word(*_YEAR_MONTH, *_DAY_TIME):
            self.advance()
            return self.interval_type()
        self.advance()
        if keyword in _COMPLEX:
            raise self.fail(f"{keyword}<...> with its element types, e.g. ARRAY<STRING>", token)
        if keyword not in _PRIMITIVES:
            raise self.fail(f"a Spark type ({_TYPE_EXAMPLES}, ...), not {token.text!r}", token)
        canonical, arities = _PRIMITIVES[keyword]
        parameters = self.type_parameters()
        if len(parameters) not in arities:
            wanted = {
                (0,): f"{keyword} without parameters",
                (1,): f"{keyword}(n) with one length, e.g. {keyword}(10)",
                (0, 1, 2): f"{keyword}(precision, scale), e.g. DECIMAL(10,2)",
            }
            raise self.fail(wanted[arities], token)
        if canonical in ("char", "varchar"):
            self.char_tokens.append(token)
        if canonical == "string" and self.at_word("COLLATE"):
            self.collation()
        return self.primitive(canonical, parameters, token)

    def collation(self) -> None:
        """``COLLATE name``: the name (``UTF8_LCASE``, ``UNICODE_CI``, an ICU locale, maybe
        qualified) is not checked here; Spark checks it when it reads."""
        self.advance()
        what = "a collation name after COLLATE, e.g. UTF8_LCASE"
        self.name(what)
        while self.at_symbol("."):
            self.advance()
            self.name(what)

    def peek_symbol(self, symbol: str) -> bool:
        following = self.tokens[self.index + 1]
        return following.kind == "symbol" and following.text == symbol

    def peek_word(self, *words: str) -> bool:
        following = self.tokens[self.index + 1]
        return following.kind == "word" and following.text.upper() in words

    def type_parameters(self) -> list[int]:
        if not self.at_symbol("("):
            return []
        self.advance()
        parameters = [self.integer()]
        while self.at_symbol(","):
            self.advance()
            parameters.append(self.integer())
        self.expect_symbol(")", "')' or ',' and another number")
        return parameters

    def integer(self) -> int:
        if self.token.kind == "word" and self.token.text.isdigit():
            return int(self.advance().text)
        raise self.fail("a whole number")

    def primitive(self, canonical: str, parameters: list[int], token: _Token) -> str:
        if canonical == "decimal":
            # DECIMAL is DECIMAL(10,0) and DECIMAL(p) is DECIMAL(p,0), as in Spark.
            precision = parameters[0] if parameters else 10
            scale = parameters[1] if len(parameters) == 2 else 0
            if precision > _MAX_DECIMAL_PRECISION:
                raise self.fail(f"a decimal precision of at most {_MAX_DECIMAL_PRECISION}", token)
            if scale > precision:
                raise self.fail(
                    f"a decimal scale ({scale}) not above its precision ({precision})", token
                )
            return f"decimal({precision},{scale})"
        if canonical in ("char", "varchar"):
            return f"{canonical}({parameters[0]})"
        return canonical

    def complex_type(self, keyword: str) -> str:
        if keyword == "STRUCT" and self.at_symbol("<>"):
            self.advance()
            return "struct<>"
        self.expect_symbol("<", "'<'")
        if keyword == "ARRAY":
            element = self.data_type()
            self.close_angle()
            return f"array<{element}>"
        if keyword == "MAP":
            key = self.data_type()
            self.expect_symbol(",", "',' between the key and the value type of MAP<K, V>")
            value = self.data_type()
            self.close_angle()
            return f"map<{key},{value}>"
        fields: list[str] = []
        if not self.at_symbol(">"):
            fields.append(self.struct_field())
            while self.at_symbol(","):
                self.advance()
                fields.append(self.struct_field())
        self.close_angle()
        return "struct<" + ",".join(fields) + ">"

    def struct_field(self) -> str:
        column = self.column(top_level=False)
        return f"{column.name}:{column.type}" + ("" if column.nullable else " not null")

    def close_angle(self) -> None:
        self.expect_symbol(">", "'>' closing the type")

    def interval_type(self) -> str:
        start_token = self.advance()
        start = start_token.text.upper()
        end = start
        if self.at_word("TO"):
            self.advance()
            allowed = ("MONTH",) if start in _YEAR_MONTH else _DAY_TIME[1:]
            if not self.at_word(*allowed):
                raise self.fail(" or ".join(allowed) + " after TO")
            end_token = self.advance()
            end = end_token.text.upper()
            units = _YEAR_MONTH if start in _YEAR_MONTH else _DAY_TIME
            if units.index(end) <= units.index(start):
                raise self.fail(f"a smaller unit than {start} after TO", end_token)
        if start == end:
            return f"interval {start.lower()}"
        return f"interval {start.lower()} to {end.lower()}"


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "b": "\b", "Z": "\x1a"}


def _unquote(literal: str) -> str:
    """The text of a quoted literal: backslash escapes, and a doubled quote is one quote."""
    quote, body = literal[0], literal[1:-1]

    def unescape(match: re.Match[str]) -> str:
        escaped = match.group(1)
        return quote if escaped is None else _ESCAPES.get(escaped, escaped)

    return re.sub(r"\\(.)|" + quote * 2, unescape, body, flags=re.DOTALL)


def parse_column_list(ddl: str) -> list[Column]:
    """The columns of a Spark DDL column list (Spark's ``singleTableSchema``); SparkSchemaError
    with the position if Spark's SQL parser would refuse it."""
    return _Parser(ddl).column_list()


def parse_read_schema(ddl: str) -> list[Column]:
    """The columns of a schema for Spark's file reader (``DataFrameReader.schema``): a column
    list without CHAR/VARCHAR, which the reader refuses (it reads text as STRING)."""
    parser = _Parser(ddl)
    columns = parser.column_list()
    if parser.char_tokens:
        raise parser.fail(
            "STRING: Spark's file reader refuses CHAR and VARCHAR in a read schema",
            parser.char_tokens[0],
        )
    return columns


def columns_ddl(columns: Iterable[tuple[str, str]]) -> str:
    """The DDL column list of ``(name, Spark type)`` pairs, every name backquoted (a name with a
    space, a ``*`` or a backquote stays one name)."""
    return ", ".join(f"`{name.replace('`', '``')}` {kind}" for name, kind in columns)
