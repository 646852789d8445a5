"""A Delta table's columns read with Arrow, the way every reader of the package reads them.

``deltalake``'s own ``to_pyarrow_table`` reads the data files through a Python filesystem
(``PyFileSystem`` over its storage handler): Arrow's reader threads then hold Python file
objects, which they release after the read has returned, and a process that ends right after
such a read can abort in the interpreter's finalization ("terminate called without an active
exception", exit status 134: ``watermark-assets explain`` did so in 2 of 3 runs).
:func:`read_columns` reads a local table through Arrow's own filesystem
(:func:`~watermark_assets.storage.arrow_filesystem`), which never calls back into Python; a
table on another store is read as ``deltalake`` reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from watermark_assets import storage

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

__all__ = ["read_columns"]


def read_columns(table: DeltaTable, columns: Sequence[str]) -> pa.Table:
    """``columns`` of every row of ``table``'s current version (module docstring)."""
    import pyarrow.fs as pafs

    uri = table.table_uri
    fs, _ = storage.filesystem(uri)
    reader = storage.arrow_filesystem(fs)
    if not isinstance(reader, pafs.LocalFileSystem):
        return table.to_pyarrow_table(columns=list(columns))
    # deltalake spells a local table file:///... percent-encoded (a space is %20); the data
    # files' paths it gives are relative to the folder, as they are named on disk
    root = unquote(urlparse(uri).path) if uri.startswith("file:") else uri
    dataset = table.to_pyarrow_dataset(filesystem=pafs.SubTreeFileSystem(root, reader))
    return dataset.to_table(columns=list(columns))
