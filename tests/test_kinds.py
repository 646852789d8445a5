"""The registry of pipeline kinds (``watermark_assets/kinds``): every kind once, every pipeline in
its kind, and the commands that iterate it cover every kind (the column pipelines included)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from watermark_assets.cli import main
from watermark_assets.config import DEFAULT_CONFIG_PATH, load_config
from watermark_assets.kinds import KINDS, kind_of, summary_rows
from watermark_assets.kinds.report import PartitionedRow, SummaryRow


def test_every_pipeline_of_the_demo_is_in_exactly_its_kind() -> None:
    config = load_config(DEFAULT_CONFIG_PATH)
    assert set(KINDS) == {"file_path", "time", "unit", "event_time", "column"}
    assert {p.watermark.kind for p in config.pipelines} == set(KINDS)
    for pipeline in config.pipelines:
        holding = [k.name for k in KINDS.values() if pipeline in k.pipelines(config)]
        assert holding == [pipeline.watermark.kind], pipeline.name
        kind, found = kind_of(config, pipeline.name)
        assert (kind.name, found) == (pipeline.watermark.kind, pipeline)
        assert isinstance(pipeline, kind.config_model)


def _column_config(tmp_path: Path) -> Path:
    """The demo's ``orders`` (a column pipeline) and a file pipeline, nothing run yet."""
    demo = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"))
    by_name = {p["name"]: p for p in demo["pipelines"]}
    orders, events = by_name["orders"], by_name["events"]
    orders["source"]["uri"] = str(tmp_path / "sources" / "orders")
    orders["table"]["uri"] = str(tmp_path / "delta" / "orders")
    events["source"]["uri"] = str(tmp_path / "landing")
    events["table"]["uri"] = str(tmp_path / "delta" / "events")
    (tmp_path / "landing").mkdir()
    path = tmp_path / "pipelines.yaml"
    path.write_text(yaml.safe_dump({"pipelines": [events, orders]}), encoding="utf-8")
    return path


def test_summary_lists_a_column_pipeline(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    path = _column_config(tmp_path)
    files, others = summary_rows(load_config(path))
    assert [type(r) for r in files] == [SummaryRow]
    assert [(type(r), r.pipeline, r.kind) for r in others] == [
        (PartitionedRow, "orders", "column (delta_metadata)")
    ]

    assert main(["--config", str(path), "summary"]) == 0
    lines = capfd.readouterr().out.splitlines()
    orders = next(line for line in lines if line.startswith("orders "))
    assert orders.split() == [
        "orders",
        "column",
        "(delta_metadata)",
        "-",
        "0",
        "-",
        "-",
        "-",
        "fail",
    ]
    assert any(line.startswith("events ") for line in lines)


def test_explain_of_a_column_pipeline_starts_with_its_row(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = _column_config(tmp_path)
    assert main(["--config", str(path), "explain", "orders"]) == 0
    first = capfd.readouterr().out.splitlines()[0]
    assert first == (
        "orders (column (delta_metadata)): partitions -, 0 rows, watermark -, cut-off -, "
        "Delta version -"
    )


#: command -> the hook it needs of a kind, and the kinds of the demo that have it
HOOKS = {
    "replay": ("replay", {"column"}),
    "explain PIPELINE PATH": ("explain_files", {"file_path"}),
    "run-sensors": ("sensor_pass", {"file_path"}),
    "repair-state (its own way)": ("repair", {"file_path", "event_time"}),
    "generate-demo-data": ("demo_data", {"file_path", "unit", "column"}),
    "demo": ("demo_runs", {"time", "unit", "event_time", "column"}),
}


@pytest.mark.parametrize(("hook", "kinds"), HOOKS.values(), ids=list(HOOKS))
def test_each_command_finds_its_hook_in_the_kinds_that_have_it(hook: str, kinds: set[str]) -> None:
    assert {k.name for k in KINDS.values() if getattr(k, hook) is not None} == kinds


def test_a_command_a_kind_lacks_names_the_kinds_and_pipelines_that_have_it() -> None:
    from watermark_assets.exceptions import ConfigError
    from watermark_assets.kinds import kind_for

    config = load_config(DEFAULT_CONFIG_PATH)
    kind, pipeline = kind_for(config, "orders", "replay")
    assert (kind.name, pipeline.name) == ("column", "orders")
    columns = [p.name for p in config.pipelines if p.watermark.kind == "column"]
    with pytest.raises(ConfigError) as refused:
        kind_for(config, "orders_daily", "replay")
    assert str(refused.value).startswith(
        "pipeline 'orders_daily' has a 'time' watermark; this command works on pipelines whose "
        f"watermark.kind is 'column': {columns}"
    )


def test_every_pipeline_of_the_demo_has_a_row_and_its_state_logs_or_repair() -> None:
    """repair-state works for every kind: its own repair, or the state logs it rebuilds."""
    config = load_config(DEFAULT_CONFIG_PATH)
    for kind in KINDS.values():
        for pipeline in kind.pipelines(config):
            assert kind.repair is not None or kind.state_logs(config, pipeline), pipeline.name
