"""`watermark-assets plan PIPELINE [--partition KEY]...`: what a run would read and write now,
every kind through the contract's ``plan`` (a dry run: no row read, no Spark, nothing written).

The demo's pipelines are planned on the demo's data in a folder of their own, at a fixed time;
then three kinds are run for real and planned again: a plan says what the run then does.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
import yaml
from dagster import DagsterInstance
from deltalake import DeltaTable

from watermark_assets.cli import generate, main, plan_command
from watermark_assets.config import DEFAULT_CONFIG_PATH, load_config
from watermark_assets.core.replace_window import Interval, ReplaceWindow
from watermark_assets.defs import build_definitions
from watermark_assets.delta.read import read_columns
from watermark_assets.delta.replace import KeyMoves
from watermark_assets.engine.plan import PlannedRun
from watermark_assets.engine.write import Append, Merge, Replace, ReplaceTable, mode_text
from watermark_assets.kinds import KINDS

#: The time every plan below is made at: the day after the demo's three days.
NOW = datetime(2024, 2, 1, tzinfo=timezone.utc)
DAYS = ("2024-01-28", "2024-01-29", "2024-01-30")


def day_read(column: str, first: str, end: str) -> str:
    return (
        f"the rows where `{column}` >= TIMESTAMP '{first} 00:00:00+00:00' AND `{column}` < "
        f"TIMESTAMP '{end} 00:00:00+00:00'"
    )


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The demo's configuration over its data in ``tmp_path/data``, nothing run yet."""
    monkeypatch.setenv("WATERMARK_ASSETS_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    generate(str(DEFAULT_CONFIG_PATH))
    yield tmp_path / "data"


def planned(name: str, *keys: str) -> dict[str, Any]:
    """``plan NAME --partition KEY... --json`` at :data:`NOW`, as printed."""
    return _printed(lambda: plan_command(str(DEFAULT_CONFIG_PATH), name, keys, True, lambda: NOW))


def _printed(command: Any) -> dict[str, Any]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert command() == 0
    said: dict[str, Any] = json.loads(out.getvalue())
    return said


def landed(data: Path, day: str) -> str:
    """``plan``'s text of the landing files of ``day``, relative to the landing folder."""
    root = data / "landing" / "events"
    names = sorted(p.relative_to(root).as_posix() for p in root.glob(f"date={day}/*/*"))
    assert len(names) == 8
    return f"8 files: {', '.join(names[:3])}, ... (2 more), {', '.join(names[-3:])}"


def test_every_kind_plans_through_the_contract() -> None:
    assert all(callable(kind.plan) for kind in KINDS.values())


def test_each_kind_says_what_its_next_run_reads_and_writes(demo: Path) -> None:
    events = planned("events", "2024-01-29")
    assert events["kind"] == "file_path"
    assert events["planned_at"] == "2024-02-01T00:00:00Z"
    assert events["runs"] == [
        {
            "partition": "2024-01-29",
            "watermark": "none (Initial)",
            "reads": landed(demo, "2024-01-29"),
            "writes": "append the rows read",
            "notes": [],
        }
    ]

    # no partition named: every partition with files above the watermark, as the sensor lists
    every = planned("events")["runs"]
    assert [(run["partition"], run["reads"]) for run in every] == [
        (day, landed(demo, day)) for day in DAYS
    ]

    assert planned("orders")["runs"] == [
        {
            "partition": None,
            "watermark": "(empty: read everything) (delta_metadata)",
            "reads": "the rows where TRUE",
            "writes": "append the rows read",
            "notes": [],
        }
    ]

    # seed 003, a first run: the cut-off is `from`, every window of [from, to) is due
    daily = planned("orders_daily")["runs"]
    assert [run["partition"] for run in daily] == list(DAYS)
    assert daily[1] == {
        "partition": "2024-01-29",
        "watermark": "high watermark none (never run); cut-off 2024-01-28T00:00:00Z (first run: "
        "from)",
        "reads": day_read("updated_at", "2024-01-29", "2024-01-30"),
        "writes": "replace the rows of updated_at in [2024-01-29T00:00:00Z, "
        "2024-01-30T00:00:00Z) (a key's rows elsewhere moved: keys id)",
        "notes": [],
    }
    # a partial last window: February ends at `to`
    monthly = planned("orders_monthly")["runs"]
    assert [(run["partition"], run["reads"]) for run in monthly] == [
        ("2024-01-01", day_read("updated_at", "2024-01-01", "2024-02-01")),
        ("2024-02-01", day_read("updated_at", "2024-02-01", "2024-02-15")),
    ]

    assert planned("orders_by_status", "shipped", "paid")["runs"] == [
        {
            "partition": unit,
            "watermark": "done-at none (never run)",
            "reads": f"the rows where `status` = '{unit}'",
            "writes": f"replace the rows of status = {unit}",
            "notes": [],
        }
        for unit in ("shipped", "paid")
    ]

    (cell,) = planned("survey_answers", "2024-01-29|s1")["runs"]
    assert cell["reads"] == (
        day_read("answered_at", "2024-01-29", "2024-01-30") + " AND `survey_id` = 's1'"
    )
    assert cell["writes"] == (
        "replace the rows of answered_at in [2024-01-29T00:00:00Z, 2024-01-30T00:00:00Z) "
        "and survey_id = s1"
    )

    (batch,) = planned("events_5min")["runs"]
    assert (batch["watermark"], batch["reads"], batch["writes"]) == (
        "none (never run)",
        "nothing",
        "nothing",
    )
    assert batch["notes"][0].startswith("no rows appended upstream since versions events -1")


def test_a_plan_reads_and_writes_nothing(demo: Path) -> None:
    def tree() -> dict[str, tuple[int, int]]:
        return {
            str(p): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in demo.parent.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        }

    before = tree()
    for name, keys in {
        "events": ["2024-01-29"],
        "clicks": ["2024-01-28"],
        "orders": [],
        "customers_pg": [],
        "orders_daily": [],
        "payments_api_daily": ["2024-01-30"],
        "orders_monthly": [],
        "orders_by_status": ["placed"],
        "survey_answers": ["2024-01-28|s2"],
        "events_5min": [],
    }.items():
        planned(name, *keys)
    assert tree() == before


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        pytest.param(
            ["orders_by_status"],
            "pipeline 'orders_by_status' has partitions and a run reads each one's own rows: "
            "name the partitions to plan with --partition KEY",
            id="a unit pipeline, no unit named",
        ),
        pytest.param(
            ["orders", "--partition", "x"],
            "pipeline 'orders' has no partitions: ['x'] name none; leave out --partition",
            id="a partition of an unpartitioned pipeline",
        ),
        pytest.param(
            ["orders_daily", "--partition", "2024-1-29"],
            "pipeline 'orders_daily': partition '2024-1-29' is not one of its partitions "
            "('2024-01-28' to '2024-01-30', written as '%Y-%m-%d')",
            id="a day written otherwise",
        ),
        pytest.param(
            ["orders_daily", "--partition", "2024-01-31"],
            "partition '2024-01-31' is not one of its partitions",
            id="a day after to",
        ),
        pytest.param(
            ["orders_by_status", "--partition", "lost"],
            "partition 'lost' is not one of its partitions ['placed', 'paid', 'shipped']",
            id="a unit not listed",
        ),
        pytest.param(
            ["survey_answers", "--partition", "s1"],
            "partition 's1' is not one of its partitions; write one value per dimension "
            "['time', 'unit'], joined by '|'",
            id="a cell without its day",
        ),
        pytest.param(
            ["survey_answers", "--partition", "2024-02-29|s1"],
            "partition '2024-02-29|s1' (time '2024-02-29') is not one of its partitions",
            id="a cell outside the grid",
        ),
        pytest.param(["nope"], "'nope'", id="no such pipeline"),
    ],
)
def test_what_cannot_be_planned_exits_2_naming_the_fix(
    arguments: list[str], said: str, demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--config", str(DEFAULT_CONFIG_PATH), "plan", *arguments]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert said in captured.err
    assert captured.err.startswith("watermark-assets: ")


def test_the_text_names_each_partition_then_its_read_and_write(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    command = ["plan", "orders_by_status", "--partition", "placed"]
    assert main(["--config", str(DEFAULT_CONFIG_PATH), *command]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("orders_by_status (unit), planned at ")
    assert lines[0].endswith("; nothing was read or written:")
    assert lines[1:] == [
        "partition placed:",
        "  watermark: done-at none (never run)",
        "  reads:     the rows where `status` = 'placed'",
        "  writes:    replace the rows of status = placed",
    ]


WINDOW = ReplaceWindow(
    "updated_at",
    datetime(2024, 1, 29, tzinfo=timezone.utc),
    datetime(2024, 1, 30, tzinfo=timezone.utc),
    Interval.CLOSED_OPEN,
)
UNIT = ReplaceWindow("status", "paid", "paid", Interval.CLOSED_CLOSED)


@pytest.mark.parametrize(
    ("mode", "text"),
    [
        (Append(), "append the rows read"),
        (Merge(("id", "region")), "merge the rows read on id, region"),
        (ReplaceTable(7), "replace every row of the table (pinned to version 7)"),
        (
            Replace.read_range(),
            "replace the range read (from the watermark to the greatest value read)",
        ),
        (
            Replace((WINDOW,)),
            "replace the rows of updated_at in [2024-01-29T00:00:00Z, 2024-01-30T00:00:00Z)",
        ),
        (
            Replace((WINDOW, UNIT), KeyMoves(("id",), "updated_at")),
            "replace the rows of updated_at in [2024-01-29T00:00:00Z, 2024-01-30T00:00:00Z); "
            "status = paid (a key's rows elsewhere moved: keys id)",
        ),
        (
            Replace(((WINDOW, UNIT),)),
            "replace the rows of updated_at in [2024-01-29T00:00:00Z, 2024-01-30T00:00:00Z) "
            "and status = paid",
        ),
    ],
)
def test_each_write_mode_is_said_in_words(mode: Any, text: str) -> None:
    assert mode_text(mode) == text


def test_a_planned_run_without_partition_is_the_whole_asset() -> None:
    run = PlannedRun(None, "w", "r", "x", ("n1",))
    assert run.lines() == [
        "(whole asset):",
        "  watermark: w",
        "  reads:     r",
        "  writes:    x",
        "  note:      n1",
    ]
    assert run.to_dict() == {
        "partition": None,
        "watermark": "w",
        "reads": "r",
        "writes": "x",
        "notes": ["n1"],
    }


@pytest.mark.spark
def test_a_plan_says_what_the_run_then_does(demo: Path) -> None:
    """Planned, run for real (Spark, Delta), planned again: the column pipeline's next read
    starts above the greatest value the run committed, the file partition's files are the
    ones committed and none is left, the unit's done-at is the run's time."""
    config = load_config(DEFAULT_CONFIG_PATH)
    defs = build_definitions(config, clock=lambda: NOW)
    first = planned("events", "2024-01-29")["runs"][0]
    assert first["reads"].startswith("8 files: ")
    with DagsterInstance.ephemeral() as instance:
        for job, key in (
            ("orders_job", None),
            ("events_job", "2024-01-29"),
            ("orders_by_status_job", "paid"),
        ):
            result = defs.resolve_job_def(job).execute_in_process(
                instance=instance, partition_key=key
            )
            assert result.success, job

    source = read_columns(DeltaTable(str(demo / "sources" / "orders")), ["updated_at", "id"])
    stamp = pc.max(source["updated_at"]).as_py().astimezone(timezone.utc)
    newest = pc.equal(source["updated_at"], pc.max(source["updated_at"]))
    last = pc.max(pc.filter(source["id"], newest))
    (orders,) = planned("orders")["runs"]
    assert orders["watermark"] == (
        f"updated_at={stamp:%Y-%m-%dT%H:%M:%S}Z, id={last} (delta_metadata)"
    )
    # two watermark columns and the boundary known: the leading value is read again, the rows
    # committed at it left out
    assert orders["reads"] == (
        f"the rows where `updated_at` >= TIMESTAMP '{stamp:%Y-%m-%d %H:%M:%S}+00:00'"
    )
    at_stamp = pc.sum(newest).as_py()
    assert orders["notes"] == [
        f"the {at_stamp} rows committed at updated_at={stamp:%Y-%m-%dT%H:%M:%S}Z are read "
        "again and left out"
    ]

    events_table = DeltaTable(str(demo / "delta" / "events"))
    committed = read_columns(events_table, ["_source_file"])["_source_file"]
    files = sorted({os.path.basename(f) for f in committed.to_pylist()})
    shown = first["reads"].removeprefix("8 files: ").split(", ")
    listed = [name for name in shown if not name.startswith("... (")]
    assert len(listed) == 6
    assert len(files) == 8
    assert {os.path.basename(p) for p in listed} <= set(files)
    (events,) = planned("events", "2024-01-29")["runs"]
    assert (events["reads"], events["writes"]) == (
        "nothing: no file above the watermark",
        "nothing",
    )
    assert events["watermark"].endswith("(Active)")
    assert [run["partition"] for run in planned("events")["runs"]] == [DAYS[0], DAYS[2]]

    (paid,) = planned("orders_by_status", "paid")["runs"]
    assert paid["watermark"] == "done-at 2024-02-01T00:00:00Z"


def test_a_partitioned_column_pipeline_plans_each_partition_as_a_replay_chunk(
    tmp_path: Path,
) -> None:
    """A column pipeline with ``partitions``: a run replays its partitions' windows, in start
    order whatever order they were named in."""
    pipeline = {
        "name": "orders",
        "source": {"type": "delta_table", "uri": str(tmp_path / "source")},
        "watermark": {"columns": ["updated_at", "id"]},
        "table": {"uri": str(tmp_path / "delta" / "orders")},
        "partitions": {"granularity": "hourly", "start": "2026-04-03T00:00"},
        "destination": {"replace_by_watermark": True},
    }
    path = tmp_path / "pipelines.yaml"
    path.write_text(yaml.safe_dump({"pipelines": [pipeline]}), encoding="utf-8")
    said = _printed(
        lambda: plan_command(
            str(path), "orders", ["2026-04-03-04:00", "2026-04-03-02:00"], True, lambda: NOW
        )
    )

    def hour(h: int) -> str:
        return f"2026-04-03T{h:02d}:00:00Z"

    assert said["runs"] == [
        {
            "partition": f"2026-04-03-{h:02d}:00",
            "watermark": f"chunk updated_at in [{hour(h)}, {hour(h + 1)})",
            "reads": f"the rows where `updated_at` >= TIMESTAMP '2026-04-03 {h:02d}:00:00+00:00' "
            f"AND `updated_at` < TIMESTAMP '2026-04-03 {h + 1:02d}:00:00+00:00'",
            "writes": f"replace the rows of updated_at in [{hour(h)}, {hour(h + 1)})",
            "notes": ["the commit leaves the pipeline's column watermark"],
        }
        for h in (2, 4)
    ]
    assert not (tmp_path / "delta").exists()


def test_an_unpartitioned_time_watermark_plans_its_effective_range(
    demo: Path, tmp_path: Path
) -> None:
    """``partition: none``: one run reads ``[cut-off, to)`` (seed 003: the first run's cut-off
    is ``from``) and records the one window ``[from, to)``."""
    document = yaml.safe_load(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"))
    (daily,) = [p for p in document["pipelines"] if p["name"] == "orders_daily"]
    daily["watermark"]["partition"] = "none"
    path = tmp_path / "none.yaml"
    path.write_text(yaml.safe_dump({"pipelines": [daily]}), encoding="utf-8")
    said = _printed(lambda: plan_command(str(path), "orders_daily", [], True, lambda: NOW))
    (run,) = said["runs"]
    assert run["partition"] is None
    assert run["watermark"] == "cut-off 2024-01-28T00:00:00Z (first run: from)"
    assert run["reads"] == day_read("updated_at", "2024-01-28", "2024-01-31")
    assert run["writes"] == (
        "replace the rows of updated_at in [2024-01-28T00:00:00Z, 2024-01-31T00:00:00Z) "
        "(a key's rows elsewhere moved: keys id)"
    )
