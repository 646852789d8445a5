"""Materialize one partition in THIS process (the victim of the crash and concurrency tests).

Usage: python _crash_run.py PIPELINE PARTITION_KEY [--rewrite] [FILE...]   (no FILE: every file
above the watermark, as a backfill of the partition does; --rewrite: a rewrite run of one FILE;
PARTITION_KEY '-': an unpartitioned column pipeline, run without run config; a key holding '|':
a time x unit cell, run without run config; 'FIRST...LAST': a range of partitions in one run)

The configuration comes from $WATERMARK_ASSETS_CONFIG; $WATERMARK_ASSETS_CRASH_AT makes
``watermark_assets.runs.faults.crash_point`` SIGKILL the process at that point, and
$WATERMARK_ASSETS_PAUSE_AT makes ``pause_point`` wait for the test there. Exit status 0: the run
succeeded, 1: it failed; a crash shows as -9 to the parent. It prints ``retries=N`` (steps Dagster
re-executed) and the failure messages on stderr.
"""

from __future__ import annotations

import sys

from dagster import DagsterInstance

from watermark_assets.config import FilePipelineConfig, load_config
from watermark_assets.defs import build_definitions
from watermark_assets.kinds.file_path.assets import files_run_config


def main(argv: list[str]) -> int:
    pipeline, partition_key, *files = argv
    rewrite = "--rewrite" in files
    files = [f for f in files if f != "--rewrite"]
    defs = build_definitions(load_config())
    job = defs.resolve_job_def(f"{pipeline}_job")
    if "..." in partition_key:  # a range of partitions in ONE run (a single-run backfill)
        first, last = partition_key.split("...")
        tags = {
            "dagster/asset_partition_range_start": first,
            "dagster/asset_partition_range_end": last,
        }
        result = job.execute_in_process(
            instance=DagsterInstance.ephemeral(), tags=tags, raise_on_error=False
        )
    elif partition_key == "-":
        result = job.execute_in_process(instance=DagsterInstance.ephemeral(), raise_on_error=False)
    elif "|" in partition_key:  # a multi-partition key: no run config
        result = job.execute_in_process(
            instance=DagsterInstance.ephemeral(), partition_key=partition_key, raise_on_error=False
        )
    elif not isinstance(load_config().pipeline(pipeline), FilePipelineConfig):
        # an event-time aggregate: a partition key, no run config (its asset takes none)
        result = job.execute_in_process(
            instance=DagsterInstance.ephemeral(), partition_key=partition_key, raise_on_error=False
        )
    else:
        result = job.execute_in_process(
            instance=DagsterInstance.ephemeral(),
            partition_key=partition_key,
            run_config=files_run_config(pipeline, files, rewrite=rewrite),
            raise_on_error=False,
        )
    retries = [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    print(f"retries={len(retries)}")
    for event in result.all_events:
        if event.is_failure or event.event_type_value == "STEP_UP_FOR_RETRY":
            print(event.message, file=sys.stderr)
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
