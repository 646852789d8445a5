"""A Delta table's columns read with Arrow, the way every reader of the package reads them.

``deltalake``'s own ``to_pyarrow_table`` reads the data files through a Python filesystem
(``PyFileSystem`` over its storage handler): Arrow's reader threads then hold Python file
objects, which they release after the read has returned, and a process that ends right after
such a read can abort in the interpreter's finalization ("terminate called without an active
exception", exit status 134: ``watermark-assets explain`` did so in 2 of 3 runs).
:func:`read_columns` reads a local or S3 table through Arrow's own filesystem
(:func:`~watermark_assets.storage.arrow_filesystem`), which never calls back into Python; a
table on another store (``memory://``) is read as ``deltalake`` reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from watermark_assets import storage

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

__all__ = ["read_columns"]


def read_columns(table: DeltaTable, columns: Sequence[str]) -> pa.Table:
    """``columns`` of every row of ``table``'s current version (module docstring)."""
    import pyarrow.fs as pafs

    found = storage.arrow_filesystem(table.table_uri)
    if found is None:
        return table.to_pyarrow_table(columns=list(columns))
    reader, root = found  # the data files' paths are relative to it, as named in the store
    dataset = table.to_pyarrow_dataset(filesystem=pafs.SubTreeFileSystem(root, reader))
    return dataset.to_table(columns=list(columns))
