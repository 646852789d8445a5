"""The user docs (README.md and docs/*.md but the maintainers' docs/design.md) against the code.

Conventions the docs follow, each enforced here:

- Every ```yaml block is checked against the configuration models
  (:func:`~watermark_assets.config.parse_config`): a component's ``defs.yaml`` (``type:
  watermark_assets.WatermarkPipelines``) by its ``attributes``; a whole configuration
  (``pipelines:``); a list of pipelines (``- name: ...``, wrapped in ``pipelines:``); project
  keys alone (``spark:``, ``storage:``), beside the README's first pipeline. A block of a
  pipeline's keys (``source:``, ``watermark:``, ...) says which pipeline it belongs to in an HTML
  comment right before its fence, ``<!-- yaml: keys of PAGE#NAME -->``: its keys replace that
  pipeline's; a pipeline that reads another one (an event-time source) names it the same way,
  ``<!-- yaml: with PAGE#NAME -->`` (both: ``keys of PAGE#NAME with PAGE#NAME``). YAML with a
  key twice is refused (a reader would see one).
- Every ```json block parses.
- Every fence without a language is a sample output, preceded by ``<!-- output: checked -->``
  (this file reproduces it) or ``<!-- output: illustrative -->`` (from one run; the header of a
  summary table in it is still the code's). Diagrams and listings are fenced ```text.
- Every relative link resolves: the file, and the heading its ``#anchor`` names.
- No word of the project's internal history ("seed", "issue").
- "Your first pipeline" in README.md works as written (run in a temporary folder).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from watermark_assets.cli import PARTITIONED_HEADERS, SUMMARY_HEADERS
from watermark_assets.component import TYPE_NAME
from watermark_assets.config import (
    BackfillConfig,
    CheckpointConfig,
    ColdStartConfig,
    FilePathWatermarkConfig,
    FilePipelineConfig,
    LandingFilesSourceConfig,
    PartitionsConfig,
    ProjectConfig,
    SensorConfig,
    SparkConfig,
    SweepConfig,
    TableConfig,
    parse_config,
)
from watermark_assets.config.storage import StorageConfig

REPO_ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
USER_DOCS = [
    REPO_ROOT / "README.md",
    *(p for p in sorted((REPO_ROOT / "docs").glob("*.md")) if p.name != "design.md"),
]
PROJECT_KEYS = {"spark", "storage"}
MARKER = re.compile(r"<!--\s*(yaml|output):\s*(.*?)\s*-->")


@dataclass(frozen=True)
class Block:
    """A fenced block of a page: its language, text, line and the marker comment before it."""

    page: Path
    line: int
    language: str
    text: str
    marker: tuple[str, str] | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO_ROOT)}:{self.line}"


def blocks(page: Path) -> Iterator[Block]:
    """The fenced blocks of ``page`` (fences may be indented, as in a list item)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = re.match(r"^(\s*)```(\S*)\s*$", lines[index])
        if opening is None:
            index += 1
            continue
        indent, language = opening.groups()
        end = index + 1
        while lines[end].strip() != "```":
            end += 1
        body = [
            line[len(indent) :] if line.startswith(indent) else line
            for line in lines[index + 1 : end]
        ]
        before = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        found = MARKER.search(before)
        yield Block(
            page=page,
            line=index + 1,
            language=language,
            text="\n".join(body) + "\n",
            marker=None if found is None else (found.group(1), found.group(2)),
        )
        index = end + 1


ALL_BLOCKS = [b for page in USER_DOCS for b in blocks(page)]


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML whose mappings may not repeat a key."""


def _mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    keys = [loader.construct_object(k, deep=deep) for k, _ in node.value]
    twice = sorted({str(k) for k in keys if keys.count(k) > 1})
    if twice:
        raise AssertionError(f"key(s) {twice} written twice at line {node.start_mark.line + 1}")
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader


def validate(raw: dict[str, Any], where: str) -> ProjectConfig:
    """``raw`` as a configuration file, through the models every configuration goes through;
    a ``${VAR}`` without a default is set (to ``example``), as a user would."""
    text = yaml.safe_dump(raw)
    env = {name: "example" for name in re.findall(r"\$\{(\w+)\}", text)}
    return parse_config(text, env=env, base=REPO_ROOT, origin=where)


def pipeline_named(reference: str) -> dict[str, Any]:
    """The pipeline ``PAGE#NAME`` as a block of the docs declares it."""
    page, _, name = reference.partition("#")
    for block in ALL_BLOCKS:
        if block.language != "yaml" or block.page != REPO_ROOT / page:
            continue
        raw = load_yaml(block.text)
        if isinstance(raw, dict) and raw.get("type") == TYPE_NAME:
            raw = raw["attributes"]
        found = raw if isinstance(raw, list) else (raw or {}).get("pipelines", [])
        for pipeline in found:
            if isinstance(pipeline, dict) and pipeline.get("name") == name:
                return dict(pipeline)
    raise AssertionError(f"no YAML block of {page} declares the pipeline {name!r}")


def references(text: str) -> list[str]:
    return [r.strip() for r in text.split(",") if r.strip()]


def first_pipeline() -> dict[str, Any]:
    return pipeline_named("README.md#events")


def check_yaml(block: Block) -> ProjectConfig:
    """Validate one ```yaml block by the file's conventions."""
    raw = load_yaml(block.text)
    kind, argument = block.marker or ("", "")
    assert raw is not None, "an empty block"
    if kind == "yaml" and argument.startswith("keys of "):
        assert isinstance(raw, dict), "a pipeline's keys are a mapping"
        named, _, upstream = argument.removeprefix("keys of ").partition(" with ")
        others = [pipeline_named(r) for r in references(upstream)] if upstream else []
        pipeline = pipeline_named(named.strip()) | raw
        return validate({"pipelines": [*others, pipeline]}, block.where)
    assert block.marker is None or argument.startswith("with "), f"unknown marker {block.marker}"
    if isinstance(raw, dict) and raw.get("type") == TYPE_NAME:
        return validate(raw["attributes"], block.where)
    if isinstance(raw, list):
        raw = {"pipelines": raw}
    assert isinstance(raw, dict), f"not a mapping nor a list of pipelines: {raw!r}"
    if "pipelines" not in raw:
        unmarked = sorted(set(raw) - PROJECT_KEYS)
        assert not unmarked, (
            f"keys {unmarked} of a pipeline: say which one before the fence, "
            "<!-- yaml: keys of PAGE#NAME -->"
        )
        raw = {**raw, "pipelines": [first_pipeline()]}
    if argument.startswith("with "):
        others = [pipeline_named(r) for r in references(argument.removeprefix("with "))]
        raw = {**raw, "pipelines": [*others, *raw["pipelines"]]}
    return validate(raw, block.where)


YAML_BLOCKS = [b for b in ALL_BLOCKS if b.language == "yaml"]


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=[b.where for b in YAML_BLOCKS])
def test_every_yaml_block_is_a_valid_configuration(block: Block) -> None:
    check_yaml(block)


def test_the_yaml_blocks_are_found_and_none_is_tagged_otherwise() -> None:
    """Each page's configuration blocks are fenced ```yaml (so the test above sees them)."""
    assert len(YAML_BLOCKS) >= 15
    tags = {b.language for b in ALL_BLOCKS}
    assert tags <= {"yaml", "json", "bash", "sh", "python", "text", ""}, tags
    for block in ALL_BLOCKS:
        if block.language in ("", "text", "bash", "sh"):
            assert not re.match(r"^(pipelines|spark|storage|source|watermark):", block.text), (
                f"{block.where}: a configuration fenced as {block.language!r}: fence it ```yaml"
            )


@pytest.mark.parametrize(
    "block",
    [b for b in ALL_BLOCKS if b.language == "json"],
    ids=lambda b: b.where,
)
def test_every_json_block_parses(block: Block) -> None:
    json.loads(block.text)


OUTPUT_BLOCKS = [b for b in ALL_BLOCKS if b.language == ""]


@pytest.mark.parametrize("block", OUTPUT_BLOCKS, ids=[b.where for b in OUTPUT_BLOCKS])
def test_every_sample_output_is_checked_or_marked_illustrative(block: Block) -> None:
    """A sample output says whether this file reproduces it; the header of a summary table
    in it is the code's either way."""
    assert block.marker in (("output", "checked"), ("output", "illustrative")), (
        f"{block.where}: a fence without a language is a sample output: precede it with "
        "<!-- output: checked --> or <!-- output: illustrative --> (or fence it ```text)"
    )
    for number, line in enumerate(block.text.splitlines()):
        words = re.split(r"\s{2,}", line.strip())
        if words[0] == "pipeline" and len(words) > 3:
            assert tuple(words) in (tuple(SUMMARY_HEADERS), PARTITIONED_HEADERS), (
                f"{block.where}: the summary's header is not the code's: {words}"
            )
            rule = block.text.splitlines()[number + 1]
            widths = [len(w) for w in rule.split()]
            assert all(set(w) == {"-"} for w in rule.split()) and len(widths) == len(words)


def test_the_checked_outputs_are_the_ones_this_file_reproduces() -> None:
    checked = [b.where for b in OUTPUT_BLOCKS if b.marker == ("output", "checked")]
    assert checked == [first_pipeline_blocks().summary.where]


# --- links ---


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
        heading = None if fenced else re.match(r"^#{1,6}\s+(.*)$", line)
        if heading is None:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> Iterator[str]:
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code is not a link
    yield from re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("page", USER_DOCS, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading with that anchor in {resolved.name}")
    assert not broken, broken


def test_every_page_is_in_the_readmes_table_of_contents() -> None:
    readme_links = {t.partition("#")[0] for t in links(REPO_ROOT / "README.md")}
    pages = {f"docs/{p.name}" for p in (REPO_ROOT / "docs").glob("*.md")}
    assert pages - readme_links == set()


@pytest.mark.parametrize(
    "page",
    [*USER_DOCS, REPO_ROOT / "benchmarks" / "README.md"],
    ids=lambda p: str(p.relative_to(REPO_ROOT)),
)
def test_user_docs_speak_of_the_product_not_of_its_history(page: Path) -> None:
    text = re.sub(r"https?://\S+", "", page.read_text(encoding="utf-8"))  # others' trackers
    found = re.findall(r"[^\n]*\b(?:seeds?|issues?)\b[^\n]*", text, flags=re.I)
    assert not found, found


# --- your first pipeline ---


@dataclass(frozen=True)
class FirstPipeline:
    landing: Block
    config: Block
    dagster: Block
    first_run: Block
    summary: Block


def first_pipeline_blocks() -> FirstPipeline:
    readme = REPO_ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    start = text.index("## Your first pipeline")
    end = text.index("\n## ", start + 1)
    first, last = text[:start].count("\n") + 1, text[:end].count("\n") + 1
    found = [b for b in blocks(readme) if first <= b.line <= last]
    assert [b.language for b in found] == ["bash", "yaml", "bash", "bash", ""], found
    return FirstPipeline(*found)


DAGSTER_DEV = "dagster dev -m watermark_assets.definitions"


def walk_through(folder: Path, *, first_run: bool) -> subprocess.CompletedProcess[str]:
    """README's steps in ``folder``, as a user types them; ``dagster dev`` (a server) is
    replaced by ``dagster definitions validate``, which loads the same code location."""
    steps = first_pipeline_blocks()
    (folder / "pipelines.yaml").write_text(steps.config.text, encoding="utf-8")
    assert DAGSTER_DEV in steps.dagster.text
    script = steps.landing.text + steps.dagster.text.replace(
        DAGSTER_DEV, "dagster definitions validate -m watermark_assets.definitions"
    )
    if first_run:
        script += steps.first_run.text
    unset = ("WATERMARK_ASSETS_CONFIG", "WATERMARK_ASSETS_DATA", "DAGSTER_HOME")
    env = {name: value for name, value in os.environ.items() if name not in unset}
    env.update(
        PYTHONPATH=str(REPO_ROOT),  # this checkout's package, whatever the install points at
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        DAGSTER_DISABLE_TELEMETRY="1",
    )
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_first_pipeline_loads_as_the_readme_writes_it(tmp_path: Path) -> None:
    done = walk_through(tmp_path, first_run=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Validation successful" in done.stderr + done.stdout
    assert (tmp_path / ".dagster_home").is_dir()
    config = check_yaml(first_pipeline_blocks().config)
    assert [p.name for p in config.pipelines] == ["events"]


@pytest.mark.spark
def test_the_first_pipelines_first_run_prints_the_readmes_summary(tmp_path: Path) -> None:
    done = walk_through(tmp_path, first_run=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("pipeline  "))
    assert "\n".join(lines[start:]) + "\n" == first_pipeline_blocks().summary.text


# --- the configuration reference ---

REFERENCE_BLOCKS = {
    "": ProjectConfig,
    "spark": SparkConfig,
    "storage": StorageConfig,
    "pipelines.0": FilePipelineConfig,
    "pipelines.0.source": LandingFilesSourceConfig,
    "pipelines.0.watermark": FilePathWatermarkConfig,
    "pipelines.0.watermark.cold_start": ColdStartConfig,
    "pipelines.0.watermark.sweep": SweepConfig,
    "pipelines.0.table": TableConfig,
    "pipelines.0.partitions": PartitionsConfig,
    "pipelines.0.checkpoint": CheckpointConfig,
    "pipelines.0.sensor": SensorConfig,
    "pipelines.0.backfill": BackfillConfig,
}


def test_the_configuration_reference_writes_every_key_of_a_file_pipeline() -> None:
    """docs/configuration.md's blocks, together, hold every key of the project and of a file
    pipeline: a key added to the models without a line in the reference fails here."""
    written: dict[str, Any] = {}
    for block in ALL_BLOCKS:
        if block.page.name == "configuration.md" and block.language == "yaml":
            written |= load_yaml(block.text)
    missing = []
    for path, model in REFERENCE_BLOCKS.items():
        value: Any = written
        for part in filter(None, path.split(".")):
            value = value[int(part)] if isinstance(value, list) else value[part]
        keys = set(value)
        if model is StorageConfig:  # the project's settings and a location's, each key once
            keys |= {key for location in value["locations"].values() for key in location}
        for name, field in model.model_fields.items():
            if (field.alias or name) not in keys:
                missing.append(f"{path or '(top)'}: {field.alias or name}")
    assert not missing, missing


def test_the_components_schema_speaks_of_the_product_not_of_its_history() -> None:
    """The models' descriptions are documentation too: ``dg`` shows them for ``defs.yaml``."""
    from watermark_assets.component import PipelinesAttributes

    schema = json.dumps(PipelinesAttributes.model_json_schema())
    found = re.findall(r"[^.\"]{0,60}\b(?:[Ss]eeds?|[Ii]ssues?)\b[^.\"]{0,40}", schema)
    assert not found, found


def test_every_make_target_the_docs_name_exists() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, flags=re.M))
    named = {
        (page.name, target)
        for page in USER_DOCS
        for target in re.findall(r"\bmake ([a-z][\w-]*)", page.read_text(encoding="utf-8"))
    }
    assert {n for n in named if n[1] not in targets} == set()


def test_every_command_the_docs_name_exists(capsys: pytest.CaptureFixture[str]) -> None:
    from watermark_assets.cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    usage = capsys.readouterr().out
    commands = set(re.search(r"\{([\w,-]+)\}", usage).group(1).split(","))  # type: ignore[union-attr]
    named = {
        (page.name, command)
        for page in USER_DOCS
        for command in re.findall(r"\bwatermark-assets ([a-z][\w-]*)", page.read_text("utf-8"))
    }
    assert {n for n in named if n[1] not in commands} == set()
