"""The package's layers, as docs/design.md draws them: dependencies point downwards only.

Read from the source text (``ast``), so a rule holds for imports inside functions too.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "watermark_assets"

#: (modules, the imports they must not make, why)
RULES = [
    (
        "core/**/*.py",
        ("*", "watermark_assets."),
        "the core is pure: the standard library and watermark_assets.core only",
    ),
    (
        "delta/*.py",
        ("watermark_assets.runs", "watermark_assets.defs", "watermark_assets.sources", "dagster"),
        "the Delta adapter knows nothing of runs, sources or Dagster",
    ),
    (
        "spark/*.py",
        ("watermark_assets.runs", "watermark_assets.defs", "watermark_assets.delta", "dagster"),
        "the Spark adapter knows nothing of runs, Delta or Dagster",
    ),
    (
        "sources/*.py",
        ("watermark_assets.runs", "watermark_assets.defs", "dagster"),
        "sources are strategies the runs call, never the other way round",
    ),
    (
        "providers/*.py",
        ("watermark_assets.runs", "watermark_assets.defs", "dagster"),
        "providers keep a watermark; runs decide when",
    ),
    (
        "state/*.py",
        ("watermark_assets.runs", "watermark_assets.defs", "dagster"),
        "state is read and written by runs and sensors, not the reverse",
    ),
    (
        "engine/*.py",
        (
            "watermark_assets.runs",
            "watermark_assets.defs",
            "watermark_assets.config",
            "watermark_assets.kinds",
            "watermark_assets.providers",
            "watermark_assets.cli",
            "dagster",
        ),
        "the engine executes any kind's plan: it knows no run, kind, configuration or Dagster",
    ),
    (
        "runs/*.py",
        ("watermark_assets.defs", "dagster"),
        "runs work without Dagster (the CLI and the tests call them directly)",
    ),
    (
        "storage.py",
        (
            "watermark_assets.runs",
            "watermark_assets.defs",
            "watermark_assets.sources",
            "watermark_assets.state",
            "watermark_assets.delta",
            "watermark_assets.spark",
            "dagster",
        ),
        "storage is the bottom adapter: only the core below it",
    ),
    (
        "names.py",
        ("*", "watermark_assets."),
        "the names on disk are pure: the standard library and watermark_assets.core only",
    ),
    (
        "vocabulary.py",
        (
            "watermark_assets.runs",
            "watermark_assets.defs",
            "watermark_assets.sources",
            "watermark_assets.state",
            "watermark_assets.delta",
            "watermark_assets.spark",
            "watermark_assets.config",
            "watermark_assets.providers",
        ),
        "the vocabulary is pure: the standard library, Dagster's metadata values and the core",
    ),
    (
        "staging.py",
        ("watermark_assets.runs", "watermark_assets.defs", "watermark_assets.sources", "dagster"),
        "staging sits below runs and sources",
    ),
]

#: The classes of a pipeline's configuration (and their aliases): asking which one a pipeline is
#: asks its kind.
PIPELINE_CLASSES = {
    "FilePipelineConfig",
    "Pipeline",
    "ColumnPipelineConfig",
    "UnitPipelineConfig",
    "TimePipelineConfig",
    "EventTimePipelineConfig",
}
#: Attributes that ask the configuration for one kind's pipelines, or a unit pipeline whether
#: it is a time x unit one.
KIND_ATTRIBUTES = {
    "file_pipelines",
    "column_pipelines",
    "time_pipelines",
    "unit_pipelines",
    "event_time_pipelines",
    "is_time_by_unit",
}
#: Where asking which kind a pipeline is may happen: the configuration that defines the kinds,
#: and the kinds themselves (``kinds/``: the registry and one module per kind). ``defs/build.py``
#: builds every pipeline through ``PipelineKind.dagster_defs`` and asks no more.
MAY_ASK_THE_KIND = ("config/", "kinds/")
#: Sites elsewhere that still ask, each with its reason (module -> why). Keep it tiny: a new
#: command or builder goes through ``kinds.KINDS`` instead.
STILL_ASKS: dict[str, str] = {}


def imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


def runtime_imports(path: Path) -> Iterator[str]:
    """:func:`imports`, except those under ``if TYPE_CHECKING:`` (annotations only)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


def test_the_configuration_is_declarative() -> None:
    """config/ imports no adapter that builds what it describes: sources/ and providers/
    register their builders in config/registry.py (they import config/, never the reverse),
    inside a function or not; annotations may name their types."""
    refused = (
        "watermark_assets.sources",
        "watermark_assets.providers",
        "watermark_assets.runs",
        "watermark_assets.defs",
        "dagster._core",
    )
    modules = sorted((PACKAGE / "config").glob("*.py"))
    assert modules, "config/ holds no module"
    wrong = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in modules
        for name in runtime_imports(path)
        if forbidden(name, refused)
    ]
    assert not wrong, wrong


def forbidden(name: str, refused: tuple[str, ...]) -> bool:
    if "*" in refused:  # anything but the standard library and the core itself
        top = name.split(".")[0]
        if top in sys.stdlib_module_names or top == "__future__":
            return False
        return not (name == "watermark_assets.core" or name.startswith("watermark_assets.core."))
    return any(name == r.rstrip(".") or name.startswith(r.rstrip(".") + ".") for r in refused)


@pytest.mark.parametrize(("pattern", "refused", "why"), RULES, ids=[r[0] for r in RULES])
def test_modules_import_only_downwards(pattern: str, refused: tuple[str, ...], why: str) -> None:
    modules = sorted(PACKAGE.glob(pattern))
    assert modules, f"{pattern} matches no module"
    wrong = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in modules
        for name in imports(path)
        if forbidden(name, refused)
    ]
    assert not wrong, f"{why}: {wrong}"


def test_the_spark_adapter_imports_no_source_at_run_time() -> None:
    """``spark/`` sits below ``sources/`` (the sources call it): a run-time import the other way
    made ``import watermark_assets.spark.batch`` fail on its own (``sources/__init__`` imports
    every source, ``landing_files`` imports ``spark.batch`` half loaded). Annotations may name
    a source's types (``if TYPE_CHECKING:``)."""
    wrong = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in sorted((PACKAGE / "spark").glob("*.py"))
        for name in runtime_imports(path)
        if forbidden(name, ("watermark_assets.sources",))
    ]
    assert not wrong, wrong


def test_the_spark_batch_module_imports_first_in_a_fresh_interpreter() -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", "import watermark_assets.spark.batch"],
        capture_output=True,
        text=True,
        cwd=PACKAGE.parent,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


#: What ``engine/`` may import of the package (docs/design.md, "Imports"): the adapters below it
#: and the core; anything else of the package is refused, inside a function or not.
ENGINE_MAY_IMPORT = (
    "watermark_assets.engine",
    "watermark_assets.delta",
    "watermark_assets.spark",
    "watermark_assets.state",
    "watermark_assets.sources",
    "watermark_assets.core",
    "watermark_assets.storage",
    "watermark_assets.staging",
    "watermark_assets.faults",
    "watermark_assets.exceptions",
)


def engine_refusals(path: Path) -> list[str]:
    """The imports of the package ``path`` makes that the engine may not make (``from
    watermark_assets import storage`` imports ``watermark_assets.storage``)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "watermark_assets":
                names += [f"watermark_assets.{alias.name}" for alias in node.names]
            else:
                names.append(node.module)
    return [
        name
        for name in names
        if (name == "watermark_assets" or name.startswith("watermark_assets."))
        and not any(name == ok or name.startswith(ok + ".") for ok in ENGINE_MAY_IMPORT)
    ]


def test_the_engine_imports_only_the_adapters_and_the_core() -> None:
    """Every module of engine/ (the plan, the write, the execute loop) imports only the layers
    below it: a kind plans through engine/plan.py, the engine never asks back."""
    modules = {path.name: path for path in (PACKAGE / "engine").glob("*.py")}
    assert {"plan.py", "write.py", "execute.py"} <= set(modules), sorted(modules)
    wrong = {name: engine_refusals(path) for name, path in sorted(modules.items())}
    assert not any(wrong.values()), wrong


@pytest.mark.parametrize(
    ("source", "refused"),
    [
        ("from watermark_assets.delta.committer import DeltaCommitter", []),
        ("import watermark_assets.core.column.predicate", []),
        ("from watermark_assets.runs.column import ColumnPlan", ["watermark_assets.runs.column"]),
        ("from watermark_assets.config import ColumnPipelineConfig", ["watermark_assets.config"]),
        ("from watermark_assets import storage, staging", []),
        ("from watermark_assets import names", ["watermark_assets.names"]),
        ("import watermark_assets", ["watermark_assets"]),
        (
            "from watermark_assets.providers.manager import X",
            ["watermark_assets.providers.manager"],
        ),
        ("def f():\n    from watermark_assets.kinds import KINDS", ["watermark_assets.kinds"]),
    ],
)
def test_the_engine_rule_itself(source: str, refused: list[str], tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(source + "\n", encoding="utf-8")
    assert engine_refusals(planted) == refused


def kind_questions(source: str) -> Iterator[tuple[int, str]]:
    """Where ``source`` asks which kind a pipeline is: ``isinstance(x, <Kind>PipelineConfig)``
    (a tuple or union of them too) and ``.file_pipelines``, ``.is_time_by_unit``, ... ."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
            classes = node.args[1] if len(node.args) == 2 else None
            named = {
                n.id if isinstance(n, ast.Name) else n.attr
                for n in (ast.walk(classes) if classes is not None else ())
                if isinstance(n, ast.Name | ast.Attribute)
            }
            for name in sorted(named & PIPELINE_CLASSES):
                yield node.lineno, f"isinstance(..., {name})"
        elif isinstance(node, ast.Attribute) and node.attr in KIND_ATTRIBUTES:
            yield node.lineno, f".{node.attr}"


def may_ask_the_kind(relative: str) -> bool:
    return relative.startswith(MAY_ASK_THE_KIND) or relative in STILL_ASKS


def test_only_the_kinds_ask_which_kind_of_pipeline_they_hold() -> None:
    """The CLI, the run worker and every other module go through ``kinds.KINDS`` (docs/design.md,
    "One pipeline model"): asking the configuration for one kind's pipelines, or a pipeline for
    its class, happens in ``config/``, ``kinds/`` and the Dagster factory only."""
    asking = [
        f"{relative}:{line} {what}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not may_ask_the_kind(relative := path.relative_to(PACKAGE).as_posix())
        for line, what in kind_questions(path.read_text(encoding="utf-8"))
    ]
    assert not asking, f"asks which kind outside {MAY_ASK_THE_KIND} (use kinds.KINDS): {asking}"


def test_every_site_still_asking_is_still_there() -> None:
    """An entry of STILL_ASKS that no longer asks is removed, so the list stays true."""
    gone = [
        relative
        for relative in STILL_ASKS
        if not list(kind_questions((PACKAGE / relative).read_text(encoding="utf-8")))
    ]
    assert not gone, gone


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("for p in config.file_pipelines: pass", [".file_pipelines"]),
        ("names = [p.name for p in cfg.event_time_pipelines]", [".event_time_pipelines"]),
        ("if pipeline.is_time_by_unit: pass", [".is_time_by_unit"]),
        ("isinstance(p, TimePipelineConfig)", ["isinstance(..., TimePipelineConfig)"]),
        (
            "isinstance(p, config.ColumnPipelineConfig | UnitPipelineConfig)",
            ["isinstance(..., ColumnPipelineConfig)", "isinstance(..., UnitPipelineConfig)"],
        ),
        ("isinstance(p, (Pipeline, str))", ["isinstance(..., Pipeline)"]),
        ("isinstance(p, dict)", []),
        ("config.pipeline(name).watermark.kind", []),
        ("for kind, p in pipelines(config): kind.summarize(config, p)", []),
    ],
    ids=[
        "a kind's list of pipelines",
        "the event-time pipelines in a comprehension",
        "a unit pipeline asked whether it is time x unit",
        "isinstance on one kind",
        "isinstance on a union, one module's class qualified",
        "isinstance on the file kind's alias in a tuple",
        "isinstance on something else",
        "the registry key read from the configuration",
        "iterating the registry",
    ],
)
def test_the_kind_question_reader_itself(source: str, found: list[str]) -> None:
    assert [what for _, what in kind_questions(source)] == found


def test_a_planted_kind_question_outside_the_kinds_fails_the_rule() -> None:
    """The rule fails on the CLI's source with one old dispatch put back."""
    cli = (PACKAGE / "cli.py").read_text(encoding="utf-8")
    planted = cli + "\n\ndef _old(config):\n    return [p.name for p in config.time_pipelines]\n"
    assert not may_ask_the_kind("cli.py")
    assert list(kind_questions(cli)) == []
    assert [what for _, what in kind_questions(planted)] == [".time_pipelines"]


@pytest.mark.parametrize(
    ("name", "refused", "expected"),
    [
        ("json", ("*",), False),
        ("watermark_assets.core.filepath.path", ("*",), False),
        ("watermark_assets.exceptions", ("*",), True),
        ("pyarrow", ("*",), True),
        ("watermark_assets.runs.faults", ("watermark_assets.runs",), True),
        ("watermark_assets.runsx", ("watermark_assets.runs",), False),
        ("dagster._core.definitions", ("dagster",), True),
    ],
)
def test_the_rule_reader_itself(name: str, refused: tuple[str, ...], expected: bool) -> None:
    assert forbidden(name, refused) is expected


#: A literal that looks like a name on disk: ``watermark_assets`` alone or followed by ``/``,
#: ``.``, ``_`` or ``:`` (txn app ids, commitInfo keys, table properties, run tags, tables).
NAME_ON_DISK = re.compile(r"^watermark_assets([/._:]|$)")

#: Literals of that shape outside ``names.py`` that are not written to disk (nor read back).
NOT_ON_DISK = {
    ("component.py", "watermark_assets.WatermarkPipelines"): "the Component's type in defs.yaml",
    ("config/registry.py", "watermark_assets.sources"): "a module whose import registers",
    ("config/registry.py", "watermark_assets.providers"): "a module whose import registers",
    ("demo/postgres.py", "watermark_assets_demo"): "the demo's scratch database",
    ("providers/postgres.py", "watermark_assets:"): "an advisory lock key, held during DDL only",
    ("runs/column_quarantine.py", "watermark_assets_column_quarantine"): "a Spark Observation",
    ("kinds/event_time/stream.py", "watermark_assets_"): "a streaming query's name, in memory",
    ("kinds/event_time/window.py", "watermark_assets_"): "a Spark Observation",
    ("sources/column.py", "watermark_assets_column_read"): "a Spark Observation",
    ("sources/column.py", "watermark_assets_column_kept"): "a Spark Observation",
    ("sources/column.py", "watermark_assets_column_reread"): "a Spark Observation",
    ("sources/secondary_input.py", "watermark_assets_secondary_input"): "a Postgres cursor",
    ("sources/table.py", "watermark_assets_malformed_"): "a Spark Observation",
    ("spark/batch.py", "watermark_assets_batch"): "a Spark Observation",
    ("spark/cds.py", "watermark_assets"): "the local cache folder of the JVM class archives",
    ("spark/cds.py", "watermark_assets.spark.cds"): "a module run with python -m",
    ("spark/cds.py", "watermark_assets_cds_"): "a temporary folder's prefix",
    ("spark/fsspec_source.py", "watermark_assets_fsspec"): "a Spark data source's short name",
    ("spark/session.py", "watermark_assets"): "spark.app.name",
}


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def name_literals(path: Path) -> Iterator[tuple[int, str]]:
    """The string literals (an f-string's leading text too) of ``path`` shaped like a name on
    disk, docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and NAME_ON_DISK.match(node.value)
        ):
            yield node.lineno, node.value


def test_only_names_py_spells_a_name_on_disk() -> None:
    """Every txn app id, commitInfo key, table property and run tag is built in ``names.py``
    (pinned by ``tests/test_names.py``): a second spelling elsewhere could drift from it and
    forget every existing table's state."""
    spelled = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == "names.py":
            continue
        for line, text in name_literals(path):
            if (relative, text) not in NOT_ON_DISK:
                spelled.append(f"{relative}:{line} {text!r}")
    assert not spelled, f"names on disk spelled outside names.py: {spelled}"


def test_every_allowed_spelling_is_still_there() -> None:
    """An entry of NOT_ON_DISK whose literal is gone is removed, so the list stays true."""
    found = {
        (path.relative_to(PACKAGE).as_posix(), text)
        for path in PACKAGE.rglob("*.py")
        for _, text in name_literals(path)
    }
    assert not set(NOT_ON_DISK) - found, set(NOT_ON_DISK) - found


#: Where an ``AssetKey`` may be built (module -> why): a pipeline's key is made by
#: ``defs/keys.asset_key`` (its ``key_prefix``, then its name) and nowhere else.
MAY_BUILD_ASSET_KEYS = {
    "defs/keys.py": "the one function making a pipeline's key: key_prefix, then its name",
    "defs/upstreams.py": "a source location's external asset (source/...), never a pipeline's",
}


def builds_of(cls: str, source: str) -> Iterator[int]:
    """The lines of ``source`` that build a ``cls``: ``cls(...)``, ``module.cls(...)``,
    ``cls.from_user_string(...)`` and the like."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and getattr(func.value, "id", None) == cls:
            yield node.lineno  # AssetKey.from_user_string(...), AssetKey.from_coercible(...)
        elif getattr(func, "id", None) == cls or getattr(func, "attr", None) == cls:
            yield node.lineno


def asset_key_builds(source: str) -> Iterator[int]:
    """The lines of ``source`` that build an ``AssetKey``."""
    return builds_of("AssetKey", source)


def test_a_pipelines_asset_key_is_made_in_one_place() -> None:
    """``AssetKey([pipeline.name])`` built again elsewhere would drop the pipeline's
    ``key_prefix``: its checks, sensors or upstream edges would point at another asset."""
    building = [
        f"{relative}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if (relative := path.relative_to(PACKAGE).as_posix()) not in MAY_BUILD_ASSET_KEYS
        for line in asset_key_builds(path.read_text(encoding="utf-8"))
    ]
    assert not building, f"an AssetKey built outside defs/keys.asset_key: {building}"
    for relative in MAY_BUILD_ASSET_KEYS:  # the list stays true
        assert list(asset_key_builds((PACKAGE / relative).read_text(encoding="utf-8"))), relative


#: Where a table's ``DeltaCommitter`` may be built, each with its reason: everywhere else asks
#: ``committer_for(table)``, the one place its storage options are worked out.
MAY_BUILD_COMMITTERS = {
    "delta/committer.py": "committer_for itself",
    "providers/delta_metadata.py": "the provider's table, with the storage options it was given",
}


def test_a_tables_committer_is_made_in_one_place() -> None:
    """``DeltaCommitter(uri)`` built again elsewhere works out the storage options once more
    (credentials, the fsspec filesystem): ``committer_for`` is the one place (issue 23)."""
    building = [
        f"{relative}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if (relative := path.relative_to(PACKAGE).as_posix()) not in MAY_BUILD_COMMITTERS
        for line in builds_of("DeltaCommitter", path.read_text(encoding="utf-8"))
    ]
    assert not building, f"a DeltaCommitter built outside delta/committer.committer_for: {building}"
    for relative in MAY_BUILD_COMMITTERS:  # the list stays true
        assert list(builds_of("DeltaCommitter", (PACKAGE / relative).read_text("utf-8"))), relative


@pytest.mark.parametrize(
    ("source", "builds"),
    [
        ("key = AssetKey([pipeline.name])", True),
        ("deps = [AssetKey(name) for name in upstreams]", True),
        ("key = dagster.AssetKey(['a', pipeline.name])", True),
        ("key = AssetKey.from_user_string(pipeline.name)", True),
        ("key = asset_key(pipeline)", False),
        ("def f(key: AssetKey) -> AssetKey: return key", False),
    ],
    ids=[
        "from a pipeline's name",
        "from upstream names",
        "through the dagster module",
        "from a user string",
        "through defs/keys",
        "the type in annotations",
    ],
)
def test_the_asset_key_reader_itself(source: str, builds: bool) -> None:
    assert bool(list(asset_key_builds(source))) is builds


def kind_folders() -> dict[str, list[Path]]:
    """Each kind's folder (``kinds/<kind>/``, the one holding its ``kind.py``) -> its modules."""
    return {
        folder.name: sorted(folder.rglob("*.py"))
        for folder in sorted((PACKAGE / "kinds").iterdir())
        if (folder / "kind.py").is_file()
    }


def imported_modules(source: str) -> Iterator[str]:
    """Every module ``source`` imports, ``from package import module`` said as
    ``package.module`` (a name that is no module gives a harmless ``package.name``)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


#: The imports of one kind's folder from another's that are allowed, (module in ``kinds/``, the
#: module it imports) -> why. Keep it tiny: what two kinds share belongs in ``engine/``, ``runs/``
#: (the column engine) or ``defs/``'s kind-free helpers.
CROSS_KIND = {
    ("unit/grid_defs.py", "watermark_assets.kinds.time.defs"): "a time x unit pipeline's grid is "
    "the time kind's windows by the unit ids: its partitions, cut-off and window truths",
    ("unit/grid_run.py", "watermark_assets.kinds.time.run"): "a grid cell is planned and "
    "committed as the time kind's window, read for one unit",
}


def cross_kind_imports() -> list[tuple[str, str]]:
    """(module in ``kinds/``, the other kind's module it imports), for every kind's folder."""
    folders = kind_folders()
    found = []
    for kind, paths in folders.items():
        others = [f"watermark_assets.kinds.{other}" for other in folders if other != kind]
        for path in paths:
            relative = path.relative_to(PACKAGE / "kinds").as_posix()
            for name in imported_modules(path.read_text(encoding="utf-8")):
                if any(name == o or name.startswith(o + ".") for o in others):
                    found.append((relative, name))
    return found


def allowed_across(relative: str, name: str) -> bool:
    return any(
        relative == module and (name == target or name.startswith(target + "."))
        for module, target in CROSS_KIND
    )


def test_no_kind_folder_imports_another() -> None:
    """Everything of a kind is in its folder (``kinds/<kind>/``: its ``PipelineKind``, planners,
    runs and Dagster objects): a kind's change never reaches another, and adding a kind adds a
    folder and one registry line (docs/design.md, "One pipeline model")."""
    found = cross_kind_imports()
    assert len(kind_folders()) >= 5, kind_folders()
    wrong = [f"kinds/{relative} imports {name}" for relative, name in found]
    wrong = [
        w
        for (relative, name), w in zip(found, wrong, strict=True)
        if not allowed_across(relative, name)
    ]
    assert not wrong, wrong
    used = {
        (module, target)
        for module, target in CROSS_KIND
        if any(allowed_across(relative, name) and relative == module for relative, name in found)
    }
    assert used == set(CROSS_KIND), "an allowed import no longer made: remove it from CROSS_KIND"


def test_outside_the_kinds_a_kind_is_reached_through_the_registry() -> None:
    """``cli.py``, ``defs/build.py``, the run worker and every shared module go through
    ``kinds.KINDS`` (``kinds/__init__.py``) and the contract; none imports a kind's folder."""
    folders = [f"watermark_assets.kinds.{kind}" for kind in kind_folders()]
    wrong = [
        f"{relative} imports {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not (relative := path.relative_to(PACKAGE).as_posix()).startswith(
            tuple(f"kinds/{kind}/" for kind in kind_folders())
        )
        and relative != "kinds/__init__.py"
        for name in imported_modules(path.read_text(encoding="utf-8"))
        if any(name == f or name.startswith(f + ".") for f in folders)
    ]
    assert not wrong, wrong


#: Each kind's modules that work without Dagster (the CLI and the tests call them directly):
#: planning, staging, committing; the kind's Dagster objects are in its ``defs.py`` and its
#: file kind's ``assets.py``, ``sensors.py``, ``metadata.py`` and notes.
RUN_MODULES = [
    "kinds/file_path/plan.py",
    "kinds/file_path/stage.py",
    "kinds/file_path/commit.py",
    "kinds/file_path/rewrite.py",
    "kinds/column/replay.py",
    "kinds/time/run.py",
    "kinds/unit/run.py",
    "kinds/unit/grid_run.py",
    "kinds/event_time/engines.py",
    "kinds/event_time/progress.py",
    "kinds/event_time/recover.py",
    "kinds/event_time/stream.py",
    "kinds/event_time/upstream.py",
    "kinds/event_time/window.py",
]


@pytest.mark.parametrize("module", RUN_MODULES)
def test_a_kinds_runs_work_without_dagster(module: str) -> None:
    refused = ("watermark_assets.defs", "dagster")
    kind = module.split("/")[1]
    dagster_side = tuple(
        f"watermark_assets.kinds.{kind}.{name}"
        for name in ("defs", "grid_defs", "assets", "sensors", "metadata", "partition_notes")
    )
    path = PACKAGE / module
    wrong = [
        name for name in imports(path) if forbidden(name, refused) or name.startswith(dagster_side)
    ]
    assert not wrong, f"{module} imports {wrong}"


def test_the_registry_leaves_each_kinds_package_reachable() -> None:
    """``import watermark_assets.kinds.file_path.commit as m`` walks the attributes: the
    registry binding ``kinds.file_path`` to the kind's module would hide the package."""
    import importlib

    import watermark_assets.kinds as kinds

    for kind in kind_folders():
        importlib.import_module(f"watermark_assets.kinds.{kind}.kind")
        assert hasattr(getattr(kinds, kind), "__path__"), f"kinds.{kind} is no package"
    import watermark_assets.kinds.file_path.commit as commit  # the form that failed

    assert commit.__name__ == "watermark_assets.kinds.file_path.commit"


def test_a_planted_import_of_another_kind_fails_the_rule() -> None:
    source = "from watermark_assets.kinds.time import run\n"
    assert "watermark_assets.kinds.time.run" in set(imported_modules(source))
    assert "watermark_assets.kinds.unit.kind" in set(
        imported_modules("import watermark_assets.kinds.unit.kind")
    )
    assert allowed_across("unit/grid_run.py", "watermark_assets.kinds.time.run.window_chunk_plan")
    assert not allowed_across("unit/run.py", "watermark_assets.kinds.time.run")
    assert not allowed_across("unit/grid_run.py", "watermark_assets.kinds.time.defs")


#: What a Dagster context says of a run's partitions: read once, in ``defs/partitions.py``
#: (``partition_selection(context)``), and passed on as a ``PartitionSelection``.
CONTEXT_PARTITIONS = {
    "partition_keys",
    "partition_key",
    "partition_key_range",
    "partition_time_window",
}
#: The one module turning a run's context into a ``PartitionSelection``.
READS_THE_RUNS_PARTITIONS = "defs/partitions.py"


def context_partition_reads(source: str) -> Iterator[tuple[int, str]]:
    """Where ``source`` reads a run's partitions off a Dagster context: ``context.partition_keys``
    (any name ending in ``context``, e.g. ``step_context``) and the like."""
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Attribute) and node.attr in CONTEXT_PARTITIONS):
            continue
        owner = node.value
        name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
        if name.endswith("context"):
            yield node.lineno, f"{name}.{node.attr}"


def test_only_the_edge_reads_a_runs_partitions_off_the_context() -> None:
    """Every asset body turns its context into a ``PartitionSelection`` once
    (``defs/partitions.partition_selection``) and its kind plans from that value (issue 23: "only
    the file kind uses PartitionSelection"); reading ``context.partition_keys`` again elsewhere
    would plan from Dagster's context instead."""
    reading = [
        f"{relative}:{line} {what}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if (relative := path.relative_to(PACKAGE).as_posix()) != READS_THE_RUNS_PARTITIONS
        for line, what in context_partition_reads(path.read_text(encoding="utf-8"))
    ]
    assert not reading, (
        f"a run's partitions read off the context (use partition_selection): {reading}"
    )
    edge = (PACKAGE / READS_THE_RUNS_PARTITIONS).read_text(encoding="utf-8")
    assert list(context_partition_reads(edge)), "the edge itself reads them (the list stays true)"


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("keys = list(context.partition_keys)", ["context.partition_keys"]),
        ("key = context.partition_key", ["context.partition_key"]),
        ("w = context.partition_time_window", ["context.partition_time_window"]),
        ("r = step_context.partition_key_range", ["step_context.partition_key_range"]),
        ("k = self.context.partition_keys", ["context.partition_keys"]),
        ("keys = request.partition_keys", []),
        ("run(partition_key=key)", []),
        ("keys = selection.keys", []),
    ],
    ids=[
        "the run's keys",
        "the run's key",
        "the run's window",
        "a step context's range",
        "a context held by an object",
        "a run request's keys",
        "a keyword argument",
        "the selection",
    ],
)
def test_the_context_partition_reader_itself(source: str, found: list[str]) -> None:
    assert [what for _, what in context_partition_reads(source)] == found


def test_a_planted_context_read_in_an_asset_body_fails_the_rule() -> None:
    """The rule fails on the time kind's Dagster module with its old planning call put back."""
    time_defs = (PACKAGE / "kinds" / "time" / "defs.py").read_text(encoding="utf-8")
    planted = time_defs + (
        "\n\ndef _old(context, spec, partitions_def, now):\n"
        "    return windows_of_keys(spec, partitions_def, context.partition_keys, now)\n"
    )
    assert list(context_partition_reads(time_defs)) == []
    assert [what for _, what in context_partition_reads(planted)] == ["context.partition_keys"]
