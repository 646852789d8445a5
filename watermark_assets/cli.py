"""``watermark-assets``: generate demo data, run the sensors headless, print a summary.

``watermark-assets demo`` is what ``make demo`` runs: it writes the demo landing data (once), then
for each pipeline evaluates its sensor, launches the runs it requests on the Dagster instance in
$DAGSTER_HOME (so ``make ui`` shows them), repeats until the sensor reports nothing above the
watermarks, and prints one summary row per pipeline.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from watermark_assets.config import CommitPipelineConfig, IngestPipelineConfig, load_config
from watermark_assets.core.clock import system_clock

Pipeline = IngestPipelineConfig | CommitPipelineConfig
#: The demo prints its own progress; Dagster's per-event debug lines would drown it.
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _progress(label: str) -> object:
    def report(done: int, total: int) -> None:
        width = 30
        filled = int(width * done / max(total, 1))
        end = "\n" if done >= total else ""
        print(
            f"\r  {label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}",
            end=end,
            flush=True,
        )

    return report


def generate(config_path: str | None = None) -> None:
    """Write the demo landing files for the demo pipelines (skipped when already there)."""
    from watermark_assets.demo.data import write_clicks, write_events

    config = load_config(config_path)
    for pipeline in config.pipelines:
        root = Path(pipeline.source.uri)
        if root.exists() and any(
            p
            for p in root.rglob("*")
            if p.is_file() and not any(part.startswith("_") for part in p.parts)
        ):
            print(f"  {pipeline.name}: landing data already in {root}")
            continue
        if isinstance(pipeline, CommitPipelineConfig):
            count = write_clicks(root)
        else:
            count = write_events(root, progress=_progress(f"{pipeline.name}: writing files"))  # type: ignore[arg-type]
        print(f"  {pipeline.name}: {count} landing files in {root}")


@dataclass(frozen=True)
class SummaryRow:
    pipeline: str
    partitions: int
    files: int
    rows: int
    quarantined: int
    watermark: str
    state: str
    delta_version: str


def summarize(pipeline: Pipeline) -> SummaryRow:
    """One summary row, read from the Delta log and the checkpoint (the truth, not memory)."""
    from watermark_assets.defs.io_manager import table_row_count
    from watermark_assets.delta import DeltaCommitter
    from watermark_assets.state_store import load_state, pipeline_commits

    state = load_state(pipeline, now=system_clock())
    committer = DeltaCommitter(pipeline.table.uri)
    commits = pipeline_commits(committer, pipeline, None) if state.delta_version is not None else []
    partitions = {key for _, meta in commits for key in meta.partition_keys if meta.files}
    quarantined = table_row_count(pipeline.table.quarantine) or 0
    return SummaryRow(
        pipeline=pipeline.name,
        partitions=len(partitions),
        files=sum(meta.files for _, meta in commits),
        rows=table_row_count(pipeline.table.uri) or 0,
        quarantined=quarantined,
        watermark=state.watermark.value or "-",
        state=state.watermark.state.value,
        delta_version="-" if state.delta_version is None else str(state.delta_version),
    )


def print_table(rows: Sequence[SummaryRow]) -> None:
    headers = [
        "pipeline",
        "partitions",
        "files",
        "rows",
        "quarantined",
        "watermark",
        "state",
        "delta version",
    ]
    cells = [
        [
            r.pipeline,
            str(r.partitions),
            str(r.files),
            str(r.rows),
            str(r.quarantined),
            r.watermark,
            r.state,
            r.delta_version,
        ]
        for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def run_sensors(config_path: str | None = None, *, max_ticks: int = 50) -> list[SummaryRow]:
    """Evaluate each pipeline's sensor and execute the runs it requests until it skips."""
    from dagster import DagsterInstance, build_sensor_context

    from watermark_assets.defs import build_definitions
    from watermark_assets.defs.build import job_name

    config = load_config(config_path)
    defs = build_definitions(config)
    instance = DagsterInstance.get()
    rows = []
    for pipeline in config.pipelines:
        sensor_def = defs.resolve_sensor_def(f"{pipeline.name}_sensor")
        job = defs.resolve_job_def(job_name(pipeline.name))
        cursor = None
        for tick in range(1, max_ticks + 1):
            context = build_sensor_context(instance=instance, cursor=cursor, definitions=defs)
            data = sensor_def.evaluate_tick(context)
            cursor = data.cursor
            if not data.run_requests:
                print(f"  {pipeline.name} tick {tick}: {data.skip_message}")
                break
            print(f"  {pipeline.name} tick {tick}: {len(data.run_requests)} runs requested")
            for number, request in enumerate(data.run_requests, 1):
                started = time.monotonic()
                result = job.execute_in_process(
                    instance=instance,
                    partition_key=request.partition_key,
                    run_config={**request.run_config, **QUIET_LOGS},
                    tags=request.tags,
                    raise_on_error=True,
                )
                files = len(request.run_config["ops"][pipeline.name]["config"]["files"])
                print(
                    f"    [{number}/{len(data.run_requests)}] partition {request.partition_key}: "
                    f"{files} files, run {result.run_id[:8]} "
                    f"{'succeeded' if result.success else 'FAILED'} "
                    f"in {time.monotonic() - started:.1f}s"
                )
        rows.append(summarize(pipeline))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="watermark-assets", description=__doc__)
    parser.add_argument(
        "--config", help="YAML file (default: $WATERMARK_ASSETS_CONFIG or the demo)"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("generate-demo-data", help="write the demo landing files")
    commands.add_parser("run-sensors", help="evaluate the sensors and run what they request")
    commands.add_parser("summary", help="print one row per pipeline")
    commands.add_parser("demo", help="generate-demo-data, run-sensors, summary")
    args = parser.parse_args(argv)
    if args.command in ("generate-demo-data", "demo"):
        print("Generating demo landing data")
        generate(args.config)
    if args.command in ("run-sensors", "demo"):
        print("Evaluating sensors and launching the runs they request")
        rows = run_sensors(args.config)
    else:
        rows = [summarize(p) for p in load_config(args.config).pipelines]
    if args.command != "generate-demo-data":
        print()
        print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
