"""The kinds of pipeline, one registry keyed by ``watermark.kind`` (docs/design.md, "One pipeline
model").

A first piece of the move's step 6: what a command needs of a kind is one :class:`PipelineKind`
here, and the CLI iterates :data:`KINDS` instead of asking the configuration for each kind's list,
so a command covers every kind (adding a kind adds one line to :data:`KINDS`). The contract will
grow (partitions, automation, plan) as the kinds move into their folders.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from watermark_assets.config import (
    ColumnPipelineConfig,
    EventTimePipelineConfig,
    FilePipelineConfig,
    ProjectConfig,
    TimePipelineConfig,
    UnitPipelineConfig,
)
from watermark_assets.kinds import report
from watermark_assets.kinds.report import PartitionedRow, SummaryRow

P = TypeVar("P")

#: A summary row: file-path pipelines have their own table, every other kind shares one.
Row = SummaryRow | PartitionedRow


@dataclass(frozen=True)
class PipelineKind(Generic[P]):
    """What the commands need of one kind of pipeline."""

    #: the value of ``watermark.kind``, the registry key
    name: str
    #: the pipeline's configuration model
    config_model: type[P]
    #: the project's pipelines of this kind, in the configuration's order
    pipelines: Callable[[ProjectConfig], Sequence[P]]
    #: its row of ``summary`` (and the first line of ``explain`` for a kind without files)
    summarize: Callable[[ProjectConfig, P], Row]

    def explain(self, config: ProjectConfig, pipeline: P) -> str:
        """The line ``explain PIPELINE`` starts with: the pipeline's summary row in words."""
        row = self.summarize(config, pipeline)
        if isinstance(row, SummaryRow):
            return (
                f"{row.pipeline} ({self.name}): {row.partitions} partitions, {row.files} files, "
                f"{row.rows} rows, watermark {row.watermark}, state {row.state}, "
                f"Delta version {row.delta_version}"
            )
        return (
            f"{row.pipeline} ({row.kind}): partitions {row.partitions}, {row.rows} rows, watermark "
            f"{row.watermark}, cut-off {row.cut_off}, Delta version {row.delta_version}"
        )


def _unit_row(config: ProjectConfig, pipeline: UnitPipelineConfig) -> PartitionedRow:
    """A unit pipeline's row; a time x unit one (a unit kind with a time) shows its grid."""
    if pipeline.is_time_by_unit:
        return report.summarize_grid(pipeline)
    return report.summarize_unit(pipeline)


FILE_PATH = PipelineKind[FilePipelineConfig](
    "file_path",
    FilePipelineConfig,
    lambda config: config.file_pipelines,
    lambda config, pipeline: report.summarize(pipeline),
)
TIME = PipelineKind[TimePipelineConfig](
    "time",
    TimePipelineConfig,
    lambda config: config.time_pipelines,
    lambda config, pipeline: report.summarize_time(pipeline),
)
UNIT = PipelineKind[UnitPipelineConfig](
    "unit", UnitPipelineConfig, lambda config: config.unit_pipelines, _unit_row
)
EVENT_TIME = PipelineKind[EventTimePipelineConfig](
    "event_time",
    EventTimePipelineConfig,
    lambda config: config.event_time_pipelines,
    report.summarize_event_time,
)
COLUMN = PipelineKind[ColumnPipelineConfig](
    "column",
    ColumnPipelineConfig,
    lambda config: config.column_pipelines,
    lambda config, pipeline: report.summarize_column(pipeline),
)

#: ``watermark.kind`` -> its kind, in the order ``summary`` prints them.
KINDS: Mapping[str, PipelineKind[Any]] = {
    kind.name: kind for kind in (FILE_PATH, TIME, UNIT, EVENT_TIME, COLUMN)
}


def summary_rows(config: ProjectConfig) -> tuple[list[SummaryRow], list[PartitionedRow]]:
    """Every pipeline's summary row, kind by kind: the file-path table's, then the others'."""
    files: list[SummaryRow] = []
    others: list[PartitionedRow] = []
    for kind in KINDS.values():
        for pipeline in kind.pipelines(config):
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
