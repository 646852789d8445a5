"""The process's Spark session: created once with the project's defaults, after checking Java."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from watermark_assets.exceptions import JavaNotFoundError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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
}


_JAVA_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def check_java(env: Mapping[str, str] | None = None) -> int:
    """The major version of the Java that Spark will use; raises JavaNotFoundError below 17."""
    env = os.environ if env is None else env
    java_home = env.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        where = f"JAVA_HOME={java_home!r} has no bin/java" if java_home else "no 'java' on PATH"
        raise JavaNotFoundError(where)
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


def session_conf(master: str, conf: Mapping[str, str]) -> dict[str, str]:
    """The full Spark configuration: defaults, the master, the user's settings, this interpreter."""
    merged = {**SPARK_DEFAULTS, "spark.master": master, **conf}
    # Python workers must run the driver's interpreter, or pyarrow/fsspec are missing there.
    merged.setdefault("spark.pyspark.python", sys.executable)
    merged.setdefault("spark.pyspark.driver.python", sys.executable)
    return merged


def get_spark(master: str = "local[2]", conf: Mapping[str, str] | None = None) -> SparkSession:
    """The process's Spark session (created once, then reused), after checking Java."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    for key, value in session_conf(master, conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel((conf or {}).get("spark.log.level", "WARN"))
    return session
