"""The package's layers, as docs/design.md draws them: dependencies point downwards only.

Read from the source text (``ast``), so a rule holds for imports inside functions too.
"""

from __future__ import annotations

import ast
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
        ("watermark_assets.runs", "watermark_assets.defs", "dagster"),
        "the engine executes any kind's plan: it knows no run, kind or Dagster",
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
        "staging.py",
        ("watermark_assets.runs", "watermark_assets.defs", "watermark_assets.sources", "dagster"),
        "staging sits below runs and sources",
    ),
]

#: The classes of a pipeline's configuration whose type only the Dagster factory may ask.
PIPELINE_CLASSES = {
    "FilePipelineConfig",
    "ColumnPipelineConfig",
    "UnitPipelineConfig",
    "TimePipelineConfig",
}
#: Where asking is allowed: the factory, and the configuration that defines the union.
MAY_ASK_THE_KIND = {"defs/build.py", "config.py"}


def imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


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


def test_only_the_factory_asks_which_kind_of_pipeline_it_holds() -> None:
    asking = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance"):
                continue
            classes = node.args[1] if len(node.args) == 2 else None
            named = (
                {n.id for n in ast.walk(classes) if isinstance(n, ast.Name)} if classes else set()
            )
            if named & PIPELINE_CLASSES and relative not in MAY_ASK_THE_KIND:
                asking.append(f"{relative}:{node.lineno}")
    assert not asking, f"isinstance on a pipeline's kind outside {MAY_ASK_THE_KIND}: {asking}"


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
