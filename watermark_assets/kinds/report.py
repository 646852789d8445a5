"""What every kind's row of ``watermark-assets summary`` shares: the rows, their columns, the
schema cell.

File-path pipelines have a table of their own (:class:`SummaryRow`, :data:`SUMMARY_HEADERS`);
every other kind shares one (:class:`PartitionedRow`, :data:`PARTITIONED_HEADERS`). Each kind
fills its row in its own module (``kinds/file_path/kind.summarize``, ``kinds/time/kind.summarize``,
..., its ``PipelineKind.summarize``); ``cli.py`` prints the rows (:meth:`SummaryRow.cells`,
:meth:`PartitionedRow.cells`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from watermark_assets.delta.schema_summary import SchemaSummary, TableFacts
from watermark_assets.delta.schema_summary import table_facts as facts_of


@dataclass(frozen=True)
class SummaryRow:
    pipeline: str
    partitions: int
    files: int
    rows: int
    quarantined: int
    watermark: str
    state: str
    delta_version: str
    #: what is wrong with the pipeline (its landing folder does not exist), else None
    problem: str | None = None
    #: its schema: mode, columns, last evolution (``schema`` column, ``explain``'s schema line)
    schema: SchemaSummary | None = None

    def cells(self) -> list[str]:
        return [
            self.pipeline,
            str(self.partitions),
            str(self.files),
            str(self.rows),
            str(self.quarantined),
            self.watermark,
            self.state,
            self.delta_version,
            schema_cell(self.schema),
        ]


#: The columns of the file pipelines' summary (the docs' sample outputs are checked against them).
SUMMARY_HEADERS = (
    "pipeline",
    "partitions",
    "files",
    "rows",
    "quarantined",
    "watermark",
    "state",
    "delta version",
    "schema",
)


@dataclass(frozen=True)
class PartitionedRow:
    """One summary row of a time or unit pipeline, read from its table's Delta log."""

    pipeline: str
    kind: str
    #: partitions with a committed run / all partitions (a dynamic unit list: the ones done)
    partitions: str
    rows: int
    #: time: the highest high watermark; unit: the latest done-at
    watermark: str
    #: time: the effective cut-off and how it was computed; unit: "-"
    cut_off: str
    delta_version: str
    #: its schema: mode, columns, last evolution (``schema`` column, ``explain``'s schema line)
    schema: SchemaSummary | None = None

    def cells(self) -> list[str]:
        return [
            self.pipeline,
            self.kind,
            self.partitions,
            str(self.rows),
            self.watermark,
            self.cut_off,
            self.delta_version,
            schema_cell(self.schema),
        ]


PARTITIONED_HEADERS = (
    "pipeline",
    "kind",
    "partitions done",
    "rows",
    "high watermark / done at",
    "cut-off",
    "delta version",
    "schema",
)


def table_facts(pipeline: Any, uri: str | None = None) -> TableFacts:
    """Any kind's pipeline's table (``uri``, else ``table.uri``) as a summary row says it: its
    rows, version and schema, from ONE snapshot load."""
    return facts_of(uri or pipeline.table.uri, pipeline.schema_policy.mode.value)


def version_cell(version: int | None) -> str:
    """The ``delta version`` column of a summary row: the table's version, ``-`` with no table
    (None, or the -1 a watermark log read before the table's first commit says)."""
    return "-" if version is None or version < 0 else str(version)


def schema_cell(schema: SchemaSummary | None) -> str:
    """The ``schema`` column of a summary row (``-``: not known)."""
    return "-" if schema is None else schema.cell()
