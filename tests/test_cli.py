"""`watermark-assets`, the headless path of `make demo`: runs what the sensors request like the
daemon would, goes on past a failed run, says what failed in one line each, records the
sensors' observations, and answers a bad configuration with its message (no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from _landing import Landing, delta_ids, hour
from conftest import TEST_SPARK_CONF, pipeline_yaml
from dagster import AssetKey, AssetRecordsFilter, DagsterInstance
from dagster._core.instance.ref import InstanceRef

from watermark_assets.cli import ENV_FILE, load_env_file, main
from watermark_assets.config import DEFAULT_CONFIG_PATH, load_config
from watermark_assets.defs.headless_ticks import sensor_origin
from watermark_assets.defs.partitions import partitions_definition


def write_config(tmp_path: Path, *pipelines: dict[str, Any]) -> Path:
    path = tmp_path / "pipelines.yaml"
    path.write_text(
        yaml.safe_dump(
            {"spark": {"master": "local[2]", "conf": TEST_SPARK_CONF}, "pipelines": list(pipelines)}
        ),
        encoding="utf-8",
    )
    return path


@pytest.fixture
def dagster_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def test_a_failed_run_does_not_stop_the_others_and_is_said_in_one_line(
    spark: Any, tmp_path: Path, dagster_home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    broken = pipeline_yaml(tmp_path / "broken", name="broken")
    broken["table"]["derived_columns"]["boom"] = "raise_error('the derived column fails')"
    events = pipeline_yaml(tmp_path / "events")
    for root in (tmp_path / "broken", tmp_path / "events"):
        landing = Landing(root / "landing")
        landing.add(hour(28, 10))
        landing.add(hour(29, 10))
    config = write_config(tmp_path, broken, events)

    status = main(["--config", str(config), "run-sensors"])

    out, err = capfd.readouterr()
    assert status == 1
    failed = [line.strip() for line in err.splitlines() if ": run " in line]
    assert len(failed) == 2, err
    assert failed[0].startswith("broken 2024-01-28: run ")
    assert failed[1].startswith("broken 2024-01-29: run ")
    assert all("the derived column fails" in line for line in failed)
    assert "2 runs failed" in err
    assert "Traceback" not in out + err
    assert len(delta_ids(events["table"]["uri"])) == 6, "the other pipeline ran"


def test_the_sensors_observations_are_recorded_on_the_instance(
    spark: Any, tmp_path: Path, dagster_home: Path
) -> None:
    Landing(tmp_path / "landing").add(hour(28, 10))
    config = write_config(tmp_path, pipeline_yaml(tmp_path))

    assert main(["--config", str(config), "run-sensors"]) == 0

    with DagsterInstance.get() as instance:
        records = instance.fetch_observations(
            AssetRecordsFilter(asset_key=AssetKey("events")), limit=100
        ).records
    states = [
        r.asset_observation.metadata["watermark/state"].value  # type: ignore[union-attr]
        for r in records
        if r.partition_key is None  # the asset's own; its partitions' pages say their own
    ]
    assert "Idle" in states


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param(
            {"pipelines": [{"name": "events", "source": {"uri": "x"}, "table": {"uri": "y"}}]},
            "source.type is required",
            id="a source without type",
        ),
        pytest.param({"pipelines": "nope"}, "pipelines", id="pipelines is not a list"),
    ],
)
def test_a_configuration_error_prints_its_message_not_a_traceback(
    tmp_path: Path,
    dagster_home: Path,
    capfd: pytest.CaptureFixture[str],
    document: dict[str, Any],
    message: str,
) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump(document), encoding="utf-8")

    assert main(["--config", str(config), "run-sensors"]) == 2

    out, err = capfd.readouterr()
    assert err.startswith("watermark-assets: ")
    assert message in err
    assert "Traceback" not in out + err


#: DAGSTER_HOME as the shell gives it -> what the refusal says (the fix among it)
NO_INSTANCE_CASES = {
    "unset": (
        None,
        ["DAGSTER_HOME is not set", "export DAGSTER_HOME=$PWD/.dagster_home", ENV_FILE],
    ),
    "a relative path (Dagster needs an absolute one)": (
        ".dagster_home",
        ["is not an absolute path", "export DAGSTER_HOME=/"],
    ),
    "a folder that does not exist (a space and a star in its name)": (
        "no such home/a *",
        ["is not an existing folder", "mkdir -p '{home}'"],
    ),
}


@pytest.mark.parametrize("command", ["run-sensors", "demo"])
@pytest.mark.parametrize(("home", "said"), NO_INSTANCE_CASES.values(), ids=NO_INSTANCE_CASES.keys())
def test_a_command_without_an_instance_says_how_to_set_dagster_home_before_any_work(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    command: str,
    home: str | None,
    said: list[str],
) -> None:
    """``run-sensors`` and ``demo`` record on the instance in $DAGSTER_HOME: without one they stop
    at once with exit status 2 and the fix, not Dagster's traceback after the demo's data was
    written (the demo's paths are relative to the working directory: ``data/`` stays absent)."""
    monkeypatch.chdir(tmp_path)
    if home is None:
        monkeypatch.delenv("DAGSTER_HOME", raising=False)
    else:
        home = home if home.startswith(".") else str(tmp_path / home)
        monkeypatch.setenv("DAGSTER_HOME", home)

    assert main([command]) == 2

    out, err = capfd.readouterr()
    assert err.startswith(f"watermark-assets: {command}: ")
    for words in said:
        assert words.format(home=home) in err, err
    assert "Traceback" not in out + err
    assert not (tmp_path / "data").exists(), "nothing is done before the check"


#: what the folder's .env holds -> the variables it sets (PWD: the folder itself)
ENV_FILE_CASES = {
    "the repository's own line: its instance beside it": (
        "DAGSTER_HOME=${PWD}/.dagster_home\n",
        {"DAGSTER_HOME": "{folder}/.dagster_home"},
    ),
    "several names, a comment, quotes": (
        "# the project's instance and configuration\n"
        "DAGSTER_HOME='${PWD}/home'\nWATERMARK_ASSETS_CONFIG=\"${PWD}/pipelines.yaml\"\n",
        {"DAGSTER_HOME": "{folder}/home", "WATERMARK_ASSETS_CONFIG": "{folder}/pipelines.yaml"},
    ),
    "no .env: nothing changes": (None, {}),
}


@pytest.mark.parametrize(("text", "expected"), ENV_FILE_CASES.values(), ids=ENV_FILE_CASES.keys())
def test_the_env_file_of_the_folder_is_read_as_dagster_reads_it_its_values_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str | None, expected: dict[str, str]
) -> None:
    folder = tmp_path / "a project * with spaces"
    folder.mkdir()
    if text is not None:
        (folder / ENV_FILE).write_text(text, encoding="utf-8")
    monkeypatch.setenv("DAGSTER_HOME", "/the/shells/instance")
    # set first, so that the test's end restores it to what it was (absent, mostly): a delenv
    # of an absent name records nothing to undo, and the file's value would outlive the test
    monkeypatch.setenv("WATERMARK_ASSETS_CONFIG", "-")
    monkeypatch.delenv("WATERMARK_ASSETS_CONFIG")
    monkeypatch.setenv("PWD", "/where/the/shell/was")

    names = load_env_file(str(folder))

    assert names == sorted(expected)
    wanted = {name: value.format(folder=folder) for name, value in expected.items()}
    assert {name: os.environ[name] for name in wanted} == wanted
    if "DAGSTER_HOME" not in expected:
        assert os.environ["DAGSTER_HOME"] == "/the/shells/instance"
    assert os.environ["PWD"] == "/where/the/shell/was", "PWD means the folder only in the file"


@pytest.mark.slow
@pytest.mark.spark  # a whole process (no JVM: the pass is idle)
def test_run_sensors_typed_in_a_folder_records_on_the_instance_its_env_file_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``watermark-assets run-sensors`` as a user types it in a project folder whose ``.env``
    names the instance (as this repository's does for ``dagster dev``): the sensor's tick is
    recorded there, not on the instance the shell's DAGSTER_HOME names, as ``dagster dev``
    started in that folder would show it."""
    (tmp_path / "landing").mkdir()
    config = {"spark": {"master": "local[2]", "conf": TEST_SPARK_CONF}}
    config["pipelines"] = [pipeline_yaml(tmp_path)]  # type: ignore[assignment]
    (tmp_path / "pipelines.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (tmp_path / ENV_FILE).write_text(
        "DAGSTER_HOME=${PWD}/instance\nWATERMARK_ASSETS_CONFIG=${PWD}/pipelines.yaml\n",
        encoding="utf-8",
    )
    (tmp_path / "instance").mkdir()
    (tmp_path / "shells_instance").mkdir()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "shells_instance"),
        "PWD": "/",  # a stale PWD: ${PWD} is the folder the command runs in
    }
    env.pop("WATERMARK_ASSETS_CONFIG", None)
    cli = Path(sys.executable).with_name("watermark-assets")
    done = subprocess.run(
        [str(cli), "run-sensors"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "events tick 1: Initial: no files at all under" in done.stdout
    assert list((tmp_path / "shells_instance").iterdir()) == []
    monkeypatch.chdir(tmp_path)  # the sensor's origin names the folder the pass ran in
    origin = sensor_origin("events_sensor")
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path / "instance"))) as instance:
        [tick] = instance.get_ticks(origin.get_id(), origin.get_selector().get_id())
        assert tick.skip_reason is not None and tick.skip_reason.startswith("Initial: ")


def test_the_demo_partitions_cover_its_data_and_nothing_else() -> None:
    config = load_config(DEFAULT_CONFIG_PATH)
    for pipeline in config.file_pipelines:  # the demo data: three days from 2024-01-28
        keys = partitions_definition(pipeline).get_partition_keys()
        assert keys == ["2024-01-28", "2024-01-29", "2024-01-30"], pipeline.name


def test_the_demo_runs_a_column_pipeline_twice_and_skips_postgres_in_one_line_without_it(
    spark: Any,
    tmp_path: Path,
    dagster_home: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Step 1 reads every order, ~1% change in a new commit of the source, step 2 reads only
    those; a PostgreSQL pipeline without a reachable server is skipped and the demo exits 0."""
    nowhere = "postgresql://postgres@127.0.0.1:1/postgres"
    monkeypatch.setenv("WATERMARK_ASSETS_DEMO_POSTGRES", nowhere)
    monkeypatch.delenv("WATERMARK_ASSETS_DEMO_JDBC_URL", raising=False)
    demo = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"))
    column = [
        p
        for p in demo["pipelines"]
        if p["source"]["type"] in ("delta_table", "jdbc")
        and p["watermark"].get("kind") not in ("time", "unit")
    ]
    assert [p["name"] for p in column] == ["orders", "customers_pg"]
    column[0]["source"]["uri"] = str(tmp_path / "sources" / "orders")
    column[0]["table"]["uri"] = str(tmp_path / "delta" / "orders")
    column[1]["table"]["uri"] = str(tmp_path / "delta" / "customers_pg")
    config = write_config(tmp_path, *column)

    assert main(["--config", str(config), "demo"]) == 0

    out, err = capfd.readouterr()
    skipped = [line.strip() for line in out.splitlines() if "customers_pg: skipped" in line]
    assert len(skipped) == 1, out
    assert f"no PostgreSQL reachable at {nowhere}" in skipped[0]
    assert "WATERMARK_ASSETS_DEMO_POSTGRES" in skipped[0]
    assert "orders, step 1 (initial load): 9000 rows read" in out
    assert "orders, step 2 (incremental: the changed rows): 90 rows read" in out
    assert "skipped by statistics 2" in out
    assert "customers_pg, step" not in out
    assert "Traceback" not in out + err


def demo_pipelines(tmp_path: Path, *names: str) -> list[dict[str, Any]]:
    """The demo's pipelines ``names``, their files moved under ``tmp_path``."""
    demo = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"))
    chosen = [p for p in demo["pipelines"] if p["name"] in names]
    for pipeline in chosen:
        if pipeline["source"]["type"] == "delta_table":
            pipeline["source"]["uri"] = str(tmp_path / "sources" / "orders")
        pipeline["table"]["uri"] = str(tmp_path / "delta" / pipeline["name"])
    assert [p["name"] for p in chosen] == list(names)
    return chosen


def test_the_demo_runs_the_time_and_unit_pipelines_due_partitions_and_says_why(
    spark: Any,
    tmp_path: Path,
    dagster_home: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The demo starts its HTTP API on loopback; each time pipeline's tick says which
    partitions are due and why (the second tick: the grace period), explicit units that never
    ran run once; the summary prints partitions, high watermarks and cut-offs."""
    monkeypatch.delenv("WATERMARK_ASSETS_DEMO_API", raising=False)
    names = ("orders", "payments_api_daily", "orders_monthly", "orders_by_status")
    config = write_config(tmp_path, *demo_pipelines(tmp_path, *names))

    assert main(["--config", str(config), "demo"]) == 0

    out, err = capfd.readouterr()
    assert "Traceback" not in out + err
    lines = [line.strip() for line in out.splitlines()]
    assert (
        "payments_api_daily tick 1: 3 partitions: 2024-01-28, 2024-01-29, 2024-01-30 have no "
        "history (first run: the cut-off is watermark.from, 2024-01-28T00:00:00Z)"
    ) in lines
    assert (
        "2024-01-28: 144 rows read, 144 committed, high watermark 2024-01-29T00:00:00Z; run"
    ) in out
    assert any(
        line.startswith(
            "payments_api_daily tick 2: 2 partitions: 2024-01-29, 2024-01-30 end after the cut-off "
            "2024-01-29T00:00:00Z (highest watermark 2024-01-31T00:00:00Z + abstinent 0d - grace "
            "2d)"
        )
        for line in lines
    ), out
    assert any(
        line.startswith("orders_monthly tick 1: 2 partitions: 2024-01-01, 2024-02-01 (partial")
        for line in lines
    ), out
    assert any(line.startswith("orders_monthly tick 2: 0 partitions") for line in lines), out
    assert "orders_by_status: 3 of 3 explicit unit(s) never ran: placed, paid, shipped" in lines
    assert sum(1 for line in lines if "committed, done at " in line) == 3

    capfd.readouterr()
    assert main(["--config", str(config), "summary"]) == 0
    summary = capfd.readouterr().out
    payments = next(line for line in summary.splitlines() if line.startswith("payments_api_daily"))
    assert "time (daily)" in payments and "3/3" in payments and "432" in payments
    assert (
        "2024-01-29T00:00:00Z (highest watermark 2024-01-31T00:00:00Z + abstinent 0d - grace 2d)"
    ) in payments
    monthly = next(line for line in summary.splitlines() if line.startswith("orders_monthly"))
    assert "2/2" in monthly and "2024-02-15T00:00:00Z" in monthly
    units = next(line for line in summary.splitlines() if line.startswith("orders_by_status"))
    assert "unit (explicit)" in units and "3/3" in units

    # Switched on now, the time sensor asks for the grace windows again at this cut-off: the
    # daemon launches none of them, for the demo's pass ran each under its run key and name.
    from dagster import DagsterInstance, RunsFilter, build_sensor_context
    from dagster._core.storage.tags import RUN_KEY_TAG, SENSOR_NAME_TAG

    from watermark_assets.defs import build_definitions
    from watermark_assets.defs.headless_ticks import sensor_origin

    defs = build_definitions(load_config(config))
    instance = DagsterInstance.get()
    name = "payments_api_daily_sensor"
    with build_sensor_context(instance=instance, definitions=defs) as context:
        requests = defs.resolve_sensor_def(name).evaluate_tick(context).run_requests or []
    assert [r.partition_key for r in requests] == ["2024-01-29", "2024-01-30"]
    for request in requests:
        tags = {RUN_KEY_TAG: str(request.run_key), SENSOR_NAME_TAG: name}
        assert instance.get_runs(filters=RunsFilter(tags=tags)), f"{request.run_key}: run again"
    # ... and the sensor's page lists the pass's two ticks, the newest naming those runs
    origin = sensor_origin(name)
    recorded = instance.get_ticks(origin.get_id(), origin.get_selector().get_id())
    assert [tick.status.value for tick in recorded] == ["SUCCESS", "SUCCESS"]
    assert set(recorded[0].run_keys) == {str(r.run_key) for r in requests}
    assert len(recorded[0].run_ids) == 2 and len(recorded[1].run_ids) == 3


def test_a_run_of_the_api_pipeline_without_its_server_says_how_to_start_it(
    spark: Any, tmp_path: Path, dagster_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under `dagster dev` no demo process runs: the definitions load, and a run fails before
    reading, naming the pipeline, its source.url and the command that serves the API."""
    from dagster import DagsterInstance as Instance

    from watermark_assets.defs import build_definitions

    monkeypatch.setenv("WATERMARK_ASSETS_DEMO_API", "http://127.0.0.1:9/payments")
    config = load_config(write_config(tmp_path, *demo_pipelines(tmp_path, "payments_api_daily")))
    job = build_definitions(config).resolve_job_def("payments_api_daily_job")
    result = job.execute_in_process(
        instance=Instance.ephemeral(), partition_key="2024-01-28", raise_on_error=False
    )
    assert not result.success
    message = str(result.all_events)
    assert "pipeline 'payments_api_daily': its source.url 'http://127.0.0.1:9/payments'" in message
    assert "watermark-assets serve-demo-api" in message


def test_the_demo_aggregates_events_by_event_time_and_keeps_a_late_files_old_events(
    spark: Any, tmp_path: Path, dagster_home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Issue 9: the demo's 5-minute aggregate closes the days the watermark passed; a late file
    then lands, whose old events are kept as late records and whose new ones close the last
    day."""
    events, aggregate = demo_pipelines(tmp_path, "events", "events_5min")
    events["source"]["uri"] = str(tmp_path / "landing" / "events")
    config = write_config(tmp_path, events, aggregate)

    assert main(["--config", str(config), "demo"]) == 0

    out = capfd.readouterr().out
    lines = [line.strip() for line in out.splitlines()]
    assert "events_5min: the sensor requests 2024-01-28 .. 2024-01-29" in lines
    assert any(line.startswith("a late file lands in events: 1706640000-") for line in lines)
    assert "events_5min: the sensor requests 2024-01-30 .. 2024-01-30" in lines
    closing = next(line for line in lines if line.startswith("2024-01-30 .. 2024-01-30:"))
    assert "50 rows read" in closing and "20 late records kept" in closing
    summary = next(line for line in lines if line.startswith("events_5min  "))
    assert "event time (daily, batch)" in summary and "3/4 closed" in summary
    assert "20 late records kept in events_5min_late" in summary
    files = next(line for line in lines if line.startswith("events  ")).split()
    assert files[2:4] == ["25", "12002"], files  # the summary counts the late file: 24 + 1

    capfd.readouterr()
    assert main(["--config", str(config), "demo"]) == 0  # again: nothing new, nothing twice
    again = capfd.readouterr().out
    assert "events_5min: no partition closes" in again
    assert "20 late records kept in events_5min_late" in again
