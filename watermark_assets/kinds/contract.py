"""What a command needs of one kind of pipeline: :class:`PipelineKind` (docs/design.md, "One
pipeline model").

``defs/build.py`` builds every pipeline's Dagster objects through :attr:`PipelineKind.dagster_defs`;
every command of the CLI (``summary``, ``explain``, ``plan``, ``run-sensors``, ``demo``,
``replay``, ``repair-state``) and ``defs/run_worker.py`` go through this contract and the registry
(``kinds/__init__.py``); each kind fills it in its own module (``kinds/file_path/kind.py``,
``kinds/column/kind.py``, ...), and only there is the kind's configuration read for what it is.
A hook a kind does not have is ``None``: the command says so, naming the kinds that have it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from watermark_assets.kinds.report import PartitionedRow, SummaryRow

if TYPE_CHECKING:
    from datetime import datetime

    from watermark_assets.config import ProjectConfig
    from watermark_assets.core.clock import Clock
    from watermark_assets.core.partition_selection import PartitionSelection
    from watermark_assets.defs.pipeline_defs import PipelineDefs
    from watermark_assets.engine.plan import PlannedRun
    from watermark_assets.kinds.headless import FailedRun, Headless

P = TypeVar("P")

#: A summary row: file-path pipelines have their own table, every other kind shares one.
Row = SummaryRow | PartitionedRow


@dataclass(frozen=True)
class StateLogEntry:
    """One state a pipeline keeps as commitInfo entries (``state.snapshot.StateLog``)."""

    #: what it is, in words ("time watermark", "column watermark", ...)
    what: str
    #: the log: ``provenance()`` for ``explain``, ``repair(replace)`` and ``version``
    log: Any
    #: what ``repair-state`` puts in from the table itself (None: nothing)
    replace: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class DemoOutcome:
    """What one kind's step of ``demo`` leaves: failed runs, and lines printed after the
    summary tables (the column pipelines' two steps)."""

    failures: list[FailedRun]
    closing_lines: list[str]


@dataclass(frozen=True)
class DemoStep(Generic[P]):
    """One kind's part of a phase of ``demo`` (``generate-demo-data`` or the runs after
    ``run-sensors``' pass). Steps run by ``order`` (the demo's output order, which is not the
    registry's); ``heading`` is printed once before the steps sharing it, when one of them has
    pipelines or is ``always`` shown; steps sharing a heading share one :class:`Headless` (one
    build of the definitions)."""

    order: int
    run: Callable[[Headless, Sequence[P]], DemoOutcome]
    heading: str | None = None
    always: bool = False


def named_partitions(pipeline: str, selection: PartitionSelection | None) -> PartitionSelection:
    """``selection``, for a kind whose plan is per partition: ConfigError with the fix when no
    partition was named."""
    if selection is None:
        from watermark_assets.exceptions import ConfigError

        raise ConfigError(
            f"pipeline {pipeline!r} has partitions and a run reads each one's own rows: name "
            "the partitions to plan with --partition KEY (repeatable; the keys the UI lists)",
            pipeline=pipeline,
        )
    return selection


def _no_lines(config: ProjectConfig, pipeline: Any) -> list[Any]:
    return []


def _no_sources(pipeline: Any) -> Sequence[str]:
    return ()


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
    #: its Dagster objects (asset, checks, job, sensor or schedule) and the asset's freshness
    #: policy and column schema; ``defs/build.py`` adds what every kind shares (``config``:
    #: the whole file, for a pipeline that reads another one's table)
    dagster_defs: Callable[[P, Clock, ProjectConfig], PipelineDefs]
    #: what a run of the selected partitions (None: none named; the asset has none, or the kind
    #: plans without them) would read and write, planned on the state at ``now`` as the run
    #: plans: watermark, Delta log, listing; no row read, no Spark, nothing written
    plan: Callable[[ProjectConfig, P, PartitionSelection | None, datetime], list[PlannedRun]]
    #: the states its table keeps as commitInfo entries: ``explain``'s state lines and what
    #: ``repair-state`` rebuilds (unless the kind has its own :attr:`repair`)
    state_logs: Callable[[ProjectConfig, P], list[StateLogEntry]] = _no_lines
    #: ``explain``'s lines after the state logs (where else its state lives)
    explain_notes: Callable[[ProjectConfig, P], list[str]] = _no_lines
    #: ``explain PIPELINE [PATH] [--json] [--limit N]`` of a kind reading landing files: the
    #: printed text (None: the summary row and the states' provenance; a PATH is refused)
    explain_files: Callable[[ProjectConfig, P, str | None, bool, int], str] | None = None
    #: ``repair-state``'s own way for this kind, its exit status (None: repair its state logs)
    repair: Callable[[ProjectConfig, P], int] | None = None
    #: ``replay PIPELINE [--start V] [--end V]``, its exit status (None: no replay)
    replay: Callable[[ProjectConfig, P, str | None, str | None], int] | None = None
    #: the source types a pipeline reads through Spark (``run_worker``: the JDBC driver jar)
    source_types: Callable[[P], Sequence[str]] = _no_sources
    #: ``run-sensors`` (and the demo's first pass): its sensors evaluated until they skip and
    #: the runs they request executed (None: the kind has no such pass)
    sensor_pass: Callable[[Headless, Sequence[P]], list[FailedRun]] | None = None
    #: ``generate-demo-data``: the demo's source data of its pipelines
    demo_data: DemoStep[P] | None = None
    #: ``demo`` after the sensor pass: its pipelines' runs, said line by line
    demo_runs: DemoStep[P] | None = None

    def plan_run(
        self, config: ProjectConfig, pipeline: P, keys: Sequence[str], clock: Clock
    ) -> list[PlannedRun]:
        """``plan PIPELINE [--partition KEY]...``: :attr:`plan` of the partitions ``keys`` of the
        pipeline's asset (ConfigError naming a key that is not one of them)."""
        from watermark_assets.defs.partitions import check_partition_keys, selection_of_keys

        with warnings.catch_warnings():  # Dagster's notes on its beta and preview parameters
            warnings.simplefilter("ignore")
            definition = self.dagster_defs(pipeline, clock, config).asset.partitions_def
        name: str = pipeline.name  # type: ignore[attr-defined]
        check_partition_keys(name, definition, keys)
        selection = selection_of_keys(definition, keys) if keys else None
        return self.plan(config, pipeline, selection, clock())

    def explain(self, config: ProjectConfig, pipeline: P) -> str:
        """The line ``explain PIPELINE`` starts with: the pipeline's summary row in words."""
        return self._explained(self.summarize(config, pipeline))

    def _explained(self, row: Row) -> str:
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

    def explain_state(self, config: ProjectConfig, pipeline: P) -> list[str]:
        """``explain PIPELINE`` without landing files: the summary row, then where each of its
        states was read from (``StateStore.describe``: the file, the version it reflects, the
        commits after it, a gap passed over), then :attr:`explain_notes`; the second line is the
        schema's (:class:`~watermark_assets.delta.schema_summary.SchemaSummary`)."""
        row = self.summarize(config, pipeline)
        lines = [self._explained(row)]
        if row.schema is not None:
            lines.append(f"  {row.schema.line()}")
        for entry in self.state_logs(config, pipeline):
            lines.append(f"  {entry.what}: {entry.log.provenance()}")
        return lines + self.explain_notes(config, pipeline)
