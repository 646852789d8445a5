"""A headless pass's sensor ticks (``watermark-assets demo``, ``run-sensors``), recorded in the
Dagster instance as the daemon records its own: the UI's sensor page then shows them in its tick
history (what each tick requested or why it skipped, and its runs) instead of "never run".

Dagster's UI finds a sensor's ticks by its selector (code location, repository and sensor name,
:data:`~watermark_assets.names.CODE_LOCATION`): a tick recorded under the same selector is the
sensor's, whichever process evaluated it. Its origin says where it was evaluated: in process.

Only the ticks are recorded, never the sensor's state: the sensor stays off, as declared, and
switching it on starts the daemon's own ticks from no cursor (the sensors decide from the tables'
state, so no cursor is needed to go on). A recorded tick is finished (SUCCESS or SKIPPED), so the
daemon never resumes it; the runs it names carry the sensor's name and run keys
(:func:`~watermark_assets.cli.as_sensor_run`), so the daemon does not launch them again.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from dagster import DagsterInstance, RunsFilter
from dagster._core.definitions.run_request import InstigatorType
from dagster._core.remote_origin import (
    InProcessCodeLocationOrigin,
    RemoteInstigatorOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.scheduler.instigation import InstigatorTick, TickData, TickStatus
from dagster._core.storage.tags import RUN_KEY_TAG, SENSOR_NAME_TAG
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._time import get_current_timestamp

from watermark_assets.names import CODE_LOCATION, DEFINITIONS_MODULE

#: The repository name Dagster gives a code location's ``Definitions``.
REPOSITORY = "__repository__"


def sensor_origin(sensor_name: str, location: str = CODE_LOCATION) -> RemoteInstigatorOrigin:
    """The sensor's origin as evaluated in this process, under the code location's name."""
    code = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(
            executable_path=sys.executable,
            module_name=DEFINITIONS_MODULE,
            working_directory=os.getcwd(),
        ),
        location_name=location,
    )
    return RemoteInstigatorOrigin(RemoteRepositoryOrigin(code, REPOSITORY), sensor_name)


def record_tick(
    instance: DagsterInstance,
    sensor_name: str,
    *,
    started: float,
    run_keys: Sequence[str] = (),
    skip_reason: str | None = None,
    cursor: str | None = None,
    location: str = CODE_LOCATION,
) -> InstigatorTick:
    """One finished tick of ``sensor_name`` (``started``: Unix seconds): SUCCESS with the runs
    launched for its ``run_keys`` (found in the instance by the sensor's name and run key, as
    tagged by the pass), else SKIPPED with ``skip_reason``."""
    run_ids = [
        run.run_id
        for key in run_keys
        for run in instance.get_runs(
            filters=RunsFilter(tags={SENSOR_NAME_TAG: sensor_name, RUN_KEY_TAG: key}), limit=1
        )
    ]
    origin = sensor_origin(sensor_name, location)
    return instance.create_tick(
        TickData(
            instigator_origin_id=origin.get_id(),
            instigator_name=sensor_name,
            instigator_type=InstigatorType.SENSOR,
            status=TickStatus.SUCCESS if run_ids else TickStatus.SKIPPED,
            timestamp=started,
            end_timestamp=get_current_timestamp(),
            run_ids=run_ids,
            run_keys=list(run_keys),
            skip_reason=None if run_ids else skip_reason,
            cursor=cursor,
            selector_id=origin.get_selector().get_id(),
        )
    )
