"""Benchmark (issue 23 §7): one tick of every sensor of a code location with 100 pipelines.

Run ``make bench-tick`` or ``.venv/bin/python benchmarks/bench_tick_many.py [--pipelines N]``.

The code location holds ``--pipelines`` (100) pipelines of mixed kinds, made by repeating the
demo's pipelines that have a sensor, each copy with its own table (and, for the Parquet-commit
kind, its own folder of files):

    file_path (gzip NDJSON landing files)   file_path (Parquet files committed where they are)
    event_time (over its own file pipeline) time, daily with a grace day   time, monthly
    unit (explicit ids: no sensor)           time x unit (ids from a CSV file)

Every copy reads the same generated sources (the demo's landing files, its ``orders`` and
``answers`` Delta tables), so the tick does the real work per pipeline: a listing above the
watermark, a Delta log read, the due windows or cells. Nothing is materialized first: the tick is
the first one of a deployed location (every partition due), which is the most work a tick does.

Measured in ONE run (machines are shared and noisy: compare within a run):

- ``load``: building the code location's Definitions from the configuration (in process);
- ``tick 1``: every sensor evaluated once in turn (``evaluate_tick`` on a fresh cursor), as
  the daemon's first tick of the location does, plus the sensors' asset events recorded on the
  instance; ``tick 2``: the same with each sensor's cursor from tick 1 (nothing new landed);
- the same per kind (a row per kind: its share of tick 2);
- beside each tick 2 figure, the process's CPU seconds (``time.process_time``: the
  interpreter's and its threads', never another process's), steadier than wall time on a loaded
  machine; a tick's wait on storage is in the wall time only;
- a whole process: a fresh interpreter that loads the location and runs one tick of every
  sensor (``--no-process`` skips it).

Target: a tick of the 100 pipelines under 1 s in process (the median of ``--reps`` ticks 2).
Nothing about timings is asserted; the script exits 1 when a result is wrong (a sensor that
fails, or a first tick that requests no run for a pipeline with data).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from bench_watermarks import BenchmarkError, print_table

ROOT = Path(__file__).resolve().parents[1]
DEMO_CONFIG = ROOT / "watermark_assets" / "demo" / "pipelines.yaml"
#: The demo pipelines repeated (the ones with a sensor and no outside service), and their kind.
TEMPLATES = {
    "events": "file_path",
    "clicks": "file_path (parquet_commit)",
    "events_5min": "event_time",
    "orders_daily": "time",
    "orders_monthly": "time (monthly)",
    "orders_by_status": "unit",
    "survey_answers": "time x unit",
}


def demo_pipelines() -> dict[str, dict[str, Any]]:
    document = yaml.safe_load(DEMO_CONFIG.read_text(encoding="utf-8"))
    return {p["name"]: p for p in document["pipelines"]}


def write_sources(data: Path) -> None:
    """The demo's sources, once: landing files, the clicks' Parquet files, orders and answers."""
    from watermark_assets.demo.data import (
        write_clicks,
        write_events,
        write_orders,
        write_survey_answers,
    )

    write_events(data / "landing" / "events")
    write_clicks(data / "clicks_template")
    write_orders(data / "sources" / "orders")
    write_survey_answers(data / "sources" / "answers", data / "sources" / "surveys.csv")


def project(data: Path, count: int) -> tuple[dict[str, Any], dict[str, str]]:
    """A configuration of ``count`` pipelines, the copies of TEMPLATES in turn; and the kind of
    each pipeline's name (for the per-kind rows)."""
    templates = demo_pipelines()
    pipelines: list[dict[str, Any]] = []
    kinds: dict[str, str] = {}
    copy = 0
    while len(pipelines) < count:
        for name, kind in TEMPLATES.items():
            if len(pipelines) == count:
                break
            if name == "events_5min" and len(pipelines) + 1 >= count:
                continue  # an event-time copy needs its own file pipeline before it
            pipeline = json.loads(json.dumps(templates[name]))
            pipeline["name"] = new = f"{name}_{copy}"
            text = json.dumps(pipeline).replace("${WATERMARK_ASSETS_DATA:-data}", str(data))
            pipeline = json.loads(text)
            pipeline["table"]["uri"] = str(data / "delta" / new)
            if name == "clicks":  # the Parquet files are committed where they are: a folder each
                folder = data / "delta" / new
                shutil.copytree(data / "clicks_template", folder)
                pipeline["source"]["uri"] = str(folder)
            if name == "events_5min":
                pipeline["source"]["pipeline"] = f"events_{copy}"
            pipelines.append(pipeline)
            kinds[new] = kind
        copy += 1
    return {"spark": {"master": "local[1]"}, "pipelines": pipelines}, kinds


def one_tick(
    defs: Any,
    instance: Any,
    cursors: dict[str, str | None],
    cpu: dict[str, float] | None = None,
) -> dict[str, float]:
    """Every sensor evaluated once; each one's seconds by its pipeline's name (``cpu``: filled
    with each one's CPU seconds). Records the sensors' asset events on the instance, as the
    daemon does, and keeps their cursors."""
    from dagster import build_sensor_context

    seconds: dict[str, float] = {}
    for sensor in defs.sensors:
        started = time.perf_counter()
        on_cpu = time.process_time()
        with build_sensor_context(
            instance=instance, cursor=cursors.get(sensor.name), definitions=defs
        ) as context:
            data = sensor.evaluate_tick(context)
        for event in data.asset_events:
            instance.report_runless_asset_event(event)
        cursors[sensor.name] = data.cursor
        seconds[sensor.name] = time.perf_counter() - started
        if cpu is not None:
            cpu[sensor.name] = time.process_time() - on_cpu
        if data.run_requests is None and data.skip_message is None:
            raise BenchmarkError(f"{sensor.name}: neither runs nor a skip reason")
    return seconds


def pipeline_of(sensor_name: str, names: Sequence[str]) -> str:
    return max((n for n in names if sensor_name.startswith(n)), key=len)


def tick_in_process(config_path: Path, reps: int) -> dict[str, Any]:
    """Load the location, tick 1, then ``reps`` ticks 2; the seconds of each."""
    os.environ["WATERMARK_ASSETS_CONFIG"] = str(config_path)
    logging.getLogger("dagster").setLevel(logging.WARNING)  # a line per sensor per tick
    from dagster import DagsterInstance

    from watermark_assets.config import load_config
    from watermark_assets.defs import build_definitions

    started = time.perf_counter()
    defs = build_definitions(load_config(str(config_path)))
    load = time.perf_counter() - started
    with DagsterInstance.ephemeral() as instance:
        cursors: dict[str, str | None] = {}
        first = one_tick(defs, instance, cursors)
        later_cpu: list[dict[str, float]] = [{} for _ in range(reps)]
        later = [one_tick(defs, instance, cursors, cpu) for cpu in later_cpu]
    return {
        "load": load,
        "first": first,
        "later": later,
        "later_cpu": later_cpu,
        "sensors": len(first),
    }


CHILD = """
import json, sys, time
sys.path.insert(0, {benchmarks!r})
from bench_tick_many import tick_in_process
result = tick_in_process(__import__("pathlib").Path({config!r}), 0)
print(json.dumps({{"load": result["load"], "tick": sum(result["first"].values())}}))
"""


def whole_process(config_path: Path, home: Path) -> tuple[float, dict[str, float]]:
    """A fresh interpreter: imports, the location's Definitions, one tick of every sensor."""
    script = CHILD.format(benchmarks=str(ROOT / "benchmarks"), config=str(config_path))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'benchmarks'}", "DAGSTER_HOME": str(home)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchmarkError(f"the whole-process tick failed:\n{done.stderr[-3000:]}")
    return elapsed, json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipelines", type=int, default=100)
    parser.add_argument("--reps", type=int, default=5, help="ticks 2 (the median is reported)")
    parser.add_argument("--no-process", action="store_true", help="skip the whole-process tick")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench_tick_many_"))
    home = work / "dagster_home"
    home.mkdir()
    os.environ["DAGSTER_HOME"] = str(home)
    try:
        data = work / "data"
        print(f"writing the demo's sources into {data} ...", flush=True)
        write_sources(data)
        document, kinds = project(data, args.pipelines)
        config_path = work / "pipelines.yaml"
        config_path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        print(f"{len(kinds)} pipelines; ticking in process ...", flush=True)
        result = tick_in_process(config_path, args.reps)
        names = list(kinds)
        first_total = sum(result["first"].values())
        later_totals = [sum(t.values()) for t in result["later"]]
        later = statistics.median(later_totals)
        cpu_totals = [sum(t.values()) for t in result["later_cpu"]]
        rows = [
            ["load the location (Definitions)", f"{result['load']:.2f}", ""],
            [f"tick 1: {result['sensors']} sensors, every partition due", f"{first_total:.2f}", ""],
            [
                f"tick 2: nothing new (median of {args.reps})",
                f"{later:.2f}",
                " ".join(f"{t:.2f}" for t in later_totals),
            ],
            [
                f"tick 2: CPU seconds (median of {args.reps})",
                f"{statistics.median(cpu_totals):.2f}",
                " ".join(f"{t:.2f}" for t in cpu_totals),
            ],
        ]
        middle = len(result["later"]) // 2
        per_kind: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for sensor, seconds in result["later"][middle].items():
            on_cpu = result["later_cpu"][middle][sensor]
            per_kind[kinds[pipeline_of(sensor, names)]].append((seconds, on_cpu))
        for kind, both in per_kind.items():
            rows.append(
                [
                    f"  tick 2, {kind}: {len(both)} sensors",
                    f"{sum(w for w, _ in both):.3f}",
                    f"max {max(w for w, _ in both) * 1000:.0f} ms, "
                    f"CPU {sum(c for _, c in both):.3f}",
                ]
            )
        if not args.no_process:
            print("a whole process: load + one tick ...", flush=True)
            elapsed, inner = whole_process(config_path, work / "process_home")
            rows.append(
                [
                    "whole process: start, load, tick 1",
                    f"{elapsed:.2f}",
                    f"load {inner['load']:.2f}, tick {inner['tick']:.2f}",
                ]
            )
        print()
        print_table(
            f"Tick of every sensor, {len(kinds)} pipelines of mixed kinds (seconds)",
            ["what", "seconds", "notes"],
            rows,
        )
        met = "met" if later < 1.0 else "NOT met"
        print(f"\ntarget: a tick of {len(kinds)} pipelines under 1 s in process: {met}")
        return 0
    except BenchmarkError as error:
        print(f"wrong result: {error}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
