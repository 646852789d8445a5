"""The pipelines as a Dagster Component (issue 24): ``watermark_assets.WatermarkPipelines``.

- In this process: a ``defs.yaml`` whose ``attributes`` hold a configuration file's mapping is
  read as that file is (same models, messages, ``${VAR}``; Dagster's ``{{ env.VAR }}`` too) and
  builds the same definitions; its JSON schema (what ``dg check yaml`` checks) is the file's;
  the scaffolder writes a configuration that loads.
- As a user types them, in a copy of the repository: ``dg check defs``, ``dg scaffold defs``,
  ``dagster definitions validate`` and ``dg dev``; the code location built from a component
  equals the one built from the YAML file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import requests
import yaml
from _defs_summary import summary
from _ports import free_port
from _repository import BIN, Repository, output
from conftest import pipeline_yaml
from dagster import ScaffoldRequest
from ui.dagster_dev import REPO_ROOT, wait_for

from watermark_assets import WatermarkPipelines
from watermark_assets.component import (
    PipelinesAttributes,
    PipelinesScaffolder,
    PipelinesScaffolderParams,
    from_attributes,
)
from watermark_assets.config import DEFAULT_CONFIG_PATH, ProjectConfig, load_config
from watermark_assets.defs import build_definitions
from watermark_assets.exceptions import ConfigError

TYPE = "watermark_assets.WatermarkPipelines"

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # landing folders not created


def defs_yaml(folder: Path, attributes: Any) -> Path:
    """``folder/defs.yaml`` declaring the component with ``attributes``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "defs.yaml"
    path.write_text(yaml.safe_dump({"type": TYPE, "attributes": attributes}), encoding="utf-8")
    return path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's ``dg`` project (``create-dagster project``'s layout), importable: its
    ``defs`` folder, where a test writes ``NAME/defs.yaml``."""
    root = tmp_path / "project"
    module = f"user_project_{tmp_path.name.replace('-', '_')}"
    (root / module / "defs").mkdir(parents=True)
    (root / module / "__init__.py").write_text("")
    (root / module / "defs" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text(
        f'[tool.dg]\ndirectory_type = "project"\n\n[tool.dg.project]\nroot_module = "{module}"\n'
    )
    monkeypatch.syspath_prepend(str(root))
    return root / module / "defs"


def component_defs(defs_folder: Path) -> tuple[WatermarkPipelines, Any]:
    """The one component of a project's defs folder, loaded as ``dg`` loads it, and the
    project's definitions."""
    from dagster.components.core.component_tree import ComponentTree

    tree = ComponentTree.for_project(defs_folder)
    defs = tree.build_defs()
    (component,) = tree.get_all_components(of_type=WatermarkPipelines)
    return component, defs


def demo_mapping() -> dict[str, Any]:
    return dict(yaml.safe_load(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8")))


# --- in this process ---


def test_a_defs_yaml_holding_the_demo_builds_the_yaml_files_definitions(project: Path) -> None:
    defs_yaml(project / "demo", demo_mapping())
    component, defs = component_defs(project)
    assert component.config == load_config(DEFAULT_CONFIG_PATH)  # both read this environment
    expected = summary(build_definitions(load_config(DEFAULT_CONFIG_PATH)))
    assert summary(defs) == expected
    assert len(expected["assets"]) == 10 and expected["schedules"]


def test_attributes_take_the_files_variables_and_dagsters_templates(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPONENT_LANDING", str(tmp_path / "landing"))
    monkeypatch.setenv("COMPONENT_TABLES", str(tmp_path / "delta"))
    pipeline = pipeline_yaml(tmp_path)
    pipeline["source"]["uri"] = "${COMPONENT_LANDING}"
    pipeline["table"]["uri"] = "{{ env.COMPONENT_TABLES }}/events"
    pipeline["sensor"] = {"max_files_per_run": "${COMPONENT_BATCH:-7}"}
    defs_yaml(project / "events", {"pipelines": [pipeline]})
    component, _ = component_defs(project)
    (events,) = component.config.file_pipelines
    assert events.source.uri == str(tmp_path / "landing")
    assert events.table.uri == str(tmp_path / "delta" / "events")
    assert events.sensor.max_files_per_run == 7


def test_two_components_of_one_code_location_with_the_same_settings_load_together(
    tmp_path: Path, project: Path
) -> None:
    defs_yaml(project / "events", {"pipelines": [pipeline_yaml(tmp_path)]})
    clicks = pipeline_yaml(tmp_path / "clicks") | {"name": "clicks"}
    defs_yaml(project / "clicks", {"pipelines": [clicks]})
    from dagster.components.core.component_tree import ComponentTree

    defs = ComponentTree.for_project(project).build_defs()
    assert sorted(summary(defs)["assets"]) == ["clicks", "events"]


def test_two_components_of_one_code_location_with_other_spark_settings_are_refused(
    tmp_path: Path, project: Path
) -> None:
    defs_yaml(project / "events", {"pipelines": [pipeline_yaml(tmp_path)]})
    clicks = pipeline_yaml(tmp_path / "clicks") | {"name": "clicks"}
    defs_yaml(project / "clicks", {"spark": {"master": "local[1]"}, "pipelines": [clicks]})
    from dagster.components.core.component_tree import ComponentTree

    with pytest.raises(Exception) as raised:
        ComponentTree.for_project(project).build_defs()
    error = raised.value
    while not isinstance(error, ConfigError) and error.__cause__ is not None:
        error = error.__cause__
    assert isinstance(error, ConfigError), raised.value
    for named in ("events/defs.yaml", "clicks/defs.yaml", "different spark settings"):
        assert named in str(error)


def test_a_relative_path_resolves_against_the_working_directory_as_in_the_file(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    pipeline = pipeline_yaml(tmp_path, table={"uri": "lake/events"})
    defs_yaml(project / "events", {"pipelines": [pipeline]})
    component, _ = component_defs(project)
    assert component.config.file_pipelines[0].table.uri == str(tmp_path / "lake" / "events")


BAD_ATTRIBUTES = {
    "a misspelt key": (
        {"tabel": {"uri": "x"}},
        ["pipeline 'events': tabel: unknown key", "did you mean `table`?"],
    ),
    "an unknown source type": (
        {"source": {"type": "ftp", "uri": "x"}},
        ["pipeline 'events'", "source.type 'ftp' is not an accepted value"],
    ),
    "a freshness warning after its failure": (
        {"freshness": {"fail_after": "1 hour", "warn_after": "2 hours"}},
        ["freshness.warn_after '2 hours'", "shorter than fail_after '1 hour'"],
    ),
}


@pytest.mark.parametrize(
    ("override", "said"), list(BAD_ATTRIBUTES.values()), ids=list(BAD_ATTRIBUTES)
)
def test_invalid_attributes_fail_naming_the_defs_yaml_the_pipeline_and_the_key(
    tmp_path: Path, project: Path, override: dict[str, Any], said: list[str]
) -> None:
    pipeline = {**pipeline_yaml(tmp_path), **override}
    path = defs_yaml(project / "bad", {"pipelines": [pipeline]})
    with pytest.raises(Exception) as raised:
        component_defs(project)
    error = raised.value
    while not isinstance(error, ConfigError) and error.__cause__ is not None:
        error = error.__cause__  # Dagster wraps it, naming the component's folder
    assert isinstance(error, ConfigError), raised.value
    message = str(error)
    assert message.startswith(f"{path} (attributes): ")
    for text in said:
        assert text in message


def test_the_attributes_schema_is_the_configuration_files() -> None:
    """One schema: what ``dg check yaml`` checks is made of ProjectConfig's models, and the
    demo configuration passes it."""
    schema = WatermarkPipelines.get_model_cls().model_json_schema()
    assert WatermarkPipelines.get_model_cls() is PipelinesAttributes
    assert schema["$defs"].keys() == ProjectConfig.model_json_schema()["$defs"].keys()
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(demo_mapping())) == []


def misspell(path: tuple[Any, ...], key: str, wrong: str) -> dict[str, Any]:
    """The demo mapping with ``key`` of the mapping at ``path`` renamed ``wrong``."""
    mapping = demo_mapping()
    node: Any = mapping
    for part in path:
        node = node[part]
    node[wrong] = node.pop(key)
    return mapping


# (where, the key, its misspelling): each level of the configuration's unions
MISSPELT = {
    "a file pipeline's key": ((0,), "table", "tabel"),
    "a files source's key": ((0, "source"), "format", "formt"),
    "a column watermark's key": ((3, "watermark"), "columns", "colums"),
    "a time watermark's key": ((5, "watermark"), "grace_days", "grace_dayz"),
    "an event-time pipeline's key": ((1,), "aggregates", "aggregate"),
    "a unit watermark's key": ((9, "watermark"), "secondary_input", "secondary_inputs"),
}


@pytest.mark.parametrize(("path", "key", "wrong"), list(MISSPELT.values()), ids=list(MISSPELT))
def test_the_schema_names_a_misspelt_key_where_the_configuration_does(
    path: tuple[Any, ...], key: str, wrong: str
) -> None:
    """Unions are picked by their tag, so the checker names the key ("'tabel' was
    unexpected"), as loading the configuration does."""
    mapping = misspell(("pipelines", *path), key, wrong)
    schema = PipelinesAttributes.model_json_schema()
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(mapping))
    expected = f"Additional properties are not allowed ('{wrong}' was unexpected)"
    assert expected in [e.message for e in errors]
    with pytest.raises(ConfigError, match=f"{wrong}: unknown key"):
        from_attributes(mapping, origin="defs.yaml", env={})


@pytest.mark.parametrize(
    ("folder", "name", "expected"),
    [
        ("orders", None, "orders"),
        ("My-Web Events", None, "my_web_events"),
        ("2024", None, "pipeline_2024"),
        ("anything", "clicks", "clicks"),
    ],
)
def test_the_scaffolded_defs_yaml_loads(
    project: Path, folder: str, name: str | None, expected: str
) -> None:
    target = project / folder
    target.mkdir()
    request = ScaffoldRequest(
        type_name=TYPE,
        target_path=target,
        scaffold_format="yaml",
        project_root=project.parents[1],
        params=PipelinesScaffolderParams(name=name),
    )
    PipelinesScaffolder().scaffold(request)
    written = yaml.safe_load((target / "defs.yaml").read_text(encoding="utf-8"))
    assert written["type"] == TYPE
    component, defs = component_defs(project)
    assert [p.name for p in component.config.pipelines] == [expected]
    assert sorted(summary(defs)["assets"]) == [expected]


def test_the_docs_defs_yaml_loads(project: Path) -> None:
    page = (REPO_ROOT / "docs" / "ui.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in page.split("```yaml\n")[1:]]
    (block,) = [b for b in blocks if b.startswith(f"type: {TYPE}\n")]
    (project / "orders").mkdir()
    (project / "orders" / "defs.yaml").write_text(block, encoding="utf-8")
    component, defs = component_defs(project)
    assert list(summary(defs)["assets"]) == ["orders"]
    assert component.config.file_pipelines[0].source.type == "files"


# --- as typed: subprocesses in a copy of the repository ---


def location_summary(repository: Repository) -> dict[str, Any]:
    """The summary of the code location ``watermark_assets.definitions`` of the copy."""
    done = repository.run("python", str(Path(__file__).with_name("_defs_summary.py")))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return dict(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.slow
def test_dg_check_defs_passes_in_the_repository_root(tmp_path: Path) -> None:
    repository = Repository(tmp_path)
    done = repository.run("dg", "check", "defs")
    assert done.returncode == 0, output(done)
    assert "All component YAML validated successfully." in done.stdout
    assert "All definitions loaded successfully." in done.stdout


@pytest.mark.slow
def test_dg_scaffold_defs_writes_a_component_that_dg_and_dagster_load(tmp_path: Path) -> None:
    repository = Repository(tmp_path)
    done = repository.run("dg", "scaffold", "defs", TYPE, "web_orders")
    assert done.returncode == 0, output(done)
    written = repository.root / "watermark_assets" / "dg_defs" / "web_orders" / "defs.yaml"
    assert yaml.safe_load(written.read_text())["type"] == TYPE
    checked = repository.run("dg", "check", "defs")
    assert checked.returncode == 0, output(checked)
    validated = repository.run("dagster", "definitions", "validate", "-w", "workspace.yaml")
    assert validated.returncode == 0, output(validated)
    assert "Validation successful for code location watermark_assets" in output(validated)
    # The component replaced the configuration file in the code location: its one pipeline.
    location = location_summary(repository)
    assert list(location["assets"]) == ["web_orders"]
    assert location["jobs"] == ["web_orders_job"]
    assert location["sensors"] == ["web_orders_sensor"]
    # A configuration file named as well: the code location refuses to pick one silently.
    repository.env["WATERMARK_ASSETS_CONFIG"] = str(DEFAULT_CONFIG_PATH)
    both = repository.run("python", str(Path(__file__).with_name("_defs_summary.py")))
    assert both.returncode == 1
    assert "declares components (web_orders) and WATERMARK_ASSETS_CONFIG names" in both.stderr


@pytest.mark.slow
def test_dg_check_defs_fails_on_a_misspelt_key_naming_the_file_and_its_line(
    tmp_path: Path,
) -> None:
    repository = Repository(tmp_path)
    pipeline = pipeline_yaml(tmp_path)
    pipeline["tabel"] = pipeline.pop("table")
    path = defs_yaml(repository.root / "watermark_assets" / "dg_defs" / "events", {})
    path.write_text(
        yaml.safe_dump({"type": TYPE, "attributes": {"pipelines": [pipeline]}}, sort_keys=False)
    )
    done = repository.run("dg", "check", "defs")
    assert done.returncode == 1, output(done)
    assert f"{path}:" in done.stdout and "tabel" in done.stdout


@pytest.mark.slow
def test_the_component_and_the_yaml_file_make_the_same_code_location(tmp_path: Path) -> None:
    """The demo through the configuration file (dg_defs empty), then through a ``defs.yaml``
    holding the same mapping: the same assets, checks, jobs, sensors, schedules, resources."""
    repository = Repository(tmp_path)
    from_file = location_summary(repository)
    defs_yaml(repository.root / "watermark_assets" / "dg_defs" / "demo", demo_mapping())
    from_component = location_summary(repository)
    assert from_component == from_file
    assert (
        "events" in from_file["assets"]
        and "orders_daily_schedule 0 0 * * *" in (from_file["schedules"])
    )


@pytest.mark.slow
def test_dg_dev_serves_the_component_from_the_repository_root(tmp_path: Path) -> None:
    repository = Repository(tmp_path)
    assert repository.run("dg", "scaffold", "defs", TYPE, "clicks").returncode == 0
    port = free_port()
    log = tmp_path / "dg_dev.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [str(BIN / "dg"), "dev", "-h", "127.0.0.1", "-p", str(port)],
            cwd=repository.root,
            env=repository.env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    query = "{ assetNodes { assetKey { path } isMaterializable } }"  # not the sources

    def assets() -> list[str] | None:
        if process.poll() is not None:
            raise AssertionError(f"dg dev exited: {log.read_text(errors='replace')[-3000:]}")
        try:
            answer = requests.post(
                f"http://127.0.0.1:{port}/graphql", json={"query": query}, timeout=10
            ).json()
        except (requests.RequestException, ValueError):
            return None
        nodes = (answer.get("data") or {}).get("assetNodes") or []
        return [n["assetKey"]["path"][-1] for n in nodes if n["isMaterializable"]] or None

    try:
        served = wait_for(
            "dg dev's asset nodes",
            assets,
            timeout=240,
            interval=2,
            details=lambda: log.read_text(errors="replace")[-3000:],
        )
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    assert served == ["clicks"]
    # The copy's instance (its .env names it), not a throwaway one: as `make ui`'s.
    assert (repository.instance_home / "history" / "runs.db").is_file()
    assert not list(repository.root.glob(".tmp_dagster_home_*"))
