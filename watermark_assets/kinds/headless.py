"""What the daemon does, headless: the pieces every kind's ``run-sensors`` pass and ``demo`` step
share (the code location's definitions, the instance, a run said in one line, a failed run).

A :class:`Headless` is one pass's view of the project: the configuration, loaded once, and the
definitions and the instance, built on first use (a pass with nothing to run starts nothing).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from watermark_assets.config import ProjectConfig, load_config

#: The demo prints its own progress and one line per failed run; Dagster's per-event lines and
#: the failures' tracebacks would drown them (they stay in the run's logs in the UI).
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
#: Spark's own logging in a headless pass, unless ``spark.conf`` sets ``spark.log.level``
QUIET_SPARK = {"spark.log.level": "FATAL"}
#: The heading of the time and unit pipelines' demo steps (one pass over both kinds).
PARTITIONED_HEADING = "Time and unit watermarks: the partitions their ticks say are due"


def startup_done() -> None:
    """Collect as usual from here on, leaving what start-up created out of future collections
    (``gc.freeze``). Does nothing when the collector is on already (``main`` called directly)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


@dataclass(frozen=True)
class FailedRun:
    """A run that failed during ``run-sensors``, said in one line."""

    pipeline: str
    partition: str
    run_id: str
    reason: str

    def line(self) -> str:
        return f"{self.pipeline} {self.partition}: run {self.run_id[:8]} failed: {self.reason}"


def innermost(error: BaseException) -> str:
    """The message of the innermost cause of ``error`` (Dagster wraps a sensor's errors)."""
    while error.__cause__ is not None:
        error = error.__cause__
    return str(error)


def failure_reason(result: Any) -> str:
    """The innermost error of a failed run's first step failure, in one line."""
    for event in result.all_events:
        data = event.step_failure_data if event.is_step_failure else None
        if data is None or data.error is None:
            continue
        error = data.error
        while error.cause is not None:
            error = error.cause
        first = (error.message or "").strip().splitlines()
        # py4j-captured errors repeat their own class path before the message
        text = (first[0] if first else "").split(f"{error.cls_name}: ", 1)[-1]
        return f"{error.cls_name}: {text}"[:400]
    return "the run failed (see its logs in the Dagster UI)"


def quiet_definitions(config: ProjectConfig) -> Any:
    """The code location's Definitions with Spark's own logging at FATAL: failed runs are
    summarized at the end, and Spark's error logs would repeat them mid-way."""
    from watermark_assets.defs import build_definitions

    return build_definitions(config, spark_defaults=QUIET_SPARK)


def run_keys(requests: Sequence[Any]) -> list[str]:
    """The run keys of a tick's requests (its recorded tick names their runs)."""
    return [str(request.run_key) for request in requests if request.run_key]


def as_sensor_run(sensor_name: str, request: Any) -> dict[str, str]:
    """The tags the daemon gives a run it launches for ``request``: its run key and the sensor's
    name. A headless pass (``run-sensors``, ``demo``) tags its runs so: the sensor's page lists
    them, and switching the sensor on later does not launch a request the pass already ran (the
    daemon skips a run key its sensor launched before; a time sensor's keys carry the cut-off,
    so the grace windows a pass ran are not run again until the cut-off moves)."""
    from dagster._core.storage.tags import RUN_KEY_TAG, SENSOR_NAME_TAG

    tags = {**request.tags, SENSOR_NAME_TAG: sensor_name}
    if request.run_key:
        tags[RUN_KEY_TAG] = request.run_key
    return tags


class Headless:
    """One headless pass over the project in ``config_path``.

    ``sensor_pass`` runs every kind's sensor pass again (a demo step that lands a file calls it).
    """

    def __init__(
        self,
        config_path: str | None,
        sensor_pass: Callable[[], list[FailedRun]] | None = None,
    ) -> None:
        self.config_path = config_path
        self._sensor_pass = sensor_pass

    @cached_property
    def config(self) -> ProjectConfig:
        return load_config(self.config_path)

    @cached_property
    def defs(self) -> Any:
        """The definitions (Spark quiet), built once; the instance is opened with them, and
        start-up is over (:func:`startup_done`). No prestart here: most passes are idle, and an
        idle pass must not start a JVM; a run's session starts on first use."""
        defs = quiet_definitions(self.config)
        self.instance  # noqa: B018  (opened now, as a pass always did, before start-up ends)
        startup_done()
        return defs

    @cached_property
    def instance(self) -> Any:
        from dagster import DagsterInstance

        return DagsterInstance.get()

    def renewed(self) -> Headless:
        """A new pass over the same project: the configuration and definitions read again."""
        return Headless(self.config_path, self._sensor_pass)

    def sensor_pass(self) -> list[FailedRun]:
        """Every kind's sensor pass (``run-sensors``), its failures."""
        return [] if self._sensor_pass is None else self._sensor_pass()

    def job(self, pipeline: str) -> Any:
        from watermark_assets.names import job_name

        return self.defs.resolve_job_def(job_name(pipeline))

    def sensor_context(self, **kwargs: Any) -> Any:
        """A sensor's context on this pass's instance and definitions."""
        from dagster import build_sensor_context

        return build_sensor_context(instance=self.instance, definitions=self.defs, **kwargs)

    def run_partition(
        self,
        pipeline: str,
        key: str | None,
        failures: list[FailedRun],
        tags: Mapping[str, str] | None = None,
        label: str | None = None,
    ) -> bool:
        """One run of ``key`` (None: unpartitioned, or the range its ``tags`` name), said in one
        line; False when it failed."""
        from watermark_assets import vocabulary as vocab

        started = time.monotonic()
        result = self.job(pipeline).execute_in_process(
            instance=self.instance,
            partition_key=key,
            run_config=QUIET_LOGS,
            raise_on_error=False,
            tags=dict(tags or {}),
        )
        said = ""
        if result.success:
            from watermark_assets.defs.keys import node_name

            node = node_name(self.config.pipeline(pipeline))
            (materialization, *_) = result.asset_materializations_for_node(node)
            meta = {k: v.value for k, v in materialization.metadata.items()}
            said = (
                f"{meta.get('rows/read', 0)} rows read, {meta.get('rows/committed', 0)} committed"
            )
            if vocab.REPLACE_HIGH_WATERMARK in meta:
                said += f", high watermark {meta[vocab.REPLACE_HIGH_WATERMARK]}"
            if vocab.UNIT_ID in meta:
                said += f", done at {meta[vocab.WATERMARK_AFTER]}"
            elif vocab.UNIT_IDS in meta:
                done = vocab.table_rows(meta[vocab.WATERMARK_AFTER])
                said += ", done at " + ", ".join(
                    f"{r['unit']} {r['watermark'] or '(not recorded)'}" for r in done
                )
            if "event_time/windows_emitted" in meta:
                said = (
                    f"{meta['rows/read']} rows read, {meta['event_time/windows_emitted']} windows "
                    f"emitted, {meta['event_time/windows_open']} open, "
                    f"{meta['event_time/late_records']} late records kept, watermark "
                    f"{meta['event_time/explain'].rsplit('watermark ', 1)[-1]}"
                )
            said += "; "
        print(
            f"    {label or key or '(unpartitioned)'}: {said}run {result.run_id[:8]} "
            f"{'succeeded' if result.success else 'FAILED'} in {time.monotonic() - started:.1f}s"
        )
        if not result.success:
            failures.append(FailedRun(pipeline, key or "-", result.run_id, failure_reason(result)))
        return bool(result.success)
