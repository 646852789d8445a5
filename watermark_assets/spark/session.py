"""The process's Spark session: created once with the project's defaults, after checking Java.

Two kinds, chosen by configuration (``spark:`` in the YAML file, :class:`SparkConfig`):

- **classic** (``spark.master``: ``local[2]`` by default, ``spark://host:7077`` for a standalone
  cluster, ``yarn``, ``k8s://...``): this process starts the driver JVM (Java 17+ is checked
  first) and the executors run wherever the master puts them;
- **Spark Connect** (``spark.remote: sc://host:15002``): this process holds only a gRPC client;
  the plans run in a long-running Spark Connect server. No JVM starts here, and nothing on this
  path touches ``sparkContext``, RDDs or py4j.

One process holds one kind: pyspark cannot keep a classic and a Connect session side by side,
so asking for the other kind raises :class:`SparkSessionKindError`, which says so.

:func:`prestart` begins creating the session in a background thread (the JVM starts, or the
Connect channel opens, while the process goes on importing and planning); the first
:func:`spark_from_settings` of the same settings waits for it and gets its session, or its error.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from importlib import metadata
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from watermark_assets.exceptions import JavaNotFoundError, WatermarkAssetsError
from watermark_assets.spark import cds
from watermark_assets.spark.paths import NATIVE_S3_CONF, native_s3

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


LISTING_THRESHOLD_KEY = "spark.sql.sources.parallelPartitionDiscovery.threshold"

#: Settings every session gets; a user's ``spark.conf`` overrides them.
SPARK_DEFAULTS: Mapping[str, str] = {
    "spark.app.name": "watermark_assets",
    "spark.sql.session.timeZone": "UTC",
    # Delta stores timestamps as microseconds; Spark's default INT96 is not in the protocol.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "2g",
    # A batch names its files one by one; Spark's default (32) lists more than 32 paths in a
    # Spark job of its own (seconds, cold) where the driver stats local files in milliseconds.
    # Sessions that read S3 natively (paths.NATIVE_S3_CONF) keep Spark's default:
    # there each path is a request, which that job spreads over the executors.
    LISTING_THRESHOLD_KEY: "10000",
    # PySpark records the Python call site of every Column operation (a stack walk and four
    # py4j calls each: about a quarter of a column run's Python CPU). The expressions are this
    # package's, not the user's, so the call site would name our code; set "true" in spark.conf
    # to have Spark's errors name it again.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}

#: The defaults a Spark Connect client sets on its server session (the others are the server's
#: own start-up settings: memory, application name, console progress).
CONNECT_SESSION_DEFAULTS: Mapping[str, str] = {
    key: value
    for key, value in SPARK_DEFAULTS.items()
    if key.startswith(("spark.sql.", "spark.hadoop."))
}

#: Settings that only steer this process (its logging, its own JVM): never sent to a Connect server.
_CLIENT_ONLY_KEYS = frozenset({"spark.log.level", "spark.remote", "spark.master", cds.ENABLED_KEY})

#: delta-spark's Spark SQL extension and catalog (``spark.delta_spark: true`` sets both).
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"

#: pyspark 4 is built for Scala 2.13 only.
_SCALA_BINARY = "2.13"


class SparkStartError(WatermarkAssetsError):
    """Spark's driver JVM exited before the session existed (e.g. a package it could not fetch)."""

    def __init__(self, message: str, *, packages: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.packages = packages


class SparkSessionKindError(WatermarkAssetsError):
    """A classic session was asked for in a process holding a Connect one, or the reverse."""

    def __init__(self, wanted: str, holding: str) -> None:
        super().__init__(
            f"this process already holds a {holding} Spark session and cannot start a {wanted} "
            "one (pyspark keeps one kind per process); run the other kind in its own process "
            "(e.g. `watermark-assets --config OTHER.yaml run-sensors`), or use one kind: "
            "either spark.master or spark.remote in the configuration"
        )
        self.wanted = wanted
        self.holding = holding


class SparkConnectError(WatermarkAssetsError):
    """A Spark Connect server that cannot be reached, or a setting it refuses from a client."""


_JAVA_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def find_java(env: Mapping[str, str] | None = None) -> str:
    """The ``java`` that Spark will run (``$JAVA_HOME/bin/java``, else on PATH); raises
    JavaNotFoundError when there is none. A file check: no JVM starts."""
    env = os.environ if env is None else env
    java_home = env.get("JAVA_HOME")
    java = cds.java_binary(env)
    if not java or not os.path.exists(java):
        where = f"JAVA_HOME={java_home!r} has no bin/java" if java_home else "no 'java' on PATH"
        raise JavaNotFoundError(where)
    return java


def check_java(env: Mapping[str, str] | None = None) -> int:
    """The major version of the Java that Spark will use; raises JavaNotFoundError below 17."""
    java = find_java(env)
    try:
        output = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        ).stderr
    except OSError as error:
        raise JavaNotFoundError(f"{java} could not run ({error})") from error
    match = _JAVA_VERSION.search(output)
    if not match:
        raise JavaNotFoundError(f"could not read the version of {java}: {output.strip()[:200]!r}")
    major = int(match.group(1))
    if major == 1:  # "1.8.0" style
        major = int(match.group(2) or 0)
    if major < 17:
        raise JavaNotFoundError(f"{java} is Java {major}")
    return major


# ------------------------------------------------------------------------------------ delta-spark
def delta_spark_package(version: str | None = None) -> str:
    """delta-spark's Maven coordinates for this pyspark: ``io.delta:delta-spark_2.13:VERSION``,
    the version of the installed ``delta-spark`` Python package unless given."""
    if version is None:
        try:
            version = metadata.version("delta-spark")
        except metadata.PackageNotFoundError:
            raise SparkStartError(
                "spark.delta_spark: true takes delta-spark's jar version from the installed "
                "'delta-spark' Python package, which is not installed; pip install the "
                "delta-spark release made for your Spark version, or set delta_spark: false and "
                "name the jars yourself in spark.conf (spark.jars or spark.jars.packages)"
            ) from None
    return f"io.delta:delta-spark_{_SCALA_BINARY}:{version}"


def _items(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def with_delta_spark(conf: Mapping[str, str], version: str | None = None) -> dict[str, str]:
    """``conf`` with delta-spark: its Maven package (unless ``spark.jars`` already names a local
    delta-spark jar), the Delta SQL extension and the Delta catalog; the user's own values of
    these keys are kept (the extension is added to a list, the catalog only when unset)."""
    merged = dict(conf)
    if not any("delta-spark" in jar for jar in _items(merged.get("spark.jars"))):
        packages = _items(merged.get("spark.jars.packages"))
        if not any(p.startswith("io.delta:delta-spark") for p in packages):
            packages.append(delta_spark_package(version))
        merged["spark.jars.packages"] = ",".join(packages)
    extensions = _items(merged.get("spark.sql.extensions"))
    if DELTA_EXTENSION not in extensions:
        extensions.append(DELTA_EXTENSION)
    merged["spark.sql.extensions"] = ",".join(extensions)
    merged.setdefault("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
    return merged


# -------------------------------------------------------------------------------------- sessions
def defaults_for(conf: Mapping[str, str], defaults: Mapping[str, str]) -> dict[str, str]:
    """``defaults`` for a session of ``conf``: without the driver-side listing threshold when it
    reads S3 natively (Spark's own default then spreads the per-path requests over a job)."""
    if native_s3(conf.get(NATIVE_S3_CONF, "false")):
        return {k: v for k, v in defaults.items() if k != LISTING_THRESHOLD_KEY}
    return dict(defaults)


def session_conf(master: str, conf: Mapping[str, str]) -> dict[str, str]:
    """The full Spark configuration: defaults, the master, the user's settings, this interpreter."""
    merged = {**defaults_for(conf, SPARK_DEFAULTS), "spark.master": master, **conf}
    # Python workers must run the driver's interpreter, or pyarrow/fsspec are missing there.
    merged.setdefault("spark.pyspark.python", sys.executable)
    merged.setdefault("spark.pyspark.driver.python", sys.executable)
    return merged


#: Sessions being created by :func:`prestart`, by their settings; taken by the first use.
_prestarts: dict[tuple[tuple[str, str], ...], Future[SparkSession]] = {}
_prestarts_lock = threading.Lock()


#: Settings that choose the driver's address themselves (then Spark is left to them).
_ADDRESS_KEYS = ("spark.driver.host", "spark.driver.bindAddress")


def local_address_env(
    master: str, conf: Mapping[str, str], env: Mapping[str, str]
) -> dict[str, str]:
    """``SPARK_LOCAL_IP=127.0.0.1`` for a ``local`` master (driver and executors in this one
    JVM, nothing connects from elsewhere), unless ``env`` sets it or ``conf`` chooses the
    driver's address: Spark then needs not guess an address, which on a host whose name
    resolves to a loopback address prints "Your hostname ... resolves to a loopback address"
    at every start. Nothing for a cluster master, whose executors must reach the driver."""
    local = master.startswith("local")  # local, local[N], local-cluster[...]: this host only
    if not local or "SPARK_LOCAL_IP" in env or any(key in conf for key in _ADDRESS_KEYS):
        return {}
    return {"SPARK_LOCAL_IP": "127.0.0.1"}


def _settings_key(settings: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in settings.items()))


def prestart(settings: Mapping[str, str]) -> None:
    """Begin creating the session for ``settings`` in a daemon thread, now, and return.

    PySpark's modules are imported first, in the caller's thread (:func:`_session_modules`),
    and :data:`WARM_IMPORTS` while the JVM starts. The classic JVM's start (seconds) then runs
    beside whatever this process does next (loading the code location, planning the run); the
    first :func:`spark_from_settings` of the same settings waits for the thread and returns its
    session, or raises its error (a missing Java, an unreachable Connect server): errors
    surface at first use, in the run, never here. A second prestart of the same settings
    before that first use does nothing; one after it only finds the session that exists
    (``getOrCreate``).
    """
    key = _settings_key(settings)
    with _prestarts_lock:
        if key in _prestarts:
            return
        future: Future[SparkSession] = Future()
        _prestarts[key] = future

    def create() -> None:
        try:
            future.set_result(_create_from_settings(settings))
        except BaseException as error:  # handed to the first use, which raises it
            future.set_exception(error)

    _import_all(_session_modules(settings))
    threading.Thread(target=create, name="watermark_assets-spark-prestart", daemon=True).start()
    _import_all(WARM_IMPORTS)  # while the JVM starts


def _session_modules(settings: Mapping[str, str]) -> tuple[str, ...]:
    """What creating the session of ``settings`` imports. :func:`prestart` imports them in its
    caller's thread before the session's thread starts: two threads importing modules of one
    import cycle at once (PySpark has several) make Python raise ``_DeadlockError`` in one of
    them, and the caller goes on importing the code location (which imports PySpark too)."""
    modules = ("pyspark", "pyspark.sql", "pyspark.sql.functions")
    if "spark.remote" in settings:
        return (*modules, "pyspark.sql.connect.session")
    return modules


#: Modules a run's first DataFrame expression imports: PySpark's ``lit`` imports
#: ``pyspark.testing.utils`` on its first call (to ask whether numpy is there), which imports
#: pandas and protobuf (about 0.4 s). :func:`prestart` imports them while the JVM starts.
WARM_IMPORTS = ("pyspark.testing.utils",)


def _import_all(modules: tuple[str, ...]) -> None:
    """Import ``modules``; one that fails is left to the code that needs it, which reports it."""
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            continue


def spark_from_settings(settings: Mapping[str, str]) -> SparkSession:
    """The session for flat ``spark.*`` settings (``SparkConfig.settings()``): Spark Connect when
    they hold ``spark.remote``, else classic on ``spark.master`` (default ``local[2]``). The
    first call after a :func:`prestart` of the same settings waits for it instead."""
    return start_spark(settings)[0]


def start_spark(settings: Mapping[str, str]) -> tuple[SparkSession, float | None]:
    """:func:`spark_from_settings` and the seconds it waited for a :func:`prestart` of these
    settings (0.0: the session was ready), or None when it created the session itself."""
    with _prestarts_lock:
        future = _prestarts.pop(_settings_key(settings), None)
    if future is None:
        return _create_from_settings(settings), None
    started = time.perf_counter()
    session = future.result()
    return session, time.perf_counter() - started


def _create_from_settings(settings: Mapping[str, str]) -> SparkSession:
    conf = dict(settings)
    remote = conf.pop("spark.remote", None)
    master = conf.pop("spark.master", "local[2]")
    return get_spark(master, conf, remote=remote)


def get_spark(
    master: str = "local[2]", conf: Mapping[str, str] | None = None, *, remote: str | None = None
) -> SparkSession:
    """The process's Spark session (created once, then reused): a Spark Connect client session
    when ``remote`` (``sc://host:port``) is given, else a classic one on ``master`` after
    finding Java (its version is read only when the JVM does not start); the driver JVM maps
    Spark's classes from a class-data sharing archive when one exists
    (:mod:`watermark_assets.spark.cds`)."""
    if remote is not None:
        return _connect_session(remote, conf or {})
    from pyspark.sql import SparkSession
    from pyspark.sql.utils import is_remote

    if is_remote():
        raise SparkSessionKindError("classic", "Spark Connect")
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    from pyspark import SparkContext

    if SparkContext._active_spark_context is None:  # else Java runs: the session exists
        find_java()  # its version is read only if the JVM does not start (a JVM start less)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.update(local_address_env(master, conf or {}, os.environ))
    merged = cds.with_archive(session_conf(master, conf or {}))
    builder = SparkSession.builder
    for key, value in merged.items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except Exception as error:
        if _gateway_exited(error):
            check_java()  # a Java below 17, or one that does not run, is named here
            packages = tuple(_items(merged.get("spark.jars.packages")))
            if packages:
                message = _packages_message(packages, merged)
                raise SparkStartError(message, packages=packages) from error
        raise
    session.sparkContext.setLogLevel((conf or {}).get("spark.log.level", "WARN"))
    _end_jvm_first_at_exit()
    return session


#: The driver JVM processes :func:`_end_jvm_first_at_exit` registered (one per launched JVM).
_ending_at_exit: set[int] = set()


def _end_jvm_first_at_exit() -> None:
    """At this interpreter's exit, tell the driver JVM this process started to stop first.

    The JVM stops when its stdin closes (Spark's gateway reads it until EOF, then its shutdown
    hook stops the SparkContext: temporary folders removed, the event log closed), which
    happens only once the interpreter has finished: a run worker's interpreter spends a few
    tenths of a second tearing down Dagster's, pandas' and pyarrow's modules first, and whoever
    waits for the process (a run launcher, a benchmark) waits for both in turn. Closing the
    pipe in an exit handler (after every run, fixture and resource is done) lets the JVM's
    stop run beside that teardown (0.4 s less per process, measured). Nothing changes for a
    JVM this process did not start (a gateway it connected to)."""
    import atexit
    import contextlib

    from pyspark import SparkContext

    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None) if gateway is not None else None
    stdin = getattr(process, "stdin", None)
    if process is None or stdin is None or process.pid in _ending_at_exit:
        return
    _ending_at_exit.add(process.pid)

    def close() -> None:
        with contextlib.suppress(OSError):  # the JVM is gone already
            stdin.close()

    atexit.register(close)


def _gateway_exited(error: BaseException) -> bool:
    get_condition = getattr(error, "getCondition", None)
    return callable(get_condition) and get_condition() == "JAVA_GATEWAY_EXITED"


def _packages_message(packages: tuple[str, ...], conf: Mapping[str, str]) -> str:
    source = ", ".join(
        f"{key}={conf[key]}"
        for key in ("spark.jars.repositories", "spark.jars.ivySettings")
        if key in conf
    )
    source = source or "Maven Central (repo1.maven.org) and spark-packages"
    return (
        f"Spark did not start: its launcher exited while fetching spark.jars.packages "
        f"{list(packages)} from {source} (the launcher's log above says which artifact was not "
        "found: 'unresolved dependency'). Where the repository cannot be reached, download the "
        "jars elsewhere and name the local files in spark.conf's spark.jars (for "
        "spark.delta_spark: the delta-spark and delta-storage jars of that version; a "
        "delta-spark jar in spark.jars replaces the package), or point spark.jars.repositories / "
        "spark.jars.ivySettings at a reachable mirror, or set spark.delta_spark: false"
    )


def connect_address(remote: str) -> tuple[str, int]:
    """``(host, port)`` of a ``sc://host:port[/;params]`` URL (Spark Connect's default port
    15002 when none is given); ValueError naming the URL and the expected form otherwise."""
    parts = urlsplit(remote)
    if parts.scheme != "sc" or not parts.hostname:
        raise ValueError(
            f"spark.remote {remote!r} is not a Spark Connect URL; write sc://HOST:PORT "
            "(e.g. sc://127.0.0.1:15002)"
        )
    try:
        port = parts.port or 15002
    except ValueError:
        raise ValueError(
            f"spark.remote {remote!r} has no valid port; write sc://HOST:PORT "
            "(e.g. sc://127.0.0.1:15002)"
        ) from None
    return parts.hostname, port


def _connect_session(remote: str, conf: Mapping[str, str]) -> SparkSession:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        raise SparkSessionKindError("Spark Connect", "classic")
    try:
        host, port = connect_address(remote)
    except ValueError as error:
        raise SparkConnectError(str(error)) from None
    try:  # fail in seconds, not after the client's minutes of retries
        socket.create_connection((host, port), timeout=10).close()
    except OSError as error:
        raise SparkConnectError(
            f"spark.remote {remote!r}: no Spark Connect server answers at {host}:{port} "
            f"({error}); start one (docs/operations.md: 'From laptop to cluster') or fix the URL"
        ) from None
    session = SparkSession.builder.remote(remote).getOrCreate()
    settings = {**defaults_for(conf, CONNECT_SESSION_DEFAULTS), **conf}
    refused: list[str] = []
    reason = ""
    for key, value in settings.items():
        if key in _CLIENT_ONLY_KEYS:
            continue
        try:
            session.conf.set(key, value)
        except Exception as error:  # pyspark.errors.AnalysisException: CANNOT_MODIFY_CONFIG ...
            refused.append(key)  # names only: a value may be a credential
            reason = reason or str(error).strip().splitlines()[0][:120]
    if refused:
        session.stop()
        raise SparkConnectError(
            f"spark.remote {remote!r}: the server refuses these spark.conf settings from a "
            f"client: {', '.join(refused)}; set them on the server (spark-submit --conf "
            f"KEY=VALUE ... SparkConnectServer) and remove them from spark.conf ({reason})"
        )
    return session
