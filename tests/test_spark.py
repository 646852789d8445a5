"""The Spark adapter: one job reads a batch, keeps lineage, quarantines malformed records."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import event_records, write_ndjson

from watermark_assets.exceptions import JavaNotFoundError
from watermark_assets.spark.batch import (
    OBSERVED_PARTITIONS,
    ReadSpec,
    unreadable_file,
    write_batch,
)
from watermark_assets.spark.session import (
    LISTING_THRESHOLD_KEY,
    check_java,
    local_address_env,
    session_conf,
)

WHEN = datetime(2024, 1, 28, 14, tzinfo=timezone.utc)
SCHEMA = "id BIGINT, event_time TIMESTAMP, name STRING"


def spec(root: Path, files: list[str], fmt: str = "ndjson", **extra: Any) -> ReadSpec:
    return ReadSpec(
        source_uri=str(root),
        files=files,
        file_partitions={f: "2024-01-28" for f in files},
        format=fmt,
        schema_ddl=SCHEMA if fmt != "parquet" else None,
        csv_options={"header": "true"},
        derived_columns={"event_date": "to_date(event_time)"},
        partition_by=["event_date"],
        ingested_at_iso="2024-01-28T15:00:00+00:00",
        **extra,
    )


def read_dir(path: str) -> Any:
    return pq.read_table(path).to_pylist()


@pytest.mark.spark
def test_malformed_records_are_quarantined_with_their_source_file(
    spark: Any, tmp_path: Path
) -> None:
    root = tmp_path / "landing"
    good = event_records(1, 3, WHEN)
    write_ndjson(
        root,
        "date=2024-01-28/hour=14/1706450400-a.ndjson.gz",
        [*good, "not json at all", {"id": "not a number", "event_time": "x"}],
    )
    write_ndjson(root, "date=2024-01-28/hour=14/1706450500-b.ndjson", event_records(10, 2, WHEN))
    files = [
        "date=2024-01-28/hour=14/1706450400-a.ndjson.gz",
        "date=2024-01-28/hour=14/1706450500-b.ndjson",
    ]
    out = write_batch(
        spark,
        spec(root, files),
        data_dir=str(tmp_path / "stage"),
        quarantine_dir=str(tmp_path / "quarantine"),
    )
    assert (out.rows_read, out.rows_quarantined) == (7, 2)
    assert out.per_partition == {"2024-01-28": {"rows_read": 7, "rows_quarantined": 2}}
    rows = read_dir(str(tmp_path / "stage"))
    assert sorted(r["id"] for r in rows) == [1, 2, 3, 10, 11]
    assert {r["_source_file"] for r in rows} == set(files)
    assert {r["_dagster_partition"] for r in rows} == {"2024-01-28"}
    assert "_corrupt_record" not in rows[0]
    assert list((tmp_path / "stage").glob("event_date=2024-01-28/*.parquet"))
    bad = read_dir(str(tmp_path / "quarantine"))
    assert sorted(r["raw_record"] for r in bad) == sorted(
        ["not json at all", '{"id": "not a number", "event_time": "x"}']
    )
    assert {r["_source_file"] for r in bad} == {files[0]}
    assert all("does not match the schema" in r["error"] for r in bad)
    assert "_dagster_partition" in out.data_schema.names


@pytest.mark.spark
@pytest.mark.parametrize(
    ("partitions", "partition_by"),
    [
        pytest.param(60, ["event_date"], id="60 partitions: counted in the staged files"),
        pytest.param(
            60,
            ["event_date", "_dagster_partition"],
            id="60 partitions, the table partitioned by them: counted by their folders",
        ),
        pytest.param(
            OBSERVED_PARTITIONS, ["event_date"], id="as many as are counted as the job writes"
        ),
    ],
)
def test_a_batch_of_many_partitions_counts_each_partition_exactly(
    spark: Any, tmp_path: Path, partitions: int, partition_by: list[str]
) -> None:
    """A backfill launched as one run spans many Dagster partitions: each partition's rows and
    malformed records are counted exactly (partition n: n + 1 good rows, and n % 3 malformed
    lines in partitions 10 and later), one partition among them having no row at all."""
    root = tmp_path / "landing"
    file_partitions: dict[str, str] = {}
    expected: dict[str, dict[str, int]] = {}
    for n in range(partitions):
        day = datetime(2024, 1, 1, 14, tzinfo=timezone.utc) + timedelta(days=n)
        key = f"{day:%Y-%m-%d}"
        relative = f"date={key}/hour=14/{int(day.timestamp())}-a.ndjson"
        bad = n % 3 if n >= 10 else 0
        good = 0 if n == 7 else n + 1
        write_ndjson(root, relative, [*event_records(1000 * n, good, day), *["{"] * bad])
        file_partitions[relative] = key
        if good + bad:
            expected[key] = {"rows_read": good + bad, "rows_quarantined": bad}
    batch = replace(
        spec(root, sorted(file_partitions)),
        file_partitions=file_partitions,
        partition_by=partition_by,
    )

    out = write_batch(
        spark, batch, data_dir=str(tmp_path / "stage"), quarantine_dir=str(tmp_path / "q")
    )

    assert out.per_partition == expected
    assert "2024-01-08" not in out.per_partition, "a partition without rows is not listed"
    assert (out.rows_read, out.rows_quarantined) == (
        sum(v["rows_read"] for v in expected.values()),
        sum(v["rows_quarantined"] for v in expected.values()),
    )


@pytest.mark.spark
def test_csv_and_parquet_sources(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "landing"
    csv = root / "date=2024-01-28/hour=14/1706450400-a.csv"
    csv.parent.mkdir(parents=True)
    csv.write_text("id,event_time,name\n1,2024-01-28T14:00:00Z,a\nx,2024-01-28T14:00:00Z,b\n")
    out = write_batch(
        spark,
        spec(root, ["date=2024-01-28/hour=14/1706450400-a.csv"], "csv"),
        data_dir=str(tmp_path / "csv_stage"),
        quarantine_dir=str(tmp_path / "csv_q"),
    )
    assert (out.rows_read, out.rows_quarantined) == (2, 1)

    exported = pq.read_table(next((tmp_path / "csv_stage").rglob("*.parquet")))
    assert "_dagster_partition" in exported.column_names  # lineage in the source is replaced
    pq.write_table(exported, root / "date=2024-01-28/hour=14/1706450500-b.parquet")
    out = write_batch(
        spark,
        spec(root, ["date=2024-01-28/hour=14/1706450500-b.parquet"], "parquet"),
        data_dir=str(tmp_path / "pq_stage"),
        quarantine_dir=str(tmp_path / "pq_q"),
    )
    assert (out.rows_read, out.rows_quarantined, out.quarantine_dir) == (1, 0, None)


def _parquet_bytes(ids: list[int]) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": ids}), sink)
    return bytes(sink.getvalue().to_pybytes())


GOOD_PARQUET = _parquet_bytes(list(range(1000)))
GOOD_GZIP = gzip.compress(b"".join(b'{"id": %d}\n' % n for n in range(50_000)))


@pytest.mark.spark
@pytest.mark.parametrize(
    ("fmt", "files", "broken", "condition"),
    [
        pytest.param(
            "ndjson",
            {"a.ndjson.gz": b"this is not gzip", "b.ndjson.gz": GOOD_GZIP},
            "a.ndjson.gz",
            "FAILED_READ_FILE.NO_HINT: java.io.IOException: not a gzip file",
            id="ndjson: a .gz that is not gzip, beside a good one",
        ),
        pytest.param(
            "ndjson",
            {"a b.ndjson.gz": GOOD_GZIP[:5000]},
            "a b.ndjson.gz",
            "FAILED_READ_FILE.NO_HINT: java.io.EOFException: Unexpected end of input stream",
            id="ndjson: a truncated .gz whose name holds a space",
        ),
        pytest.param(
            "parquet",
            {"a.parquet": GOOD_PARQUET, "b.parquet": GOOD_PARQUET[: len(GOOD_PARQUET) // 2]},
            "b.parquet",
            "FAILED_READ_FILE",
            id="parquet: a truncated file beside a good one",
        ),
        pytest.param(
            "parquet",
            {"b.parquet": b"PAR1 but no footer"},
            "b.parquet",
            "FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER",
            id="parquet: a file without a footer, alone",
        ),
    ],
)
def test_a_failed_job_names_the_unreadable_file_of_its_batch(
    spark: Any, tmp_path: Path, fmt: str, files: dict[str, bytes], broken: str, condition: str
) -> None:
    root = tmp_path / "landing dir"
    root.mkdir()
    for name, content in files.items():
        (root / name).write_bytes(content)
    read = replace(spec(root, sorted(files), fmt), derived_columns={}, partition_by=[])
    with pytest.raises(Exception) as failure:
        write_batch(spark, read, data_dir=str(tmp_path / "s"), quarantine_dir=str(tmp_path / "q"))

    found = unreadable_file(failure.value, read)

    assert found is not None, str(failure.value)[:2000]
    assert found.path == broken
    assert found.error.startswith(condition), found.error


@pytest.mark.spark
def test_a_failure_that_is_not_an_unreadable_file_is_not_taken_for_one(
    spark: Any, tmp_path: Path
) -> None:
    """A file removed after the listing is no broken file: the run fails, the next one plans
    again (quarantining it would let the watermark pass rows that may land again)."""
    root = tmp_path / "landing"
    root.mkdir()
    read = spec(root, ["gone.ndjson.gz"])
    with pytest.raises(Exception) as failure:
        write_batch(spark, read, data_dir=str(tmp_path / "s"), quarantine_dir=str(tmp_path / "q"))
    assert unreadable_file(failure.value, read) is None


def fake_java_home(root: Path, version_output: str, *, executable: bool = True) -> Path:
    """A JAVA_HOME whose bin/java prints ``version_output`` on stderr, as ``java -version`` does."""
    java = root / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\ncat >&2 <<'EOF'\n{version_output}\nEOF\n", encoding="utf-8")
    java.chmod(0o755 if executable else 0o644)
    return root / "jdk"


@pytest.mark.parametrize(
    ("version_output", "major"),
    [
        pytest.param('openjdk version "17.0.9" 2023-10-17', 17, id="OpenJDK 17"),
        pytest.param('openjdk version "21" 2023-09-19 LTS', 21, id="a version without a dot"),
        pytest.param('java version "25-ea"', 25, id="an early-access build"),
    ],
)
def test_the_java_in_java_home_is_used_and_its_major_version_read(
    tmp_path: Path, version_output: str, major: int
) -> None:
    assert check_java({"JAVA_HOME": str(fake_java_home(tmp_path, version_output))}) == major


def test_a_session_on_an_old_java_names_its_version(tmp_path: Path) -> None:
    """The version is read only when the JVM did not start (no `java -version` before every
    start): Spark's launcher fails on Java 11, and the error says which Java it found."""
    home = fake_java_home(tmp_path, 'openjdk version "11.0.21"')
    script = (
        "from watermark_assets.spark.session import get_spark\n"
        "from watermark_assets.exceptions import JavaNotFoundError\n"
        "try:\n    get_spark('local[1]', {})\n"
        "except JavaNotFoundError as error:\n    print('JAVA:', error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "JAVA_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "JAVA:" in result.stdout, result.stderr[-2000:]
    assert "is Java 11" in result.stdout and "apt-get install openjdk-17" in result.stdout


@pytest.mark.parametrize(
    ("version_output", "executable", "message"),
    [
        pytest.param('java version "1.8.0_392"', True, "is Java 8", id="Java 8 in the 1.x style"),
        pytest.param('openjdk version "11.0.21"', True, "is Java 11", id="Java 11"),
        pytest.param("Error: no JVM here", True, "could not read the version", id="no version"),
        pytest.param('openjdk version "17"', False, "could not run", id="bin/java not executable"),
    ],
)
def test_an_unusable_java_in_java_home_says_how_to_install_one(
    tmp_path: Path, version_output: str, executable: bool, message: str
) -> None:
    home = fake_java_home(tmp_path, version_output, executable=executable)
    with pytest.raises(JavaNotFoundError, match="apt-get install openjdk-17") as error:
        check_java({"JAVA_HOME": str(home)})
    assert message in str(error.value)
    assert error.value.detail in str(error.value)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"JAVA_HOME": "/nonexistent/jdk"}, "JAVA_HOME='/nonexistent/jdk' has no bin/java"),
        ({"PATH": "/nonexistent"}, "no 'java' on PATH"),
    ],
    ids=["JAVA_HOME pointing nowhere", "no java on the PATH"],
)
def test_missing_java_says_how_to_install_it(
    env: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "PATH" in env:
        monkeypatch.setenv("PATH", env["PATH"])  # check_java looks java up on the real PATH
    with pytest.raises(JavaNotFoundError, match="apt-get install openjdk-17") as error:
        check_java(env)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("conf", "threshold"),
    [
        # a batch names its files one by one: the driver lists them (no listing job)
        ({}, "10000"),
        ({"spark.watermark_assets.s3.native": "false"}, "10000"),
        # S3 read natively: each path is a request; Spark's default spreads them over a job
        ({"spark.watermark_assets.s3.native": "true"}, None),
        # the user's own value wins either way
        ({"spark.watermark_assets.s3.native": "true", LISTING_THRESHOLD_KEY: "64"}, "64"),
        ({LISTING_THRESHOLD_KEY: "32"}, "32"),
    ],
)
def test_the_listing_threshold_follows_where_files_are_read(
    conf: dict[str, str], threshold: str | None
) -> None:
    assert session_conf("local[2]", conf).get(LISTING_THRESHOLD_KEY) == threshold


@pytest.mark.parametrize(
    ("master", "conf", "env", "expected"),
    [
        ("local[2]", {}, {}, {"SPARK_LOCAL_IP": "127.0.0.1"}),
        ("local", {}, {}, {"SPARK_LOCAL_IP": "127.0.0.1"}),
        ("local-cluster[2,1,1024]", {}, {}, {"SPARK_LOCAL_IP": "127.0.0.1"}),
        ("local[2]", {}, {"SPARK_LOCAL_IP": "10.0.0.5"}, {}),
        ("local[2]", {"spark.driver.host": "10.0.0.5"}, {}, {}),
        ("local[2]", {"spark.driver.bindAddress": "0.0.0.0"}, {}, {}),
        ("spark://master:7077", {}, {}, {}),
        ("yarn", {}, {}, {}),
    ],
    ids=[
        "local[N]: loopback",
        "local: loopback",
        "local-cluster: this host's JVMs, loopback",
        "an address of the user's wins",
        "a driver host chosen in spark.conf",
        "a bind address chosen in spark.conf",
        "a standalone cluster: executors connect back, Spark picks",
        "yarn: Spark picks",
    ],
)
def test_a_local_session_binds_to_loopback_so_spark_guesses_no_address(
    master: str, conf: dict[str, str], env: dict[str, str], expected: dict[str, str]
) -> None:
    assert local_address_env(master, conf, env) == expected


@pytest.mark.spark
def test_starting_a_local_session_prints_no_hostname_warning() -> None:
    """On a host whose name resolves to a loopback address (127.0.1.1 in Debian's /etc/hosts),
    Spark warns at every start unless it is told the address (issue 24, item 7)."""
    script = (
        "from watermark_assets.spark.session import get_spark\n"
        "print(get_spark('local[1]', {'spark.ui.enabled': 'false'}).range(3).count())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0 and result.stdout.strip() == "3", result.stderr[-2000:]
    output = result.stdout + result.stderr
    assert "resolves to a loopback address" not in output and "SPARK_LOCAL_IP" not in output
