"""A newcomer's first Dagster commands, typed in the repository root with DAGSTER_HOME unset
(issue 24, items 3, 6 and 7), in a copy of the repository (``tests/_repository.py``).

- One instance: ``dagster definitions validate``, ``dg check defs`` and ``dagster dev`` read
  DAGSTER_HOME from the root's ``.env``: the repository's instance ``.dagster_home``, the one
  ``make ui`` and ``make demo`` use, never a throwaway ``.tmp_dagster_home_*``. A run recorded
  there is what plain ``dagster dev`` shows; ``make ui``'s way (DAGSTER_HOME exported) shows it
  too, and neither start warns that a ``dagster.yaml`` "will not be used".
- A refused configuration is shown by every command as its blocks (key, value, "did you mean",
  fix), once, without pydantic's report or a traceback beyond one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from _repository import Repository, output
from conftest import pipeline_yaml
from dagster import DagsterInstance, job, op
from dagster._core.instance.ref import InstanceRef

from .dagster_dev import LOCATION, DagsterDev, wait_for

#: Dagster's warning when a dagster.yaml in the working directory is not the instance's.
NOT_USED = "will not be used"
#: Dagster's words for a throwaway instance.
TEMPORARY = "Using temporary directory"
DOTENV = "Loaded environment variables from .env file: DAGSTER_HOME"


def temporary_homes(root: Path) -> set[Path]:
    return set(root.glob(".tmp_dagster_home_*"))


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        pytest.param(("dagster", "definitions", "validate"), id="dagster definitions validate"),
        pytest.param(("dg", "check", "defs"), id="dg check defs"),
    ],
)
def test_checking_the_definitions_in_the_root_uses_the_repositorys_instance(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    repository = Repository(tmp_path)
    done = repository.run(*command)
    assert done.returncode == 0, output(done)
    if command[0] == "dagster":  # dg opens the instance without saying so
        assert DOTENV in output(done)
    assert TEMPORARY not in output(done) and NOT_USED not in output(done)
    assert temporary_homes(repository.root) == set()


def form_for_from(tmp_path: Path) -> Path:
    """A configuration whose time pipeline writes ``form:`` for ``from:``, and one whose
    checkpoint interval is zero: two problems."""
    orders = {
        "name": "orders_daily",
        "source": {"type": "delta_table", "uri": str(tmp_path / "orders")},
        "watermark": {"kind": "time", "column": "updated_at", "form": "2024-01-01"},
        "table": {"uri": str(tmp_path / "delta" / "orders_daily")},
    }
    events = pipeline_yaml(tmp_path, checkpoint={"interval_files": 0})
    path = tmp_path / "pipelines.yaml"
    path.write_text(yaml.safe_dump({"pipelines": [orders, events]}, sort_keys=False))
    return path


FORM_BLOCK = (
    "pipeline 'orders_daily': watermark.form: unknown key (got '2024-01-01')\n"
    "  did you mean `from`?\n"
    "  fix: rename form to from"
)
INTERVAL_BLOCK = (
    "pipeline 'events': checkpoint.interval_files: Input should be greater than or equal to 1 "
    "(got 0)\n  fix: set interval_files to a value greater than or equal to 1"
)


def assert_blocks_once(text: str) -> None:
    for block in (FORM_BLOCK, INTERVAL_BLOCK):
        assert text.count(block) == 1, text
    for noise in ("Extra inputs are not permitted", "pydantic", "validation error for"):
        assert noise not in text, text
    assert "The above exception was caused by" not in text, text
    assert "config.py" not in text, "no frame of the configuration's loader"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "status"),
    [
        pytest.param(("dagster", "definitions", "validate"), 1, id="dagster definitions validate"),
        pytest.param(("dg", "check", "defs"), 1, id="dg check defs"),
        pytest.param(("watermark-assets", "summary"), 2, id="watermark-assets summary"),
    ],
)
def test_a_refused_configuration_is_its_blocks_once_in_every_command(
    tmp_path: Path, command: tuple[str, ...], status: int
) -> None:
    repository = Repository(tmp_path)
    repository.env["WATERMARK_ASSETS_CONFIG"] = str(form_for_from(tmp_path))
    done = repository.run(*command)
    assert done.returncode == status, output(done)
    assert_blocks_once(output(done))
    if command[0] == "watermark-assets":
        assert "Traceback" not in output(done)


def record_a_run(home: Path) -> str:
    """A run of a job of its own, recorded in the instance at ``home`` (as ``make demo``
    records its runs); its id."""

    @op
    def hello() -> None:
        pass

    @job(name="recorded_before_dagster_dev")
    def recorded() -> None:
        hello()

    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        result = recorded.execute_in_process(instance=instance)
    assert result.success
    return result.run_id


@pytest.mark.slow
@pytest.mark.parametrize(
    "exported",
    [
        pytest.param(False, id="plain dagster dev, DAGSTER_HOME unset"),
        pytest.param(True, id="as make ui starts it, DAGSTER_HOME exported"),
    ],
)
def test_dagster_dev_in_the_root_shows_the_runs_of_the_repositorys_instance(
    tmp_path: Path, exported: bool
) -> None:
    repository = Repository(tmp_path)
    run_id = record_a_run(repository.instance_home)
    home = repository.instance_home if exported else None
    log = tmp_path / "dagster-dev.log"
    dev = DagsterDev(home, None, log, workspace=None, cwd=repository.root, base_env=repository.env)
    dev.start()
    try:
        dev.wait_until_ready(timeout=180)  # /server_info answers, the location is LOADED
        runs = dev.graphql("{ runsOrError { ... on Runs { results { runId jobName } } } }")
        assert {"runId": run_id, "jobName": "recorded_before_dagster_dev"} in (
            runs["runsOrError"]["results"]
        )
    finally:
        exit_code = dev.stop(grace=60)
    assert exit_code is not None, f"dagster dev ignored SIGTERM\n{dev.log_tail()}"
    text = log.read_text(errors="replace")
    assert NOT_USED not in text and TEMPORARY not in text, text[-3000:]
    assert temporary_homes(repository.root) == set()


@pytest.mark.slow
def test_dagster_dev_shows_a_refused_configuration_as_its_blocks(tmp_path: Path) -> None:
    """The location does not load (nothing is half-served: the file is one configuration); the
    UI's load error and dagster dev's log show the blocks, once each."""
    repository = Repository(tmp_path)
    log = tmp_path / "dagster-dev.log"
    config = form_for_from(tmp_path)
    dev = DagsterDev(
        None, config, log, workspace=None, cwd=repository.root, base_env=repository.env
    )
    dev.start()

    def load_error() -> dict[str, Any] | None:
        data = dev.graphql(
            """{ workspaceOrError { ... on Workspace { locationEntries { name
                   locationOrLoadError { __typename ... on PythonError { message
                     stack causes { message } } } } } } }"""
        )
        entries = data["workspaceOrError"]["locationEntries"]
        entry = next((e for e in entries if e["name"] == LOCATION), None)
        loaded = entry and entry["locationOrLoadError"]
        return loaded if loaded and loaded["__typename"] == "PythonError" else None

    try:
        error = wait_for("the location's load error", _quiet(load_error), timeout=180)
    finally:
        dev.stop(grace=60)
    shown = error["message"] + "".join(c["message"] for c in error["causes"] or [])
    assert_blocks_once(shown)
    assert_blocks_once(dev.log_path.read_text(errors="replace"))


def _quiet(probe: Any) -> Any:
    """``probe``, None while the webserver does not answer yet."""

    def quiet() -> Any:
        try:
            return probe()
        except Exception:
            return None

    return quiet


def test_the_repository_root_holds_no_dagster_yaml_of_its_own() -> None:
    """Dagster warns that a dagster.yaml in the working directory "will not be used" whenever
    DAGSTER_HOME names another folder; the instance's file is in the instance's folder."""
    root = Path(__file__).resolve().parents[2]
    assert not (root / "dagster.yaml").exists() and not (root / "dagster.yml").exists()
    assert (root / ".dagster_home" / "dagster.yaml").is_file()
    assert "DAGSTER_HOME=${PWD}/.dagster_home" in (root / ".env").read_text()
