"""A unit pipeline (``watermark.kind: unit``, seed 003): one Dagster partition per unit id; with
``watermark.time``, a time x unit grid."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from watermark_assets.config.base import Model as _Model
from watermark_assets.config.column import _time_merge_keys
from watermark_assets.config.shared import (
    BackfillConfig,
    ColumnTableConfig,
    PipelineModel,
)
from watermark_assets.config.sources import (
    ColumnSourceConfig,
    HttpApiSourceConfig,
    JdbcSourceConfig,
    SecondaryInputConfig,
)
from watermark_assets.config.time import TimeWatermarkConfig
from watermark_assets.core.unit import parse_units
from watermark_assets.exceptions import ConfigError

#: The placeholder of an ``http_api`` source's URL that a unit run replaces with the unit's id.
UNIT_PLACEHOLDER = "{unit}"


class UnitWatermarkConfig(_Model):
    """A unit watermark: one Dagster partition per unit id, each with its own
    watermark (when its last run committed). The ids are explicit (``units``: static
    partitions) or read from a ``secondary_input`` (dynamic partitions, added by a sensor)."""

    kind: Literal["unit"]
    column: str = Field(
        min_length=1,
        description="The source's column holding the unit id (a string column): a unit's run "
        "reads the rows where it equals the id and replaces exactly those rows in the table.",
    )
    units: str | None = Field(
        default=None,
        description="Explicit ids, comma-separated, e.g. 'id1,id2,id3' (static partitions). "
        "An id that cannot be a partition key, a txn app id or a path segment is refused, by "
        "the same rule as a secondary input's values: spaces around a comma belong to the id "
        "and are refused, never trimmed ('id1, id2' is refused; write 'id1,id2').",
    )
    secondary_input: SecondaryInputConfig | None = Field(
        default=None,
        description="Where the ids are listed: {type: file, path, fields} | {type: delta_table, "
        "uri, fields} | {type: postgres, conninfo, table|query, fields}. Dynamic partitions; a "
        "sensor adds new ids, never removes one.",
    )
    unit_param: str | None = Field(
        default=None,
        description="http_api sources: the request parameter carrying the unit's id (or put "
        "'{unit}' in source.url).",
    )
    time: TimeWatermarkConfig | None = Field(
        default=None,
        description="Time x unit: a time watermark per unit ({column, from, to, partition, "
        "grace_days, abstinent_days, partial_partition}, as for kind: time). Each (window, unit) "
        "cell is a partition of a two-dimensional (multi) partitioning with its own high "
        "watermark, read with unit = id AND start <= time < end and replaced in ONE commit.",
    )

    @field_validator("units")
    @classmethod
    def _valid_units(cls, value: str | None) -> str | None:
        if value is not None:
            parse_units(value, source="watermark.units")  # UnitIdError names the id and its row
        return value

    @model_validator(mode="after")
    def _one_listing(self) -> UnitWatermarkConfig:
        if (self.units is None) == (self.secondary_input is None):
            raise ValueError(
                "watermark: give exactly one of units (explicit ids, 'id1,id2,id3': static "
                "partitions) and secondary_input (a file or table listing them: dynamic "
                f"partitions); got {'both' if self.units is not None else 'neither'}"
            )
        return self

    @model_validator(mode="after")
    def _time_fits_a_grid(self) -> UnitWatermarkConfig:
        if self.time is None:
            return self
        if self.time.partition == "none":
            raise ValueError(
                "watermark.time.partition 'none' is refused for time x unit: a grid needs "
                "windows (the time dimension of the partitions); use monthly, weekly, daily or "
                "hourly, or remove watermark.time for a unit pipeline (one partition per id)"
            )
        if self.time.column == self.column:
            raise ValueError(
                f"watermark.time.column {self.time.column!r} is the unit column too; give the "
                "source's time column (a timestamp), e.g. answered_at"
            )
        return self

    @property
    def explicit_units(self) -> tuple[str, ...] | None:
        """The explicit ids, in order, each once; None with a secondary input."""
        return None if self.units is None else parse_units(self.units, source="watermark.units")


class UnitSensorConfig(_Model):
    """How often the sensor of a unit pipeline with a secondary input reads the input."""

    minimum_interval_seconds: int = Field(default=60, ge=1)
    max_runs_per_tick: int = Field(
        default=100,
        ge=1,
        description="Runs one tick requests at most; the rest is requested by later ticks, in "
        "order. Unit pipelines: new ids are added as partitions at once, one run each. Time x "
        "unit: one run per unit and range of due windows.",
    )
    running_by_default: bool = Field(
        default=False, description="Start the sensor as soon as the daemon runs."
    )


class UnitPipelineConfig(PipelineModel):
    """A unit pipeline: one Dagster partition per unit id; a unit's run reads the
    source's rows of that unit (``column = id``, pushed down) and replaces exactly those rows
    in the table in ONE Delta commit, with the unit's watermark (when it was done)."""

    name: str = Field(description="Pipeline name: lower case, digits, '_'.")
    description: str | None = Field(default=None, description="Shown on the asset in the UI.")
    source: ColumnSourceConfig
    watermark: UnitWatermarkConfig
    table: ColumnTableConfig
    sensor: UnitSensorConfig = Field(default_factory=UnitSensorConfig)
    backfill: BackfillConfig = Field(
        default_factory=lambda: BackfillConfig(max_partitions_per_run=1),
        description="max_partitions_per_run: units per run of a backfill (default 1: one run "
        "per unit); null: one run for the whole backfill, units in order.",
    )

    @model_validator(mode="after")
    def _fits_the_source(self) -> UnitPipelineConfig:
        if self.table.merge_keys and self.watermark.time is None:
            raise ValueError(
                "table.merge_keys: a unit's run replaces the unit's rows (column = id) in one "
                "commit; remove merge_keys (they are for time x unit pipelines: watermark.time)"
            )
        if self.watermark.time is not None:
            _time_merge_keys(self.table, self.watermark.time.column)
        http = isinstance(self.source, HttpApiSourceConfig)
        if self.watermark.unit_param is not None and not http:
            raise ValueError(
                f"watermark.unit_param is for http_api sources, not {self.source.type!r}: the "
                "other sources filter on watermark.column; remove it"
            )
        if isinstance(self.source, JdbcSourceConfig) and self.source.num_partitions > 1:
            raise ValueError(
                "source.num_partitions: a unit's rows are read with one connection (the unit "
                "column is text); set num_partitions: 1"
            )
        in_url = isinstance(self.source, HttpApiSourceConfig) and (
            UNIT_PLACEHOLDER in self.source.url
        )
        if in_url and self.watermark.unit_param:
            raise ValueError(
                f"source.url holds {UNIT_PLACEHOLDER} and watermark.unit_param is set; give one "
                "way of sending the unit's id"
            )
        # The source checks its settings against the column a run reads (the unit column, or
        # a time x unit pipeline's time column), as its builder does.
        time = self.watermark.time
        columns = [self.watermark.column] if time is None else time.columns
        try:
            self.source.check_watermark(self.name, columns)
        except ConfigError as error:
            raise ValueError(str(error)) from error
        return self

    @property
    def dataflow_id(self) -> str:
        """The key of the unit watermark in the commits: the pipeline name."""
        return self.name

    @property
    def is_time_by_unit(self) -> bool:
        """A time x unit pipeline (``watermark.time`` set): multi-partitions (window, unit)."""
        return self.watermark.time is not None

    @property
    def cells_per_backfill_run(self) -> int | None:
        """Time x unit: the cells of a backfill run (None: one run per range of one unit's
        windows, Dagster's single-run policy), unless ``backfill`` is written."""
        if "backfill" not in self.model_fields_set:
            return None
        return self.backfill.max_partitions_per_run
