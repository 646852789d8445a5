"""How a landing file's path is handed to Spark, and how Spark's lineage maps back to it.

A path string is not a literal path to Spark: three Hadoop behaviours stand in the way (each seen
with Spark 4 on the local file system, see ``tests/test_special_names.py``):

1. ``spark.read`` globs every path it is given: ``* ? [ ] { }`` and ``\\`` are pattern syntax, so
   ``a*.json`` also reads its neighbour ``aXY.json`` and ``a[.json`` fails. :func:`literal_path`
   escapes them with a backslash (Hadoop's glob then matches exactly that one file). Spark's
   internal ``__globPaths__=false`` option is not used: with several paths it returns every path
   once per glob-looking path (duplicated rows).
2. Spark reports ``_metadata.file_path`` as a URI: a space is ``%20``, ``%`` is ``%25``, ``#``
   ``%23``, ``?`` ``%3F``, but ``+`` stays ``+``. :func:`decoded_file_path` is the exact inverse.
3. Hadoop's checksumming local file system opens ``.NAME.crc`` next to each file through a relative
   URI, in which ``a:b`` reads as a URI scheme ("Relative path in absolute URI"). Landing files
   have no checksum files, so local sources are read through ``RawLocalFileSystem``
   (:func:`reader_options`), which reads ``:`` in names. Hadoop's glob builds the same kind of URI
   from every component of an escaped path, so a path that both needs escaping and holds ``:``
   cannot be read at all: :func:`unreadable_character` finds it, and planning holds it back
   (:class:`~watermark_assets.exceptions.UnreadablePathError`) before anything is read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import unquote

from watermark_assets.exceptions import UnreadablePathError

if TYPE_CHECKING:
    from pyspark.sql import Column

#: Characters of Hadoop's glob syntax (``org.apache.hadoop.fs.GlobPattern``), backslash first.
GLOB_CHARACTERS = "\\*?[]{}"
#: A URI scheme ('s3a:', 'file:') followed by the path's '/'; local sources are plain paths.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(?=/)")


#: ``true`` when Spark's Hadoop reads ``s3a://`` (hadoop-aws on the classpath); default false.
NATIVE_S3_CONF = "spark.watermark_assets.s3.native"


def native_s3(value: object) -> bool:
    """Whether a value of :data:`NATIVE_S3_CONF` turns Spark's own S3 reads on."""
    return str(value).strip().lower() == "true"


def spark_path(uri: str) -> str:
    """The path Spark's Hadoop file systems understand for a storage URI."""
    if uri.startswith("s3://"):
        return "s3a://" + uri.removeprefix("s3://")
    return uri.removeprefix("file://")


def literal_path(uri: str) -> str:
    """The path to give ``spark.read`` so that it reads exactly the file ``uri``, not a glob."""
    return "".join("\\" + c if c in GLOB_CHARACTERS else c for c in spark_path(uri))


def unreadable_character(uri: str) -> str | None:
    """The character that keeps Spark from reading the file ``uri`` literally, or None.

    That is ``:`` in a path that also holds a glob character (escaping makes Hadoop glob it, and
    its glob cannot build a path from a component holding ``:``). Every other character is read
    literally (see the module docstring).
    """
    path = _without_scheme(spark_path(uri))
    if ":" in path and any(c in path for c in GLOB_CHARACTERS):
        return ":"
    return None


def check_readable(source_uri: str, relative: str) -> None:
    """Raise :class:`UnreadablePathError` when Spark cannot read this landing file literally."""
    character = unreadable_character(f"{source_uri.rstrip('/')}/{relative}")
    if character is not None:
        glob = next(c for c in spark_path(source_uri) + "/" + relative if c in GLOB_CHARACTERS)
        raise UnreadablePathError(relative, character, glob)


def reader_options(source_uri: str) -> Mapping[str, str]:
    """Hadoop settings for the read of one batch (a reader's options reach its Hadoop conf).

    Local files are read through ``RawLocalFileSystem``: the default one looks for ``.NAME.crc``
    files (landing files have none) and fails on a name holding ``:``. The file system cache is
    keyed by scheme, not by settings, so it is bypassed for this read only.
    """
    scheme = _SCHEME.match(spark_path(source_uri))
    if scheme is not None and scheme.group(1) != "file":
        return {}
    return {
        "fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
        "fs.file.impl.disable.cache": "true",
    }


def decoded_file_path(encoded: Column) -> Column:
    """``_metadata.file_path`` (a URI string) as the file system path it names.

    Spark SQL's ``url_decode`` is ``java.net.URLDecoder``: it decodes every ``%XX`` (UTF-8) and
    turns ``+`` into a space. A path URI never holds a raw ``%`` (it is always ``%25``) and keeps
    ``+`` as it is, so writing ``+`` as ``%2B`` first makes the decoding exact. A value without
    ``%`` is its own decoding and skips it (most names: the decoder costs about 1 s per 500,000
    rows).
    """
    from pyspark.sql import functions as F

    decoded = F.url_decode(F.replace(encoded, F.lit("+"), F.lit("%2B")))
    # ``contains`` tests each byte before comparing; ``instr`` calls a comparison per byte.
    return F.when(encoded.contains("%"), decoded).otherwise(encoded)


def decoded_uri(encoded: str) -> str:
    """:func:`decoded_file_path` of one value, in Python: ``%XX`` sequences decoded as UTF-8,
    ``+`` kept (a path URI never writes a space as ``+``)."""
    return unquote(encoded, errors="strict") if "%" in encoded else encoded  # may raise


def relative_path(encoded: Column, source_uri: str) -> Column:
    """The landing path relative to ``source_uri`` of a ``_metadata.file_path`` value.

    The decoded value is ``scheme:`` + the source root + ``/`` + the relative path; the root's
    first occurrence is found after the scheme, which is shorter than it. A value outside the
    root gives a path no batch requested: the caller's lookup of it yields NULL, caught as
    untraced rows.
    """
    return relative_to_root(decoded_file_path(encoded), source_uri)


def relative_to_root(decoded: Column, source_uri: str) -> Column:
    """The path relative to ``source_uri`` of a decoded file path or URI (the lineage column of
    :func:`watermark_assets.spark.io.read_files`), or NULL outside the root."""
    from pyspark.sql import functions as F

    marker = root_marker(source_uri)
    # NULL where the root is not found (locate's 0), so the search runs once per row (a CASE on
    # it searched twice: in the condition and in the value).
    start = F.nullif(F.locate(marker, decoded), F.lit(0))
    return decoded.substr(start + len(marker), F.lit(1 << 30))


def root_marker(source_uri: str) -> str:
    """What precedes a file's relative path in its decoded path: the source root without its
    scheme, and ``/``."""
    return _without_scheme(spark_path(source_uri)).rstrip("/") + "/"


def _without_scheme(path: str) -> str:
    return _SCHEME.sub("", path, count=1)
