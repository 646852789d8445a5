"""``watermark-assets``: generate demo data, run the sensors headless, print a summary.

``watermark-assets demo`` is what ``make demo`` runs. It writes the demo data (once), then:
each file pipeline's sensor is evaluated and the runs it requests are launched on the Dagster
instance in $DAGSTER_HOME (the working directory's ``.env`` read first, as ``dagster dev`` reads
it: :func:`load_env_file`; so ``make ui`` shows them) until it reports nothing above the
watermarks; the column pipelines run twice (step 1 reads what is above their watermarks, about 1%
of the source rows change, step 2 reads only those; a PostgreSQL-backed pipeline is skipped, in
one line, when no database is reachable); each time pipeline's tick (what its schedule and sensor
decide) says which partitions are due and why, and they run, then a second tick shows the grace
period re-running the last windows; explicit units that never ran run once, and a time x unit
pipeline's sensor adds its ids and requests its due cells. The demo starts its HTTP API on
127.0.0.1 for ``payments_api_daily`` (``serve-demo-api`` serves it alone, for ``dagster dev``).

``summary`` prints one row per pipeline of every kind (``kinds.KINDS``): a table of the file
pipelines, and one of the others (partitions done, high watermark or done-at, cut-off).
``explain PIPELINE [PATH]`` says whether a landing file was ingested (in which Delta version) or
why not. ``plan PIPELINE [--partition KEY]...`` says what a run would read and write now, every
kind alike (a dry run: no row read, no Spark, nothing written). ``replay PIPELINE [--start V]
[--end V]`` replays a range of a column pipeline in chunks (its ``replay`` section;
``--start``/``--end`` override the range), one Delta commit per chunk, and prints one line per
chunk (skipped chunks included).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from watermark_assets.config import load_config
from watermark_assets.core.clock import Clock, system_clock
from watermark_assets.core.text import time_text
from watermark_assets.exceptions import InstanceHomeError, WatermarkAssetsError
from watermark_assets.kinds import KINDS, kind_for, kind_of, summary_rows
from watermark_assets.kinds.contract import DemoStep
from watermark_assets.kinds.headless import FailedRun, Headless
from watermark_assets.kinds.headless import startup_done as startup_done
from watermark_assets.kinds.report import PARTITIONED_HEADERS as PARTITIONED_HEADERS
from watermark_assets.kinds.report import SUMMARY_HEADERS as SUMMARY_HEADERS
from watermark_assets.kinds.report import PartitionedRow as PartitionedRow
from watermark_assets.kinds.report import SummaryRow as SummaryRow


def _demo_phase(config_path: str | None, hook: str) -> tuple[list[FailedRun], list[str]]:
    """Every kind's ``hook`` step (``demo_data`` or ``demo_runs``), in their ``order``: the
    heading once before the steps sharing it, one :class:`Headless` per heading. The failed
    runs and the lines to print after the summary."""
    config = load_config(config_path)
    steps: list[tuple[DemoStep[Any], list[Any]]] = sorted(
        (
            (step, list(kind.pipelines(config)))
            for kind in KINDS.values()
            if (step := getattr(kind, hook)) is not None
        ),
        key=lambda item: item[0].order,
    )
    failures: list[FailedRun] = []
    closing: list[str] = []
    passes: dict[str | None, Headless] = {}
    for step, of_kind in steps:
        if step.heading not in passes:
            passes[step.heading] = Headless(config_path, lambda: run_sensors(config_path))
            shown = [s for s, p in steps if s.heading == step.heading and (p or s.always)]
            if step.heading is not None and shown:
                print(step.heading)
        if not of_kind and not step.always:
            continue
        outcome = step.run(passes[step.heading], of_kind)
        failures += outcome.failures
        closing += outcome.closing_lines
    return failures, closing


def generate(config_path: str | None = None) -> None:
    """Write the demo's source data: each kind's ``demo_data`` (landing files, the Delta
    source tables of column pipelines, a time x unit pipeline's answers and ids; skipped when
    already there)."""
    _demo_phase(config_path, "demo_data")


def run_sensors(config_path: str | None = None) -> list[FailedRun]:
    """Every kind's ``sensor_pass``: its sensors evaluated and the runs they request executed
    until they skip. What the daemon does, headless: the runs are launched on the instance in
    $DAGSTER_HOME, the sensors' asset events (observations) are recorded there, a failed run
    does not stop the others (its partition is not run again in this pass), and every failure
    is returned."""
    headless = Headless(config_path)
    failures: list[FailedRun] = []
    for kind in KINDS.values():
        if kind.sensor_pass is not None:
            failures += kind.sensor_pass(headless, kind.pipelines(headless.config))
    return failures


def print_table(rows: Sequence[SummaryRow]) -> None:
    print_grid(SUMMARY_HEADERS, [r.cells() for r in rows])


def print_grid(headers: Sequence[str], cells: Sequence[Sequence[str]]) -> None:
    """A plain-text table: the headers, a rule, one line per row."""
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def explain_command(
    config_path: str | None, name: str, path: str | None, as_json: bool, limit: int
) -> int:
    """``explain PIPELINE [PATH]``: a kind reading landing files explains them (one verdict for
    PATH, else every file not ingested); any other: :func:`explain_state`."""
    config = load_config(config_path)
    if path is not None:  # a PATH is a landing file: ConfigError for a kind without them
        kind_for(config, name, "explain_files")
    kind, pipeline = kind_of(config, name)
    if kind.explain_files is not None:
        print(kind.explain_files(config, pipeline, path, as_json, limit))
    else:
        print("\n".join(kind.explain_state(config, pipeline)))
    return 0


def explain_state(config: Any, name: str) -> list[str]:
    """``explain PIPELINE`` of a pipeline without landing files: its summary row, then where
    each of its states was read from (``PipelineKind.explain_state``)."""
    kind, pipeline = kind_of(config, name)
    return kind.explain_state(config, pipeline)


def repair_state_command(config_path: str | None, name: str) -> int:
    """``repair-state PIPELINE``: rebuild the pipeline's state from what the table still holds,
    after StateHistoryLostError (commits of the pipeline cleaned from the Delta log before any
    run or tick read them): the kind's own ``repair`` (file-path: the checkpoint from the
    tables' rows and lineage; event time: the batch in flight moved, or the aggregate rebuilt
    from its upstream), else each of its state logs rebuilt (``PipelineKind.state_logs``: time,
    time x unit and unit: the file and the commits left, folded, a window, cell or unit
    recorded only in a lost commit runs again on the next tick; column: the watermark becomes
    the greatest watermark-column value of the table's rows)."""
    config = load_config(config_path)
    kind, pipeline = kind_of(config, name)  # an unknown name: ConfigError listing the known ones
    if kind.repair is not None:
        return kind.repair(config, pipeline)
    logs = kind.state_logs(config, pipeline)
    if not logs:
        print(
            f"repair-state {name}: this pipeline keeps no state in its table; nothing to repair",
            file=sys.stderr,
        )
        return 2
    for entry in logs:
        lost = entry.log.repair(entry.replace)
        print(f"{name}: {entry.what} rebuilt at Delta version {entry.log.version} ({lost})")
    return 0


def plan_command(
    config_path: str | None,
    name: str,
    keys: Sequence[str],
    as_json: bool,
    clock: Clock = system_clock,
) -> int:
    """``plan PIPELINE [--partition KEY]... [--json]``: what a run of those partitions (none
    named: of the whole asset, or what the kind plans without them) would read and write,
    planned on the state now (``PipelineKind.plan``); reads no row, starts no Spark, writes
    nothing."""
    config = load_config(config_path)
    kind, pipeline = kind_of(config, name)
    now = clock()
    planned = kind.plan_run(config, pipeline, keys, lambda: now)
    if as_json:
        said = {"pipeline": name, "kind": kind.name, "planned_at": time_text(now)}
        print(json.dumps(said | {"runs": [run.to_dict() for run in planned]}, indent=2))
        return 0
    print(f"{name} ({kind.name}), planned at {time_text(now)}; nothing was read or written:")
    for run in planned:
        print("\n".join(run.lines()))
    return 0


def replay_command(config_path: str | None, name: str, start: str | None, end: str | None) -> int:
    """``replay PIPELINE``: the kind's replay (a column pipeline's ``replay`` section, the range
    overridden); ConfigError for a kind without one."""
    config = load_config(config_path)
    kind, pipeline = kind_for(config, name, "replay")
    assert kind.replay is not None
    return kind.replay(config, pipeline, start, end)


def console() -> int:
    """The program (``watermark-assets``, ``python -m watermark_assets.cli``): :func:`main`
    after the working directory's ``.env`` (:func:`load_env_file`, as Dagster's CLI reads it),
    with Python's cyclic garbage collector off during start-up.

    Start-up imports Dagster, pyspark and pyarrow and opens the instance: hundreds of thousands
    of long-lived objects, which the collector would traverse again and again for nothing
    (about 0.3 s of a one-file run). :func:`startup_done` turns it back on, with those objects
    frozen out of later collections; so does the end of any command that never calls it.
    """
    load_env_file()
    gc.disable()
    try:
        return main()
    finally:
        startup_done()


#: The environment file Dagster's CLI (``dagster dev``, ``dagster definitions validate``, ...)
#: reads from the folder it is started in, before it opens the instance.
ENV_FILE = ".env"

#: The commands that record runs and sensor ticks on the Dagster instance in $DAGSTER_HOME.
INSTANCE_COMMANDS = ("run-sensors", "demo")


def load_env_file(folder: str | None = None) -> list[str]:
    """Read the ``.env`` of ``folder`` (default: the working directory) into the environment as
    Dagster's CLI does before it opens the instance: its values win over the shell's, and
    ``${PWD}`` in a value is that folder. So ``watermark-assets run-sensors`` typed in a folder
    records on the same instance as ``dagster dev`` started there. The names it set, sorted."""
    folder = os.path.abspath(folder or os.getcwd())
    path = os.path.join(folder, ENV_FILE)
    if not os.path.isfile(path):
        return []
    from dotenv import dotenv_values

    shell_pwd = os.environ.get("PWD")
    os.environ["PWD"] = folder  # what ${PWD} means in the file: the folder it lies in
    try:
        values = {k: v for k, v in dotenv_values(path).items() if v is not None}
    finally:
        if shell_pwd is None:
            os.environ.pop("PWD", None)
        else:
            os.environ["PWD"] = shell_pwd
    os.environ.update(values)
    return sorted(values)


def require_instance_home(command: str) -> str:
    """$DAGSTER_HOME for ``command``, which records on the instance there; InstanceHomeError
    (naming the fix) when it is unset, relative or not an existing folder, before any work."""
    home = os.environ.get("DAGSTER_HOME") or None
    if home is None or not os.path.isabs(home) or not os.path.isdir(home):
        raise InstanceHomeError(command, home)
    return home


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; exit status 0, 1 when runs failed or a pipeline cannot run (its
    landing folder does not exist: ``summary`` says so), 2 for a configuration error."""
    parser = argparse.ArgumentParser(prog="watermark-assets", description=__doc__)
    parser.add_argument(
        "--config", help="YAML file (default: $WATERMARK_ASSETS_CONFIG or the demo)"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("generate-demo-data", help="write the demo landing files")
    commands.add_parser("run-sensors", help="evaluate the sensors and run what they request")
    commands.add_parser("summary", help="print one row per pipeline")
    commands.add_parser(
        "demo",
        help="generate-demo-data, run-sensors, the column steps, the time and unit pipelines' "
        "due partitions, summary",
    )
    serve = commands.add_parser(
        "serve-demo-api",
        help="serve the demo's HTTP API on 127.0.0.1 (for payments_api_daily under dagster dev)",
    )
    serve.add_argument("--port", type=int, default=None, help="default 8765")
    explain = commands.add_parser(
        "explain",
        help="why a landing file was or was not ingested; without PATH every file that was not "
        "(a pipeline of another kind: its summary row and where its state was read from)",
    )
    explain.add_argument("pipeline", metavar="PIPELINE")
    explain.add_argument(
        "path", metavar="PATH", nargs="?", help="a landing file, relative to the source folder"
    )
    explain.add_argument("--json", action="store_true", help="machine-readable output")
    explain.add_argument(
        "--limit",
        type=int,
        default=20,
        help="file names shown per verdict without PATH (default 20; 0: all)",
    )
    plan = commands.add_parser(
        "plan",
        help="what a run would read and write now (a dry run: nothing read, nothing written)",
    )
    plan.add_argument("pipeline", metavar="PIPELINE")
    plan.add_argument(
        "--partition",
        metavar="KEY",
        action="append",
        default=[],
        help="a partition of the run (repeatable; none: what the automation would run now: the "
        "partitions with files, the windows due, the next batch, the whole asset, by kind)",
    )
    plan.add_argument("--json", action="store_true", help="machine-readable output")
    replay = commands.add_parser(
        "replay", help="replay a range of a column pipeline in chunks (its replay section)"
    )
    replay.add_argument("pipeline", metavar="PIPELINE")
    replay.add_argument("--start", help="first value replayed (included), e.g. 2026-04-01T00:00Z")
    replay.add_argument("--end", help="where the replay stops (excluded)")
    repair = commands.add_parser(
        "repair-state",
        help="rebuild a pipeline's state snapshot from what its table still holds (after a "
        "'cannot be read' error naming this command)",
    )
    repair.add_argument("pipeline", metavar="PIPELINE")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except WatermarkAssetsError as error:
        print(f"watermark-assets: {error}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.command in INSTANCE_COMMANDS:
        require_instance_home(args.command)
    if args.command not in ("run-sensors", "demo", "replay"):
        startup_done()  # nothing heavy to start: collect as usual from the beginning
    if args.command == "explain":
        return explain_command(args.config, args.pipeline, args.path, args.json, args.limit)
    if args.command == "plan":
        return plan_command(args.config, args.pipeline, args.partition, args.json)
    if args.command == "replay":
        return replay_command(args.config, args.pipeline, args.start, args.end)
    if args.command == "repair-state":
        return repair_state_command(args.config, args.pipeline)
    if args.command == "serve-demo-api":
        from watermark_assets.demo.api import DEFAULT_PORT, serve_demo_api

        serve_demo_api(DEFAULT_PORT if args.port is None else args.port)
        return 0
    from watermark_assets.demo.api import start_demo_api
    from watermark_assets.demo.postgres import export_jdbc_url

    export_jdbc_url(os.environ)
    api = start_demo_api(os.environ) if args.command == "demo" else None
    try:
        return _run_demo_commands(args)
    finally:
        if api is not None:
            api.stop()


def _run_demo_commands(args: argparse.Namespace) -> int:
    failures: list[FailedRun] = []
    closing: list[str] = []
    if args.command in ("generate-demo-data", "demo"):
        print("Generating demo landing data")
        generate(args.config)
    if args.command in ("run-sensors", "demo"):
        print("Evaluating sensors and launching the runs they request")
        failures = run_sensors(args.config)
    if args.command == "demo":
        step_failures, closing = _demo_phase(args.config, "demo_runs")
        failures += step_failures
    rows, partitioned = summary_rows(load_config(args.config))
    if args.command != "generate-demo-data":
        print()
        print_table(rows)
        if partitioned:
            print()
            print_grid(PARTITIONED_HEADERS, [r.cells() for r in partitioned])
    if closing:
        print()
        print("\n".join(closing))
    problems = [row.problem for row in rows if row.problem]
    if problems:
        print(f"\n{len(problems)} pipelines cannot run:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
    if failures:
        print(f"\n{len(failures)} runs failed:", file=sys.stderr)
        for failure in failures:
            print(f"  {failure.line()}", file=sys.stderr)
    return 1 if failures or problems else 0


if __name__ == "__main__":
    sys.exit(console())
