"""Materialize one partition with an explicit file list in THIS process (the crash tests' victim).

Usage: python _crash_run.py PIPELINE PARTITION_KEY FILE [FILE...]

The configuration comes from $WATERMARK_ASSETS_CONFIG; $WATERMARK_ASSETS_CRASH_AT makes
``watermark_assets.ingest.crash_point`` SIGKILL the process at that point. Exit status 0: the run
succeeded, 1: it failed; a crash shows as -9 to the parent.
"""

from __future__ import annotations

import sys

from dagster import DagsterInstance

from watermark_assets.config import load_config
from watermark_assets.defs import build_definitions


def main(argv: list[str]) -> int:
    pipeline, partition_key, *files = argv
    defs = build_definitions(load_config())
    job = defs.resolve_job_def(f"{pipeline}_job")
    result = job.execute_in_process(
        instance=DagsterInstance.ephemeral(),
        partition_key=partition_key,
        run_config={"ops": {pipeline: {"config": {"files": files}}}},
        raise_on_error=False,
    )
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
