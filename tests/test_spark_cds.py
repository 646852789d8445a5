"""The driver JVM maps Spark's classes from a class-data sharing archive (spark/cds.py).

The archive is named after the Java and the Spark it belongs to; a session gets the JVM options
only when it exists (else a background build starts); a real JVM loads Spark's classes from it;
a damaged archive or one of another installation never stops a session, and prints nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from watermark_assets.config import SparkConfig
from watermark_assets.spark import cds

#: A process that starts a classic session from flat settings (argv[1] as JSON) and prints a
#: count: the session's JVM is started exactly as a run's is (get_spark).
SESSION_SCRIPT = """
import json, sys
from watermark_assets.spark.session import spark_from_settings
spark = spark_from_settings(json.loads(sys.argv[1]))
print("COUNT", spark.range(7).count())
print("OPTIONS", spark.sparkContext.getConf().get("spark.driver.extraJavaOptions", ""))
"""


def fake_installation(root: Path, jar_bytes: bytes = b"jar") -> dict[str, str]:
    """A JAVA_HOME with a bin/java and a SPARK_HOME with one jar, as an environment."""
    (root / "java" / "bin").mkdir(parents=True, exist_ok=True)
    (root / "java" / "bin" / "java").write_text("#!/bin/sh\n")
    (root / "spark" / "jars").mkdir(parents=True, exist_ok=True)
    (root / "spark" / "jars" / "spark-core.jar").write_bytes(jar_bytes)
    return {
        "JAVA_HOME": str(root / "java"),
        "SPARK_HOME": str(root / "spark"),
        "WATERMARK_ASSETS_CACHE": str(root / "cache"),
    }


def test_the_archive_is_named_after_the_java_and_the_spark_it_belongs_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = fake_installation(tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    first = cds.archive_path()
    assert first is not None
    assert first.parent == tmp_path / "cache"
    assert first.name.startswith("spark-") and first.suffix == ".jsa"
    assert cds.archive_path() == first  # stable while nothing changes
    (tmp_path / "spark" / "jars" / "spark-core.jar").write_bytes(b"an upgraded jar")
    upgraded = cds.archive_path()
    assert upgraded not in (None, first)
    assert upgraded is not None and cds._installation(upgraded) == cds._installation(first)
    # the same Java and Spark installed elsewhere (another checkout's virtualenv): its own name
    for name, value in fake_installation(tmp_path / "elsewhere").items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WATERMARK_ASSETS_CACHE", str(tmp_path / "cache"))
    other = cds.archive_path()
    assert other is not None and cds._installation(other) not in (None, cds._installation(first))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java-here"))
    assert cds.archive_path() is None


DAY = 86400


@pytest.mark.parametrize(
    ("name", "unused_days", "stays"),
    [
        ("spark-4.2.0-bbbbbbbb-3333333333333333.jsa", 0, True),  # another installation's, in use
        ("spark-4.2.0-bbbbbbbb-3333333333333333.jsa", 29, True),
        ("spark-4.2.0-bbbbbbbb-3333333333333333.jsa", 31, False),  # its installation is gone
        ("spark-4.2.0-aaaaaaaa-2222222222222222.jsa", 0, False),  # ours before an upgrade
        ("spark-4.2.0-a059b9a51787d96f.jsa", 0, False),  # named in the earlier form
        ("spark-4.2.0-preview1-cccccccc-4444444444444444.jsa", 0, True),  # a version with a dash
    ],
)
def test_a_build_removes_only_archives_no_installation_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, unused_days: int, stays: bool
) -> None:
    """Two checkouts on one machine keep one archive each (each build removed the other's, and
    each session then started a 150 s build of its own again)."""
    existing = tmp_path / name
    existing.write_bytes(b"an archive")
    when = time.time() - unused_days * DAY
    os.utime(existing, (when, when))
    monkeypatch.setattr(
        cds.subprocess, "run", lambda command, **_: Path(command[-1]).write_bytes(b"archive")
    )
    ours = tmp_path / "spark-4.2.0-aaaaaaaa-1111111111111111.jsa"
    assert cds.build(ours) == ours
    assert existing.exists() is stays


def test_a_session_marks_the_archive_it_maps_as_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "spark-4.2.0-aaaaaaaa-1111111111111111.jsa"
    archive.write_bytes(b"archive")
    weeks_ago = time.time() - 20 * DAY
    os.utime(archive, (weeks_ago, weeks_ago))
    monkeypatch.setattr(cds, "archive_path", lambda env=None: archive)
    assert cds.driver_java_options({}) is not None
    assert time.time() - archive.stat().st_mtime < 60


@pytest.mark.parametrize(
    ("option", "item"),
    [
        ("-XX:SharedArchiveFile=/root/.cache/a.jsa", "-XX:SharedArchiveFile=/root/.cache/a.jsa"),
        ("-XX:SharedArchiveFile=/home/jo doe/a.jsa", '"-XX:SharedArchiveFile=/home/jo doe/a.jsa"'),
        ("-XX:X=/a/it's *", '"-XX:X=/a/it\'s *"'),
        ('-XX:X=/a/"q"\\b', '"-XX:X=/a/\\"q\\"\\\\b"'),
    ],
)
def test_a_jvm_option_is_one_item_of_sparks_option_string(option: str, item: str) -> None:
    assert cds.jvm_option(option) == item


@pytest.mark.parametrize(
    ("archive_exists", "conf", "expected_options"),
    [
        # the archive exists: its options, after the user's own
        (True, {}, "-XX:SharedArchiveFile={archive} " + cds._QUIET),
        (
            True,
            {"spark.driver.extraJavaOptions": "-Dmine=1"},
            "-Dmine=1 -XX:SharedArchiveFile={archive} " + cds._QUIET,
        ),
        # turned off in the configuration: the user's options as they were
        (True, {cds.ENABLED_KEY: "false"}, None),
        (True, {cds.ENABLED_KEY: "False", "spark.driver.extraJavaOptions": "-Dmine=1"}, "-Dmine=1"),
        # no archive yet: nothing added (the JVM would run without its base archive too)
        (False, {}, None),
    ],
)
def test_a_session_maps_the_archive_only_when_it_exists_and_is_wanted(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    archive_exists: bool,
    conf: dict[str, str],
    expected_options: str | None,
) -> None:
    archive = tmp_path / "spark-x.jsa"
    if archive_exists:
        archive.write_bytes(b"archive")
    monkeypatch.setattr(cds, "archive_path", lambda env=None: archive)
    builds: list[Path] = []
    monkeypatch.setattr(cds, "_start_background_build", builds.append)
    merged = cds.with_archive(conf)
    got = merged.get("spark.driver.extraJavaOptions")
    assert got == (expected_options.format(archive=archive) if expected_options else None)
    assert builds == ([] if archive_exists or conf.get(cds.ENABLED_KEY) else [archive])


def test_a_session_without_an_archive_starts_one_background_builder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session goes on without the archive; one detached builder runs (here it fails: the
    installation is fake, and it says so in its log) and leaves no lock behind."""
    for name, value in fake_installation(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(cds, "_started_build", False)
    assert cds.driver_java_options({}) is None
    assert cds.driver_java_options({}) is None  # a second session of the process: no second one
    log = tmp_path / "cache" / "build.log"
    deadline = time.monotonic() + 120
    while "could not build it" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, log.read_text() if log.exists() else "no build.log"
        time.sleep(0.5)
    assert log.read_text().count("building Spark's class-data sharing archive") == 1
    assert list((tmp_path / "cache").glob("*.lock")) == []
    assert list((tmp_path / "cache").glob("*.jsa")) == []


def test_spark_config_turns_class_data_sharing_off_by_a_flat_setting() -> None:
    assert cds.ENABLED_KEY not in SparkConfig().settings()
    assert SparkConfig(class_data_sharing=False).settings()[cds.ENABLED_KEY] == "false"


def test_one_builder_at_a_time_and_a_dead_builders_lock_is_taken_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "spark-x.jsa"
    lock = tmp_path / "spark-x.jsa.lock"
    lock.write_text("12345")  # a builder at work
    assert cds.build(archive) is None
    assert lock.exists() and not archive.exists()
    stale = time.time() - 2 * cds._LOCK_STALE_SECONDS
    os.utime(lock, (stale, stale))  # its builder died long ago
    calls: list[list[str]] = []

    def fake_run(command: list[str], **_: object) -> None:
        calls.append(command)
        Path(command[-1]).write_bytes(b"the JVM's archive")

    monkeypatch.setattr(cds.subprocess, "run", fake_run)
    assert cds.build(archive) == archive
    assert archive.read_bytes() == b"the JVM's archive"
    assert not lock.exists() and list(tmp_path.glob("*.partial")) == []
    assert calls[0][-2:] == ["--dump", calls[0][-1]]


def test_a_builder_that_writes_nothing_leaves_no_archive_and_no_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "spark-x.jsa"
    monkeypatch.setattr(cds.subprocess, "run", lambda command, **_: None)
    with pytest.raises(RuntimeError, match="wrote no archive"):
        cds.build(archive)
    assert [p.name for p in tmp_path.iterdir()] == ["build.log"]


def run_session(tmp_path: Path, env: dict[str, str], settings: str = "{}") -> tuple[str, str]:
    """A session in a new process: (its driver JVM's extraJavaOptions, its stderr)."""
    result = subprocess.run(
        [sys.executable, "-c", SESSION_SCRIPT, settings],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "COUNT 7" in result.stdout
    [options] = [line for line in result.stdout.splitlines() if line.startswith("OPTIONS ")]
    return options.removeprefix("OPTIONS "), result.stderr


def project_archive(timeout: float = 900) -> Path:
    """The project's archive: make setup built it; else it is built here, or by the background
    builder another session started (then this waits for it)."""
    path = cds.archive_path()
    assert path is not None, "no Java or no Spark"
    deadline = time.monotonic() + timeout
    while not path.is_file():
        if cds.build(path) is None:  # another builder holds the lock
            assert time.monotonic() < deadline, f"no archive at {path} after {timeout} s"
            time.sleep(2)
    return path


@pytest.mark.spark  # a driver JVM in a subprocess
def test_a_real_driver_jvm_loads_sparks_classes_from_the_archive(tmp_path: Path) -> None:
    archive = project_archive()
    loaded = tmp_path / "classes.log"
    settings = f'{{"spark.driver.extraJavaOptions": "-Xlog:class+load=info:file={loaded}"}}'
    options, _ = run_session(tmp_path, {}, settings)
    assert f"-XX:SharedArchiveFile={archive}" in options
    lines = loaded.read_text().splitlines()
    context = [line for line in lines if "org.apache.spark.SparkContext " in line]
    assert context and "source: shared objects file (top)" in context[0], context
    shared = sum("shared objects file (top)" in line for line in lines)
    assert shared > 3000, f"only {shared} classes came from the archive"

    off = f'{{"spark.driver.extraJavaOptions": "-Xlog:class+load=info:file={loaded}", ' \
          f'"{cds.ENABLED_KEY}": "false"}}'  # fmt: skip
    options, _ = run_session(tmp_path, {}, off)
    assert "SharedArchiveFile" not in options
    context = [line for line in loaded.read_text().splitlines() if "SparkContext " in line]
    assert context and "spark-core_" in context[0] and "shared objects" not in context[0], context


@pytest.mark.spark  # a driver JVM in a subprocess
def test_an_archive_in_a_folder_with_a_space_a_quote_and_a_star_is_mapped(
    tmp_path: Path,
) -> None:
    """Spark splits extraJavaOptions at whitespace: unquoted, such a path became a second
    argument, which the JVM took for its main class and did not start."""
    archive = project_archive()
    cache = tmp_path / "jo's cache *"
    cache.mkdir()
    placed = cache / archive.name
    try:
        os.link(archive, placed)
    except OSError:  # another file system
        shutil.copyfile(archive, placed)
    loaded = tmp_path / "classes.log"
    settings = f'{{"spark.driver.extraJavaOptions": "-Xlog:class+load=info:file={loaded}"}}'
    options, _ = run_session(tmp_path, {"WATERMARK_ASSETS_CACHE": str(cache)}, settings)
    assert cds.jvm_option(f"-XX:SharedArchiveFile={placed}") in options
    context = [line for line in loaded.read_text().splitlines() if "SparkContext " in line]
    assert context and "source: shared objects file (top)" in context[0], context


@pytest.mark.spark  # a driver JVM in a subprocess
def test_a_damaged_archive_never_stops_a_session_and_prints_nothing(tmp_path: Path) -> None:
    env = {"WATERMARK_ASSETS_CACHE": str(tmp_path / "cache")}
    archive = cds.archive_path({**os.environ, **env})
    assert archive is not None
    archive.parent.mkdir(parents=True)
    archive.write_bytes(os.urandom(4096))  # e.g. a disk that filled up mid-copy
    options, stderr = run_session(tmp_path, env)
    assert f"-XX:SharedArchiveFile={archive}" in options  # the JVM was given the damaged file
    assert "cds" not in stderr.lower() and "shared archive" not in stderr.lower()
