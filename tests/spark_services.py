"""Real Spark services started from pyspark's own jars, on loopback, for the scale-out tests and
the latency benchmark: a standalone cluster (a master and a worker, ``spark-class``) and a Spark
Connect server (``spark-submit --class ...SparkConnectServer``). Each is a context manager that
stops its JVMs (and their children: executors, Python workers) when it exits, whatever happened.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark
from _ports import free_port

#: pyspark's package folder: its bin/ and jars/ are a Spark distribution (SPARK_HOME).
PYSPARK_HOME = Path(pyspark.__file__).resolve().parent

CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


#: The JVM options of the tests' short-lived JVMs (tests/conftest.py sets SPARK_SUBMIT_OPTS, which
#: only spark-submit's JVMs read: drivers, the Connect server): C1 only. A standalone master and
#: worker (``spark-class``) read SPARK_DAEMON_JAVA_OPTS, the executors a worker launches
#: ``spark.executor.extraJavaOptions``; what Spark does is the same under either compiler. One
#: compiler thread, the serial collector, no perf-data file: as SPARK_SUBMIT_OPTS (conftest).
SHORT_LIVED_JVM_OPTIONS = (
    "-XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -XX:+UseSerialGC -XX:-UsePerfData"
)


def spark_env(**extra: str) -> dict[str, str]:
    """The environment of a Spark JVM started here: pyspark's folder as SPARK_HOME, loopback
    only, this interpreter for Python workers, small daemon heaps compiling with C1 only (a
    developer's own SPARK_DAEMON_JAVA_OPTS wins)."""
    env = {
        "SPARK_DAEMON_JAVA_OPTS": SHORT_LIVED_JVM_OPTIONS,
        **os.environ,
        "SPARK_HOME": str(PYSPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_HOSTNAME": "localhost",
        "SPARK_DAEMON_MEMORY": "256m",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    env.pop("SPARK_CONF_DIR", None)  # pyspark's own defaults, never a developer's conf folder
    env.update(extra)
    return env


@dataclass
class Service:
    """One started JVM: its process (leader of its own process group) and its log file."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def log_tail(self, chars: int = 3000) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return text[-chars:]

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(
                f"{self.name} exited with status {self.process.returncode}; its log "
                f"({self.log}) ends with:\n{self.log_tail()}"
            )

    def stop(self) -> None:
        """SIGTERM to the service's process group (its JVM and what it started), SIGKILL after
        20 s."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                return
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=20)
        # executors and Python workers left in the group (the JVM was killed first)
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)


def start_service(
    name: str, command: Sequence[str], log: Path, env: Mapping[str, str] | None = None
) -> Service:
    """Start ``command`` in a process group of its own, its output in ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as handle:
        process = subprocess.Popen(
            list(command),
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env or spark_env()),
            start_new_session=True,
        )
    return Service(name, process, log)


def wait_until(what: str, check: Any, service: Service, timeout: float = 120.0) -> Any:
    """Poll ``check()`` until it returns a truthy value; fail with the service's log when it
    exits or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        service.check_alive()
        try:
            value = check()
        except OSError:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{service.name}: {what} not after {timeout:.0f} s; its log ends with:\n"
                f"{service.log_tail()}"
            )
        time.sleep(0.25)


def http_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


# -------------------------------------------------------------------------- standalone cluster
@dataclass
class StandaloneCluster:
    """A running master and worker. ``master_url`` is what ``spark.master`` names."""

    master_url: str
    master_ui: str
    worker_ui: str
    work_dir: Path

    def master_state(self) -> Any:
        """The master's JSON (``/json``): workers, active and completed applications."""
        return http_json(f"{self.master_ui}/json")

    def worker_state(self) -> Any:
        """The worker's JSON (``/json``): its running and finished executors."""
        return http_json(f"{self.worker_ui}/json")


@contextmanager
def standalone_cluster(
    root: Path, *, cores: int = 1, memory: str = "1g"
) -> Iterator[StandaloneCluster]:
    """A standalone master and ONE worker (``cores`` cores, ``memory`` for executors) from
    pyspark's jars, on 127.0.0.1; both stopped on exit."""
    spark_class = str(PYSPARK_HOME / "bin" / "spark-class")
    master_port, master_ui_port, worker_ui_port = free_port(), free_port(), free_port()
    master_url = f"spark://127.0.0.1:{master_port}"
    work_dir = root / "worker-work"
    with ExitStack() as stack:
        master = start_service(
            "standalone master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(master_port),
                "--webui-port",
                str(master_ui_port),
            ],
            root / "master.log",
        )
        stack.callback(master.stop)
        master_ui = f"http://127.0.0.1:{master_ui_port}"
        wait_until(
            "the master's web UI",
            lambda: http_json(f"{master_ui}/json").get("status") == "ALIVE",
            master,
        )
        worker = start_service(
            "standalone worker",
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--webui-port",
                str(worker_ui_port),
                "--cores",
                str(cores),
                "--memory",
                memory,
                "--work-dir",
                str(work_dir),
                master_url,
            ],
            root / "worker.log",
        )
        stack.callback(worker.stop)  # stopped first (LIFO), then the master

        def registered() -> bool:
            workers = http_json(f"{master_ui}/json").get("workers", [])
            return any(w.get("state") == "ALIVE" for w in workers)

        wait_until("the worker's registration with the master", registered, worker)
        yield StandaloneCluster(
            master_url, master_ui, f"http://127.0.0.1:{worker_ui_port}", work_dir
        )


# ------------------------------------------------------------------------ Spark Connect server
@dataclass
class ConnectServer:
    """A running Spark Connect server: ``url`` is what ``spark.remote`` names."""

    url: str
    port: int
    service: Service


@contextmanager
def connect_server(
    root: Path,
    *,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
    jars: Sequence[str] = (),
) -> Iterator[ConnectServer]:
    """A Spark Connect server from pyspark's jars on 127.0.0.1 (its Spark in ``master``), its
    Python workers on this interpreter; stopped on exit."""
    port = free_port()
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.memory": "1g",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        # as the project's own sessions: no _SUCCESS markers, UTC
        "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.pyspark.python": sys.executable,
        **(conf or {}),
    }
    command = [str(PYSPARK_HOME / "bin" / "spark-submit"), "--class", CONNECT_SERVER_CLASS]
    command += ["--name", "watermark_assets_connect", "--master", master]
    if jars:
        command += ["--jars", ",".join(jars)]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    command.append("spark-internal")  # no application jar: the class is in pyspark's jars
    # the launcher sizes this server's heap like a daemon's: SPARK_DAEMON_MEMORY, not --conf
    env = spark_env(SPARK_DAEMON_MEMORY=settings["spark.driver.memory"])
    service = start_service("Spark Connect server", command, root / "connect-server.log", env)
    try:
        wait_until(f"port {port}", lambda: port_open(port), service)
        yield ConnectServer(f"sc://127.0.0.1:{port}", port, service)
    finally:
        service.stop()
