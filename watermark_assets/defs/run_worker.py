"""Is this process a Dagster run worker? Then Spark starts while the code location loads.

A run worker is the process Dagster starts to execute ONE run: ``dagster api execute_run`` (the
Kubernetes, Docker and ECS run launchers' command) or, under ``dagster dev`` and the default run
launcher, the code server's subprocess whose target is ``start_run_in_subprocess``. The code
location is imported there only to execute the run, and every run of this code location uses
Spark, so :func:`prestart_spark` begins the session at once (``spark.session.prestart``): the JVM
starts (seconds) beside the imports, the instance and the planning that come before the first
Spark call, instead of after them. Any other process (the code server, ``dagster definitions
validate``, a sensor tick, the tests) starts nothing. ``spark.prestart: false`` turns it off.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from watermark_assets.spark.session import prestart

if TYPE_CHECKING:
    from watermark_assets.config import ProjectConfig

#: ``dagster api`` commands that execute a run (or its steps) in this process.
RUN_COMMANDS = frozenset({"execute_run", "resume_run", "execute_step"})
#: The function the default run launcher's code server runs in its subprocess for a run.
RUN_SUBPROCESS_TARGET = ("dagster._grpc.impl", "start_run_in_subprocess")


def in_run_worker(argv: Sequence[str] | None = None, process: Any = None) -> bool:
    """True in a process Dagster started to execute a run (see the module's docstring)."""
    argv = list(sys.argv if argv is None else argv)
    program = argv[0].replace("\\", "/") if argv else ""
    dagster = program.rsplit("/", 1)[-1] == "dagster" or program.endswith("dagster/__main__.py")
    if dagster and len(argv) >= 3 and argv[1] == "api" and argv[2] in RUN_COMMANDS:
        return True
    target = getattr(process or multiprocessing.current_process(), "_target", None)
    where = (getattr(target, "__module__", None), getattr(target, "__qualname__", None))
    return where == RUN_SUBPROCESS_TARGET


def prestart_spark(enabled: bool, settings: Mapping[str, str]) -> bool:
    """Prestart the session of ``settings`` if ``enabled`` and this is a run worker; True if so."""
    if enabled and in_run_worker():
        prestart(settings)
        return True
    return False


def spark_settings(config: ProjectConfig) -> dict[str, str]:
    """The flat ``spark.*`` settings of the runs' session: ``spark.master`` or ``spark.remote``,
    ``spark.conf``, delta-spark's, and the PostgreSQL driver jar when a pipeline reads JDBC."""
    settings = config.spark.settings()
    from watermark_assets.kinds import pipelines

    source_types = {t for kind, p in pipelines(config) for t in kind.source_types(p)}
    if "jdbc" in source_types:
        # The session must start with the driver jar; a later JDBC read cannot add it. (Imported
        # here: the sources' package would import pyarrow before the JVM's start.)
        from watermark_assets.sources.jdbc import with_postgres_driver

        settings = with_postgres_driver(settings)
    return settings
