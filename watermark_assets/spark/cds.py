"""Class-data sharing for the driver JVM: Spark's classes mapped from one archive file.

A classic session's JVM spends most of its start-up reading and verifying the few thousand
classes of Spark's jars. Java 17's dynamic class-data sharing (JEP 350) stores those classes,
already parsed and verified, in an archive that later JVMs map at start: the driver then starts
in about half the time, and far faster on a loaded machine (benchmarks/bench_run_latency.py).

The archive belongs to one Java and one Spark installation: its name holds an id of where they
are (the ``java`` binary's and the jars folder's real paths) and a digest of what they hold, so
several installations (checkouts, virtualenvs) keep one archive each side by side:

- :func:`driver_java_options` gives the JVM options that map it, or None when it does not exist
  yet, after starting :func:`build` in a background process (low priority, detached) so that a
  later session has it; the session starting now does not wait and starts as it always did;
- :func:`build` (``python -m watermark_assets.spark.cds``; ``make setup`` runs it, and so should
  an image's build) runs a small Spark workload in a JVM that writes the archive when it exits,
  to a temporary name renamed into place only once complete, under a lock so that one builder
  works at a time; it removes this installation's earlier archives (an upgrade) and any archive
  no session has used for :data:`UNUSED_DAYS` days (an installation that is gone).

Nothing here can break a session: an archive the JVM cannot use (another Java, a changed class
path, a damaged file) is ignored by the JVM (its warnings are switched off), and any error while
looking for or building the archive only means no archive. ``spark.class_data_sharing: false``
in the configuration turns it off; ``WATERMARK_ASSETS_CACHE`` names the folder (default
``$XDG_CACHE_HOME/watermark_assets`` or ``~/.cache/watermark_assets``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

#: The configuration key that turns class-data sharing off ("false"); SparkConfig sets it.
ENABLED_KEY = "spark.watermark_assets.classDataSharing"

#: A builder's lock older than this is stale (its process died without removing it).
_LOCK_STALE_SECONDS = 15 * 60

#: An archive no session has used for this many days is removed by the next build (a session
#: marks the archive it maps as used: its modification time).
UNUSED_DAYS = 30

#: What Spark's launcher treats specially in an option string (extraJavaOptions): it splits at
#: whitespace and honours quotes and backslashes.
_OPTION_SPECIAL = re.compile(r"[\s\"'\\]")

_ARCHIVE_NAME = re.compile(r"spark-.+-([0-9a-f]{8})-[0-9a-f]{16}\.jsa")

#: The JVM's CDS warnings (an archive of another class path, a damaged file) stay out of the
#: run's output: such an archive is simply not used.
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"

_started_build = False


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The folder of the archives: ``WATERMARK_ASSETS_CACHE``, else the XDG cache folder."""
    env = os.environ if env is None else env
    if env.get("WATERMARK_ASSETS_CACHE"):
        return Path(env["WATERMARK_ASSETS_CACHE"])
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "watermark_assets"


def java_binary(env: Mapping[str, str] | None = None) -> str | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    env = os.environ if env is None else env
    java_home = env.get("JAVA_HOME")
    if java_home:
        return os.path.join(java_home, "bin", "java")
    return shutil.which("java", path=env.get("PATH"))


def archive_path(env: Mapping[str, str] | None = None) -> Path | None:
    """Where the archive of this Java and this Spark lives (whether it exists or not), or None
    when either cannot be found. The name changes with the Java binary and with any jar of
    Spark's (name, size, modification time), so an upgrade of either gets a new archive."""
    from pyspark import __version__ as pyspark_version
    from pyspark.find_spark_home import _find_spark_home

    java = java_binary(env)
    if not java or not os.path.exists(java):
        return None
    real = os.path.realpath(java)
    jars = os.path.realpath(Path(_find_spark_home()) / "jars")
    digest = hashlib.sha256()
    stat = os.stat(real)
    digest.update(f"{real}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    try:
        entries = sorted(os.scandir(jars), key=lambda e: e.name)
    except OSError:
        return None
    for entry in entries:
        info = entry.stat()
        digest.update(f"{entry.name}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    where = hashlib.sha256(f"{real}\0{jars}".encode()).hexdigest()[:8]
    name = f"spark-{pyspark_version}-{where}-{digest.hexdigest()[:16]}.jsa"
    return cache_dir(env) / name


def _installation(path: Path) -> str | None:
    """The installation id in an archive's name (``spark-VERSION-WHERE-DIGEST.jsa``); None for a
    name of another form (an earlier naming)."""
    named = _ARCHIVE_NAME.fullmatch(path.name)
    return named.group(1) if named else None


def jvm_option(option: str) -> str:
    """``option`` as ONE item of a Spark option string such as ``spark.driver.extraJavaOptions``:
    quoted when it holds whitespace, a quote or a backslash (a cache folder under a home folder
    with a space in its name)."""
    if not _OPTION_SPECIAL.search(option):
        return option
    return '"' + option.replace("\\", "\\\\").replace('"', '\\"') + '"'


def driver_java_options(conf: Mapping[str, str]) -> str | None:
    """The JVM options that map the archive, for ``spark.driver.extraJavaOptions``; None when
    class-data sharing is off in ``conf`` or the archive does not exist yet (then a background
    :func:`build` starts, once per process, unless one is running)."""
    if str(conf.get(ENABLED_KEY, "true")).strip().lower() == "false":
        return None
    try:
        path = archive_path()
        if path is None:
            return None
        if path.is_file():
            _mark_used(path)
            return f"{jvm_option(f'-XX:SharedArchiveFile={path}')} {_QUIET}"
        _start_background_build(path)
    except Exception as error:  # an archive is an optimisation, never a failure
        log.debug("no class-data sharing archive: %s", error)
    return None


def with_archive(conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` for the JVM: :func:`driver_java_options` added to the user's
    ``spark.driver.extraJavaOptions`` (theirs first), :data:`ENABLED_KEY` consumed (not a
    Spark setting)."""
    merged = {k: v for k, v in conf.items() if k != ENABLED_KEY}
    options = driver_java_options(conf)
    if options:
        own = merged.get("spark.driver.extraJavaOptions", "").strip()
        merged["spark.driver.extraJavaOptions"] = f"{own} {options}".strip()
    return merged


def _start_background_build(path: Path) -> None:
    global _started_build
    if _started_build or _lock_held(_lock_path(path)):
        return
    _started_build = True
    path.parent.mkdir(parents=True, exist_ok=True)
    # `nice`, not a preexec_fn: this may run in the prestart thread, and a preexec_fn is unsafe
    # in a process with threads
    nice = shutil.which("nice")
    command = [sys.executable, "-m", "watermark_assets.spark.cds", "--quiet"]
    with open(path.parent / "build.log", "ab") as output:
        subprocess.Popen(
            [nice, "-n", "10", *command] if nice else command,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # not killed with the run's process group, nor waited for
        )
    log.info("building Spark's class-data sharing archive in the background: %s", path)


def _mark_used(path: Path) -> None:
    """The archive's modification time is its last use (at most one touch a day)."""
    try:
        if time.time() - path.stat().st_mtime > 86400:
            os.utime(path)
    except OSError:  # a read-only cache (an image's) is used as it is
        pass


def _remove_stale(path: Path) -> None:
    """This installation's other archives (an upgrade replaced them), archives named in an
    earlier form, and any archive unused for :data:`UNUSED_DAYS` days; archives of other
    installations in use stay."""
    unused = time.time() - UNUSED_DAYS * 86400
    for other in path.parent.glob("spark-*.jsa"):
        where = _installation(other)
        try:
            if other != path and (
                where in (None, _installation(path)) or other.stat().st_mtime < unused
            ):
                other.unlink()
        except OSError:  # removed meanwhile by another builder
            continue


def _lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def _lock_held(lock: Path) -> bool:
    try:
        return time.time() - lock.stat().st_mtime < _LOCK_STALE_SECONDS
    except FileNotFoundError:
        return False


def _take_lock(lock: Path) -> bool:
    if lock.exists() and not _lock_held(lock):
        lock.unlink(missing_ok=True)  # stale: its builder died
    try:
        descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.write(descriptor, str(os.getpid()).encode())
    os.close(descriptor)
    return True


def build(path: Path | None = None, *, timeout: float = 600) -> Path | None:
    """Write the archive (the path :func:`archive_path` names unless given) and return it; None
    when another builder holds the lock, or Java or Spark cannot be found. An existing archive
    is kept as it is."""
    path = path or archive_path()
    if path is None:
        return None
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = _lock_path(path)
    if not _take_lock(lock):
        return None
    for left in path.parent.glob(f"{path.name}.*.partial"):  # of builders that died
        left.unlink(missing_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        with open(path.parent / "build.log", "ab") as output:  # Spark's start-up chatter
            subprocess.run(
                [sys.executable, "-m", "watermark_assets.spark.cds", "--dump", str(partial)],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=True,
            )
        if not partial.is_file() or partial.stat().st_size == 0:
            raise RuntimeError(f"the JVM wrote no archive at {partial}")
        os.replace(partial, path)  # complete, or not there at all
        _remove_stale(path)
        return path
    finally:
        partial.unlink(missing_ok=True)
        lock.unlink(missing_ok=True)


def _dump(partial: Path) -> None:
    """Run a small workload of the kinds the pipelines run (JSON and CSV with a corrupt-record
    column and ``_metadata``, observed metrics, partitioned Parquet written and read, a join, an
    aggregation) in a JVM that writes its loaded classes to ``partial`` as it exits."""
    from pyspark import SparkContext
    from pyspark.sql import Observation, SparkSession
    from pyspark.sql import functions as F

    from watermark_assets.spark.session import session_conf

    options = f"{jvm_option(f'-XX:ArchiveClassesAtExit={partial}')} {_QUIET}"
    builder = SparkSession.builder
    # a run's own session settings (session_conf), so the archive holds what a run loads
    extra = {"spark.ui.enabled": "false", "spark.driver.extraJavaOptions": options}
    conf = session_conf("local[2]", extra)
    for key, value in conf.items():
        builder = builder.config(key, value)
    with tempfile.TemporaryDirectory(prefix="watermark_assets_cds_") as work:
        folder = Path(work)
        (folder / "a.json").write_text('{"id": 1, "at": "2024-01-01T00:00:00"}\n{"id": \n')
        (folder / "b.csv").write_text("id,seen\n1,2024-01-01T00:00:00\n")
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        frame = (
            spark.read.schema("id BIGINT, at TIMESTAMP, _corrupt STRING")
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", "_corrupt")
            .json(str(folder / "a.json"))
            .withColumn("file", F.col("_metadata.file_path"))
        )
        frame = frame.withColumn("day", F.to_date("at")).withColumn(
            "found", F.element_at(F.from_json(F.lit("{}"), "map<string,string>"), F.col("file"))
        )
        observation = Observation("cds")
        frame = frame.observe(observation, F.count_if(F.col("_corrupt").isNull()).alias("n"))
        frame.drop("_corrupt").write.partitionBy("day").parquet(str(folder / "out"))
        _ = observation.get
        csv = spark.read.schema("id BIGINT, seen TIMESTAMP").option("header", "true")
        other = csv.csv(str(folder / "b.csv"))
        back = spark.read.parquet(str(folder / "out"))
        back.join(other, "id").groupBy("day").agg(F.max("at")).collect()
        spark.stop()
        gateway = SparkContext._gateway
        process = getattr(gateway, "proc", None) if gateway is not None else None
        if process is None:
            raise RuntimeError("no driver JVM process to wait for")
        process.stdin.close()  # the gateway exits on EOF; the JVM writes the archive as it exits
        process.wait()


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m watermark_assets.spark.cds",
        description="Build the class-data sharing archive of this Java and Spark (once).",
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing when it exists")
    parser.add_argument("--dump", help=argparse.SUPPRESS)  # build()'s child: the JVM's workload
    args = parser.parse_args(argv)
    if args.dump:
        _dump(Path(args.dump))
        return 0
    path = archive_path()
    if path is None:
        print("no Java or no Spark found: no archive to build", file=sys.stderr)
        return 1
    if path.is_file():
        if not args.quiet:
            print(f"Spark class-data sharing archive: {path} (exists)")
        return 0
    started = time.perf_counter()
    print(f"building Spark's class-data sharing archive {path} ...", flush=True)
    try:
        built = build(path)
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        print(
            f"could not build it ({error}; Spark's output: {path.parent / 'build.log'}); "
            "sessions start without it",
            file=sys.stderr,
        )
        return 1
    if built is None:
        print("another process is building it; nothing to do", flush=True)
        return 0
    size = built.stat().st_size / 1e6
    print(f"built in {time.perf_counter() - started:.0f} s ({size:.0f} MB)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
