"""A run worker starts Spark while it loads the code location; every other process does not.

``defs/run_worker.py`` decides from the process (the real case, a run the default launcher's code
server started, is in tests/test_dagster_postgres.py); ``spark.session.prestart`` starts the
session in a thread whose result (or error) the first use takes.
"""

from __future__ import annotations

import gc
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import TEST_SPARK_CONF, pipeline_yaml, project_config
from dagster._grpc.impl import start_run_in_subprocess

from watermark_assets.cli import startup_done
from watermark_assets.defs import build_definitions
from watermark_assets.defs.run_worker import in_run_worker
from watermark_assets.spark.session import SparkSessionKindError, prestart, start_spark

VENV_DAGSTER = "/srv/venv/bin/dagster"
MODULE_DAGSTER = "/srv/venv/lib/python3.11/site-packages/dagster/__main__.py"


def not_dagster() -> None:
    """A multiprocessing target that is not Dagster's run subprocess."""


@pytest.mark.parametrize(
    ("argv", "target", "expected"),
    [
        # the Kubernetes / Docker / ECS launchers' command, and a step worker's
        ([VENV_DAGSTER, "api", "execute_run", "{}"], None, True),
        ([VENV_DAGSTER, "api", "resume_run", "{}"], None, True),
        ([VENV_DAGSTER, "api", "execute_step", "{}"], None, True),
        ([MODULE_DAGSTER, "api", "execute_run", "{}"], None, True),  # python -m dagster
        # the default launcher: the code server's subprocess for one run
        (["-c"], start_run_in_subprocess, True),
        # everything else loads the code location without running anything
        ([VENV_DAGSTER, "api", "grpc", "--port", "4000"], None, False),  # the code server
        ([VENV_DAGSTER, "dev"], None, False),
        ([VENV_DAGSTER, "definitions", "validate"], None, False),
        (["/srv/venv/bin/dagster-daemon", "run"], None, False),
        (["/srv/venv/bin/pytest"], None, False),
        (["/srv/bin/not-dagster", "api", "execute_run"], None, False),
        ([VENV_DAGSTER, "api"], None, False),
        ([], None, False),
        (["-c"], not_dagster, False),  # a spawned process of something else
    ],
)
def test_a_run_worker_is_told_from_its_command_or_its_process_target(
    argv: list[str], target: Any, expected: bool
) -> None:
    assert in_run_worker(argv, SimpleNamespace(_target=target)) is expected


def test_outside_a_run_worker_building_the_definitions_starts_no_spark(tmp_path: Path) -> None:
    """The code server, `definitions validate` and the tests build definitions: no prestart,
    and the jobs run in the run worker's process (the in-process executor)."""
    from watermark_assets.spark import session

    before = dict(session._prestarts)
    defs = build_definitions(project_config(pipeline_yaml(tmp_path)))
    assert session._prestarts == before
    assert defs.resolve_job_def("events_job").executor_def.name == "in_process"


def test_the_first_use_takes_the_prestarted_session(spark: Any) -> None:
    settings = {"spark.master": "local[2]", **TEST_SPARK_CONF, "spark.app.name": "prestart"}
    prestart(settings)
    prestart(settings)  # a second prestart of the same settings starts nothing more
    session, waited = start_spark(settings)
    assert waited is not None and waited >= 0.0
    assert session.range(3).count() == 3
    again, waited_again = start_spark(settings)  # taken once: later uses create (get) it
    assert waited_again is None
    assert again.range(2).count() == 2


def test_a_prestart_that_fails_raises_at_first_use_not_at_prestart(spark: Any) -> None:
    """Errors belong to the run that uses Spark (its step fails, its log says why), not to the
    loading of the code location."""
    settings = {"spark.remote": "sc://127.0.0.1:1"}  # this process holds a classic session
    prestart(settings)  # returns at once, whatever happens in the thread
    with pytest.raises(SparkSessionKindError, match="already holds a classic Spark session"):
        start_spark(settings)


def test_startup_done_turns_the_collector_back_on_with_start_up_frozen() -> None:
    """``watermark-assets`` runs its start-up with the cyclic collector off (cli.console)."""
    gc.disable()
    try:
        startup_done()
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0
        startup_done()  # on already: nothing changes
        assert gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()


PRESTARTED = """
import sys
from watermark_assets.spark import session
session.prestart({"spark.remote": "sc://127.0.0.1:1"})  # its thread fails: nothing to import
wanted = (*session._session_modules({"spark.remote": "sc://127.0.0.1:1"}), *session.WARM_IMPORTS)
print(sorted(m for m in wanted if m not in sys.modules), "pyspark.testing.utils" in wanted)
"""


def test_a_prestart_imports_pyspark_in_its_callers_thread_and_what_lit_needs() -> None:
    """Two threads importing PySpark's modules at once can deadlock (Python raises
    ``_DeadlockError`` in one: a run failed so): a prestart imports them in the caller's thread,
    and, while the JVM starts, ``pyspark.testing.utils`` (pandas, protobuf), which PySpark's
    ``lit`` imports on its first call. A fresh interpreter, where nothing had imported them."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", PRESTARTED], capture_output=True, text=True, check=True, timeout=120
    )

    assert done.stdout.split("\n")[0] == "[] True"


BEFORE_SPARK = """
import sys
from watermark_assets.config import load_config
from watermark_assets.defs.run_worker import spark_settings
spark_settings(load_config())  # what definitions.py does before it prestarts Spark
print(sorted(m for m in ("pyarrow", "numpy", "deltalake", "pandas") if m in sys.modules))
"""


def test_a_run_worker_reaches_its_spark_prestart_without_pyarrow_or_deltalake(
    tmp_path: Path,
) -> None:
    """The JVM starts once the configuration is read: what comes before it delays every run
    (pyarrow with numpy and deltalake cost ~0.2 s there); they are imported later, beside the
    JVM's start. A fresh interpreter, as a run worker is."""
    import os
    import subprocess
    import sys

    import yaml

    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"pipelines": [pipeline_yaml(tmp_path)]}), encoding="utf-8")
    env = {**os.environ, "WATERMARK_ASSETS_CONFIG": str(config)}

    done = subprocess.run(
        [sys.executable, "-c", BEFORE_SPARK], env=env, capture_output=True, text=True, timeout=120
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "[]"


ENDS_FIRST = """
import atexit, json, subprocess, sys
from pyspark import SparkContext

def after_the_sessions_handler():  # registered first, so it runs after the session's own
    try:
        SparkContext._gateway.proc.wait(timeout=60)
        print("the JVM ended while the interpreter was still running")
    except subprocess.TimeoutExpired:
        print("the JVM was still running")

atexit.register(after_the_sessions_handler)
from watermark_assets.spark.session import get_spark
print(get_spark("local[1]", json.loads(sys.argv[1])).range(3).count())
"""


@pytest.mark.spark
def test_at_exit_a_process_tells_its_driver_jvm_to_stop_before_its_own_teardown() -> None:
    """The JVM stops when its stdin closes, which otherwise happens only once the interpreter
    has torn down every module (tenths of a second in a run worker): an exit handler closes it
    first, so both stop side by side and whoever waits for the process waits less."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", ENDS_FIRST, json.dumps(TEST_SPARK_CONF)],
        capture_output=True,
        text=True,
        timeout=180,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[:2] == [
        "3",
        "the JVM ended while the interpreter was still running",
    ]
