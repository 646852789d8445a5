"""What happens to a Delta table over months, done to a test's table in milliseconds.

Every helper here is what delta-rs or a user's weekly maintenance job does to a real table; time
is simulated by backdating the log's files or by table properties, never by sleeping:

- :func:`age_log`: the commit JSON files get a modification time ``days`` in the past (what a
  month of calendar time does to them; delta-rs's log cleanup reads these times);
- :func:`checkpoint_and_clean`: a month passes, then a Delta checkpoint at the latest version and
  the log cleanup after it (``create_checkpoint()`` + ``cleanup_metadata()``, what delta-rs's
  post-commit hook does every ``delta.checkpointInterval`` commits): every commit JSON older than
  the checkpoint is gone, with its ``commitInfo``;
- :func:`clean_while_writing`: table properties that make every later commit of any writer (ours
  included) checkpoint and clean the log at once (interval 1, retention 0);
- :func:`optimize`, :func:`z_order`, :func:`vacuum`: the user's maintenance (remove + add with
  ``dataChange: false``; files no longer referenced deleted);
- :func:`forget_removals`: a week passes without VACUUM: the table forgets the files its commits
  removed (their tombstones expire at the next checkpoint) while the files stay on disk.
"""

from __future__ import annotations

import os
from pathlib import Path

from deltalake import DeltaTable

DAY_SECONDS = 86_400


def log_dir(table_uri: str) -> Path:
    return Path(table_uri) / "_delta_log"


def commit_files(table_uri: str) -> list[Path]:
    """The commit JSON files left in the log, oldest first."""
    return sorted(p for p in log_dir(table_uri).glob("*.json") if p.stem.isdigit())


def age_log(table_uri: str, days: float) -> None:
    """Backdate every commit JSON of the (local) table by ``days``."""
    for path in commit_files(table_uri):
        stamp = path.stat().st_mtime - days * DAY_SECONDS
        os.utime(path, (stamp, stamp))


def checkpoint_and_clean(table_uri: str, *, days: float = 40) -> int:
    """``days`` pass, then a checkpoint at the latest version and log cleanup; the version of
    the checkpoint (every older commit JSON is gone)."""
    age_log(table_uri, days)
    table = DeltaTable(table_uri)
    table.create_checkpoint()
    table.cleanup_metadata()
    version = table.version()
    left = [int(p.stem) for p in commit_files(table_uri)]
    assert left == [version], f"log cleanup left {left}, expected only {version}"
    return version


def clean_while_writing(table_uri: str) -> None:
    """From now on, every commit to the table checkpoints it and cleans the whole log before it
    (delta-rs's post-commit hook with ``delta.checkpointInterval`` 1 and a zero retention)."""
    DeltaTable(table_uri).alter.set_table_properties(
        {
            "delta.checkpointInterval": "1",
            "delta.logRetentionDuration": "interval 0 seconds",
            "delta.enableExpiredLogCleanup": "true",
        }
    )


def optimize(table_uri: str) -> int:
    """``OPTIMIZE``: small files compacted (remove + add, ``dataChange: false``); the version."""
    table = DeltaTable(table_uri)
    table.optimize.compact()
    return DeltaTable(table_uri).version()


def z_order(table_uri: str, columns: list[str]) -> int:
    """``OPTIMIZE ... ZORDER BY columns``; the new version."""
    table = DeltaTable(table_uri)
    table.optimize.z_order(columns)
    return DeltaTable(table_uri).version()


def vacuum(table_uri: str) -> list[str]:
    """``VACUUM`` with no retention: every file no longer referenced is deleted; their paths."""
    return list(
        DeltaTable(table_uri).vacuum(
            retention_hours=0, dry_run=False, enforce_retention_duration=False
        )
    )


def forget_removals(table_uri: str) -> None:
    """The removals expire (``delta.deletedFileRetentionDuration`` of zero, then a checkpoint,
    as a week without VACUUM does): the removed files stay on disk, the table no longer knows
    them (VACUUM in its default Lite mode will never delete them)."""
    DeltaTable(table_uri).alter.set_table_properties(
        {"delta.deletedFileRetentionDuration": "interval 0 seconds"}
    )
    table = DeltaTable(table_uri)
    table.create_checkpoint()
    remembered = DeltaTable(table_uri).vacuum(
        retention_hours=0, dry_run=True, enforce_retention_duration=False
    )
    assert remembered == [], f"the table still remembers {remembered}"


def stop_cleaning(table_uri: str) -> None:
    """After :func:`clean_while_writing`: commits no longer checkpoint and clean the log (a
    checkpoint every 100 commits again). The retention stays at zero: delta-rs then keeps only
    what a later :func:`checkpoint_and_clean` keeps (with any explicit retention, even the
    default's 30 days, it leaves the commits after the checkpoint written while cleaning)."""
    DeltaTable(table_uri).alter.set_table_properties({"delta.checkpointInterval": "100"})
