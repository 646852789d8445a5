"""The kinds of pipeline, one registry keyed by ``watermark.kind`` (docs/design.md, "One pipeline
model").

What a command needs of a kind is one :class:`~watermark_assets.kinds.contract.PipelineKind`,
filled in by the kind's ``kind.py`` in its folder (``kinds/file_path/``, ``kinds/column/``, ...:
everything of one kind, its planners, runs and Dagster objects). The CLI, ``defs/build.py`` and
``defs/run_worker.py`` iterate :data:`KINDS` and never name a kind, so a command covers every
kind; adding a kind adds its folder and one line here (``tests/test_layers.py``: no module outside
a kind's folder imports it, no kind's folder imports another's). What the kinds share is here
too: ``contract.py``, ``headless.py`` (the demo's headless ticks), ``report.py`` (summary rows).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from watermark_assets.config import ProjectConfig
from watermark_assets.exceptions import ConfigError
from watermark_assets.kinds.column.kind import KIND as COLUMN
from watermark_assets.kinds.contract import PipelineKind, Row
from watermark_assets.kinds.event_time.kind import KIND as EVENT_TIME
from watermark_assets.kinds.file_path.kind import KIND as FILE_PATH
from watermark_assets.kinds.report import PartitionedRow, SummaryRow
from watermark_assets.kinds.time.kind import KIND as TIME
from watermark_assets.kinds.unit.kind import KIND as UNIT

__all__ = ["KINDS", "PipelineKind", "Row", "kind_for", "kind_of", "pipelines", "summary_rows"]

#: ``watermark.kind`` -> its kind, in the order ``summary`` prints them.
#: (Each kind's value is imported under its own name, never the name of its folder: binding
#: ``kinds.file_path`` to a module would hide the package ``kinds/file_path/``.)
KINDS: Mapping[str, PipelineKind[Any]] = {
    FILE_PATH.name: FILE_PATH,
    TIME.name: TIME,
    UNIT.name: UNIT,
    EVENT_TIME.name: EVENT_TIME,
    COLUMN.name: COLUMN,
}


def pipelines(config: ProjectConfig) -> Iterator[tuple[PipelineKind[Any], Any]]:
    """Every pipeline with its kind, kind by kind in :data:`KINDS`' order."""
    for kind in KINDS.values():
        for pipeline in kind.pipelines(config):
            yield kind, pipeline


def summary_rows(config: ProjectConfig) -> tuple[list[SummaryRow], list[PartitionedRow]]:
    """Every pipeline's summary row, kind by kind: the file-path table's, then the others'."""
    files: list[SummaryRow] = []
    others: list[PartitionedRow] = []
    for kind, pipeline in pipelines(config):
        row = kind.summarize(config, pipeline)
        if isinstance(row, SummaryRow):
            files.append(row)
        else:
            others.append(row)
    return files, others


def kind_of(config: ProjectConfig, name: str) -> tuple[PipelineKind[Any], Any]:
    """The kind of the pipeline ``name`` and its configuration (ConfigError: no such pipeline)."""
    pipeline = config.pipeline(name)  # an unknown name: ConfigError listing the known ones
    return KINDS[pipeline.watermark.kind], pipeline


def kind_for(config: ProjectConfig, name: str, hook: str) -> tuple[PipelineKind[Any], Any]:
    """:func:`kind_of` for a command that needs the kind's ``hook`` (``replay``,
    ``explain_files``): ConfigError naming the kinds that have it and their pipelines when the
    pipeline's kind has not."""
    kind, pipeline = kind_of(config, name)
    if getattr(kind, hook) is not None:
        return kind, pipeline
    able = [k for k in KINDS.values() if getattr(k, hook) is not None]
    names = [p.name for k in able for p in k.pipelines(config)]
    which = " or ".join(repr(k.name) for k in able)
    raise ConfigError(
        f"pipeline {name!r} has a {kind.name!r} watermark; this command works on "
        f"pipelines whose watermark.kind is {which}: {names}",
        pipeline=name,
        key="watermark.kind",
        value=kind.name,
    )
