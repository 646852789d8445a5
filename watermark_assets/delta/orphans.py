"""Which files under a Delta table's folder no version of the table references (crash leftovers).

A run moves its staged data files into the table folder, then commits them. Killed between the
two, it leaves files no commit adds: Delta readers never see them, and nothing else removes them
(VACUUM does in its ``full`` mode only, and it is the user's job). :func:`table_files` answers from
the table's current snapshot, as delta-rs's own VACUUM does, in dry runs that delete nothing:

- the files of a ``full`` dry run (every file under the folder the snapshot does not hold),
- minus the tombstones (files a commit removed: an older version still reads them; VACUUM
  decides when they go, never us).

Hidden folders (``_delta_log``, ``_staging``, ``_watermarks``) are never listed by delta-rs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from watermark_assets import storage


@dataclass(frozen=True)
class TableFiles:
    """The files of a table's folder that no version references, and the table's properties."""

    #: paths relative to the table root, as delta-rs names them
    unreferenced: tuple[str, ...]
    #: the table's properties (``delta.*`` and the project's own)
    configuration: Mapping[str, str]


def open_delta_table(table_uri: str) -> DeltaTable | None:
    """The table at ``table_uri`` (its current snapshot), or None when there is none."""
    try:
        return DeltaTable(table_uri, storage_options=storage.delta_options(table_uri))
    except TableNotFoundError:
        return None


def table_files(table_uri: str) -> TableFiles | None:
    """The unreferenced files of the table (module docstring); None with no Delta table."""
    table = open_delta_table(table_uri)
    if table is None:
        return None
    everything = table.vacuum(0, dry_run=True, enforce_retention_duration=False, full=True)
    tombstones = set(table.vacuum(0, dry_run=True, enforce_retention_duration=False))
    return TableFiles(
        unreferenced=tuple(sorted(p for p in everything if p not in tombstones)),
        configuration=dict(table.metadata().configuration),
    )


def referenced_now(table_uri: str) -> frozenset[str]:
    """The file URIs the table's snapshot holds right now (a re-check before deleting)."""
    table = open_delta_table(table_uri)
    return frozenset() if table is None else frozenset(table.file_uris())
