"""The shapes every pipeline kind shares, one model each: the Delta table, Dagster's partitions,
the sensor, checkpoints, backfills, ``freshness:`` and ``automation_condition:``, and how a
written instant is read ("an ISO date or datetime, UTC when no zone": said once, here).

A kind that needs other defaults subclasses the shared model and states only what differs
(``event_time.EventTimePartitionsConfig``).

``automation_condition:``: absent (the default), the asset has no automation condition: its
sensor, schedule or a user starts its runs. ``eager`` materializes a partition when an upstream
asset's partition it reads is updated, or when a new partition appears (Dagster's
``AutomationCondition.eager()``: only the latest time window, never while an upstream is missing
or in progress); ``on_missing`` materializes partitions that were never materialized
(``AutomationCondition.on_missing()``); ``{on_cron: "0 6 * * *"}`` after each cron tick once
every upstream has been updated since (``AutomationCondition.on_cron()``). ``defs/automation.py``
builds the condition; Dagster's automation sensor (``default_automation_condition_sensor``)
evaluates it.

``freshness:``: absent (or without ``fail_after``), the policy is derived from the pipeline's
cadence and the time it gives late data (``defs/freshness.py``); ``freshness: {fail_after,
warn_after}`` sets it; ``freshness: false`` gives the asset none.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from enum import Enum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from watermark_assets import names
from watermark_assets.config.base import Model, pipeline_name
from watermark_assets.config.base import Model as _Model
from watermark_assets.config.schema import SchemaPolicy
from watermark_assets.core.column.merge import merge_key_names
from watermark_assets.core.event_time.duration import parse_duration_ms

# --- instants as written ----------------------------------------------------------------------


def yaml_instant_text(value: Any) -> Any:
    """An unquoted YAML date or datetime (which YAML reads as an object) as the ISO text written;
    anything else unchanged."""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    return value


def iso_instant_text(value: Any, name: str = "") -> Any:
    """:func:`yaml_instant_text`, then text that is no instant (e.g. ``2020-02-30``) refused with
    the accepted forms; ``name`` (e.g. ``"partitions.start "``) leads the message."""
    value = yaml_instant_text(value)
    if isinstance(value, str):
        try:
            datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(
                f"{name}{value!r} is not an ISO date or datetime (UTC when no zone); write e.g. "
                "'2024-01-01', '2024-01-01 10:00:00' or '2024-01-01T10:00:00Z'"
            ) from None
    return value


def utc_instant(text: str) -> datetime:
    """The instant an ISO date or datetime names: a naive one is UTC (the one place this rule
    is written; ``partitions.start``/``end`` and the other instants read it here)."""
    moment = datetime.fromisoformat(text.strip())
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


# --- the Delta table, Dagster's partitions, the sensor ----------------------------------------


class Granularity(str, Enum):
    """Size of the Dagster time partitions of a pipeline's asset."""

    HOURLY = "hourly"
    DAILY = "daily"
    WEEKLY = "weekly"
    MONTHLY = "monthly"


class DeltaTableConfig(_Model):
    """The Delta table a pipeline commits to, as every kind writes it (``table:``): its root,
    its partition columns, its quarantine beside it. A kind's table adds its own keys."""

    uri: str = Field(description="Delta table root: a local path or file:// URI.")
    partition_by: list[str] = Field(
        default_factory=list, description="Columns the Delta table is partitioned by."
    )

    @property
    def quarantine(self) -> str:
        """The Delta table of the malformed records: the table URI + ``_quarantine``."""
        return names.quarantine_table(self.uri)


class TableConfig(DeltaTableConfig):
    """The Delta table a file-path pipeline commits to."""

    derived_columns: dict[str, str] = Field(
        default_factory=dict,
        description="Columns computed with Spark SQL expressions, "
        "e.g. {event_date: 'to_date(ts)'}.",
    )
    quarantine_uri: str | None = Field(
        default=None,
        description="Delta table for malformed records. Default: the table URI + '_quarantine'.",
    )

    @property
    def quarantine(self) -> str:
        return self.quarantine_uri or super().quarantine


class PartitionsConfig(_Model):
    """The Dagster time partitions of the pipeline's asset: ``granularity`` from ``start`` up to
    ``end`` (exclusive) or the current period. Every kind's ``partitions:`` block is this model;
    a kind with other defaults subclasses it and states them (``EventTimePartitionsConfig``)."""

    #: whether a refused ``start``/``end`` names its key in the message itself (event time)
    names_key_in_errors: ClassVar[bool] = False

    granularity: Granularity = Field(default=Granularity.DAILY)
    start: str = Field(
        default="2024-01-01",
        description="First partition, ISO date or datetime (UTC). Files before it are "
        "reported, not ingested.",
    )
    end: str | None = Field(
        default=None,
        description="End of the last partition (exclusive), ISO date or datetime (UTC), for a "
        "pipeline over a closed period. Partitions run up to the current (still filling) period "
        "with or without it: an end in the future never hides the current period's files.",
    )

    @field_validator("start", "end", mode="before")
    @classmethod
    def _instant_text(cls, value: Any, info: ValidationInfo) -> Any:
        """An unquoted YAML date or datetime as its ISO text; text that is no instant (e.g.
        ``2020-02-30``) is refused with the accepted forms."""
        named = f"partitions.{info.field_name} " if cls.names_key_in_errors else ""
        return iso_instant_text(value, named)

    @property
    def start_at(self) -> datetime:
        """``start`` as an aware instant (UTC when written without a zone)."""
        return utc_instant(self.start)

    @property
    def end_at(self) -> datetime | None:
        """``end`` as an aware instant (UTC when written without a zone), None without one."""
        return None if self.end is None else utc_instant(self.end)


class CheckpointConfig(_Model):
    """How often the checkpoint file is written (the Delta log stays the truth in between)."""

    interval_files: int = Field(default=100, ge=1, description="Write after this many files.")
    interval_secs: int = Field(default=60, ge=0, description="Or after this many seconds.")


class SensorConfig(_Model):
    """How the pipeline's sensor polls and how much work one tick may request."""

    minimum_interval_seconds: int = Field(default=30, ge=1)
    max_files_per_run: int = Field(default=1000, ge=1)
    max_runs_per_tick: int = Field(default=10, ge=1)
    running_by_default: bool = Field(
        default=False, description="Start the sensor as soon as the daemon runs."
    )


class BackfillConfig(_Model):
    """How a backfill of many partitions is split into runs."""

    max_partitions_per_run: int | None = Field(
        default=None,
        ge=1,
        description="None: a range backfill is one run covering the whole time window (one Spark "
        "job, one Delta commit). A number: runs of at most that many partitions.",
    )


class ColumnTableConfig(DeltaTableConfig):
    """The Delta table a column, time or unit pipeline commits to (malformed CSV/JSON records of
    its source go to its quarantine, as for a file pipeline)."""

    merge_keys: list[str] = Field(
        default_factory=list,
        description="Columns that identify a row, e.g. [id] or [region, id]: each run's rows are "
        "upserted in ONE Delta commit (table rows with the key of a row read are replaced; one "
        "row per key is kept from a run, the greatest watermark). Accepts a look-back or lag; "
        "not together with destination.replace_by_watermark. Time (and time x unit) pipelines: "
        "replacing a window also removes its keys' rows from the other windows in the same "
        "commit, the newest row of a key (by the time column) wins.",
    )

    @field_validator("merge_keys")
    @classmethod
    def _valid_merge_keys(cls, value: list[str]) -> list[str]:
        return list(merge_key_names(value)) if value else value


# --- automation_condition: -----------------------------------------------------------------


class OnCronConfig(Model):
    """``AutomationCondition.on_cron``: materialize after each tick of ``on_cron`` once every
    upstream asset has been updated since that tick."""

    on_cron: str = Field(description="Cron string, e.g. '0 6 * * *' (minute hour day month dow).")
    cron_timezone: str = Field(default="UTC", description="Timezone of the cron (IANA name).")

    @field_validator("on_cron")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        from dagster._utils.schedules import is_valid_cron_string

        if not is_valid_cron_string(value):
            raise ValueError(
                f"automation_condition.on_cron {value!r} is not a cron string; write five "
                "fields, minute hour day-of-month month day-of-week, e.g. '0 6 * * *' (06:00 "
                "every day) or '*/15 * * * *'"
            )
        return value


def _name_or_mapping(value: Any) -> Any:
    """``automation_condition: none`` (or YAML's null) is no condition."""
    return None if value in ("none", None) else value


AutomationSetting = Annotated[
    Literal["eager", "on_missing"] | OnCronConfig | None,
    BeforeValidator(_name_or_mapping),
    Field(
        description="Dagster's declarative automation on the pipeline's asset: 'eager' (when an "
        "upstream partition it reads is updated, or a new partition appears), 'on_missing' "
        "(partitions never materialized), {on_cron: '0 6 * * *'} (after each tick, once every "
        "upstream is updated), or none (default: its sensor, schedule or a user starts runs).",
    ),
]


# --- freshness: --------------------------------------------------------------------------

#: Dagster refuses freshness windows shorter than a minute.
_MINUTE_MS = 60_000


class FreshnessConfig(Model):
    """The asset's freshness policy, written out: it fails (and first warns) when its newest
    materialization is older than these durations."""

    enabled: bool = Field(
        default=True, description="false (or `freshness: false`): the asset has no policy."
    )
    fail_after: str | None = Field(
        default=None,
        description="The asset is late (FAIL) when its newest materialization is older than "
        "this, e.g. '36 hours', '2 days' (at least 1 minute). Absent: derived.",
    )
    warn_after: str | None = Field(
        default=None,
        description="It warns (WARN) when its newest materialization is older than this; shorter "
        "than fail_after. Absent: no warning state.",
    )

    @field_validator("fail_after", "warn_after")
    @classmethod
    def _a_minute_or_more(cls, value: str | None, info: object) -> str | None:
        name = getattr(info, "field_name", "")
        if value is not None and parse_duration_ms(value) < _MINUTE_MS:
            raise ValueError(
                f"freshness.{name} {value!r} is refused: Dagster's freshness windows are at "
                "least 1 minute; write e.g. '30 minutes', '2 hours', '1 day'"
            )
        return value

    @model_validator(mode="after")
    def _warn_before_fail(self) -> FreshnessConfig:
        if not self.enabled and (self.fail_after or self.warn_after):
            raise ValueError(
                "freshness: enabled false gives the asset no policy; remove fail_after and "
                "warn_after, or enabled"
            )
        if self.warn_after is not None and self.fail_after is None:
            raise ValueError(
                f"freshness.warn_after {self.warn_after!r} needs fail_after (when the asset "
                "fails), e.g. fail_after: '2 days'"
            )
        if self.warn_ms is not None and self.fail_ms is not None and self.warn_ms >= self.fail_ms:
            raise ValueError(
                f"freshness.warn_after {self.warn_after!r} is refused: it must be shorter than "
                f"fail_after {self.fail_after!r} (a warning comes before the failure)"
            )
        return self

    @property
    def fail_ms(self) -> int | None:
        return None if self.fail_after is None else parse_duration_ms(self.fail_after)

    @property
    def warn_ms(self) -> int | None:
        return None if self.warn_after is None else parse_duration_ms(self.warn_after)


def _false_is_disabled(value: Any) -> Any:
    """``freshness: false`` (YAML also reads ``off``/``no`` as false) is ``{enabled: false}``."""
    return {"enabled": False} if value is False else value


def _accepts_false(schema: dict[str, Any]) -> None:
    """The JSON schema (``dg check yaml``) says ``false`` too."""
    schema.setdefault("anyOf", []).append({"const": False})


#: The ``freshness`` key of every pipeline kind: absent (None) derives the policy, ``false``
#: switches it off, a mapping writes it out.
Freshness = Annotated[
    FreshnessConfig | None,
    BeforeValidator(_false_is_disabled),
    Field(
        description="When Dagster calls the asset late (its FreshnessPolicy). Absent: derived "
        "from the pipeline's cadence and the time it gives late data (docs/ui.md: Freshness); "
        "{fail_after, warn_after}: as written; false: no policy.",
        json_schema_extra=_accepts_false,
    ),
]


def _group(value: str | None) -> str | None:
    if value is not None and not re.fullmatch(r"[A-Za-z0-9_]+", value):
        raise ValueError(
            f"group {value!r} is refused: Dagster's group names hold letters, digits and _ only, "
            "e.g. 'sales_ingestion'"
        )
    return value


def _owners(value: tuple[str, ...]) -> tuple[str, ...]:
    bad = [
        owner
        for owner in value
        if not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", owner)
        and not (owner.startswith("team:") and len(owner) > 5)
    ]  # Dagster's rule (an email, or team:NAME), without importing Dagster here
    if bad:
        raise ValueError(
            f"owners {bad} are refused: an owner is an email address or a team name prefixed "
            "with 'team:', e.g. 'team:data-eng' or 'ana@example.com'"
        )
    return value


def _tags(value: dict[str, str]) -> dict[str, str]:
    from dagster._utils.tags import normalize_tags

    try:
        normalize_tags(value, strict=True)
    except Exception as error:  # Dagster's own rule, said in its words
        raise ValueError(f"tags {value!r} are refused: {error}") from None
    return value


def _key_prefix(value: object) -> object:
    """``key_prefix: a/b`` is ``[a, b]``; a list stays a list."""
    if isinstance(value, str):
        return tuple(value.split("/"))
    return value


def _key_parts(value: tuple[str, ...]) -> tuple[str, ...]:
    bad = [part for part in value if not re.fullmatch(r"[A-Za-z0-9_]+", part)]
    if bad:
        raise ValueError(
            f"key_prefix {'/'.join(value)!r} is refused: {bad} are not key parts; a part holds "
            "letters, digits and _ only (Dagster's rule for the op the key names), e.g. "
            "'sales/raw' or [sales, raw]"
        )
    return value


#: ``key_prefix:`` the path put before the pipeline's name in its asset key.
AssetKeyPrefix = Annotated[
    tuple[str, ...],
    BeforeValidator(_key_prefix),
    AfterValidator(_key_parts),
    Field(
        description="Put before the pipeline's name in its asset key: a list of parts or "
        "'a/b' (letters, digits, _ each), e.g. sales/raw gives sales/raw/NAME (default: none, "
        "the key is the pipeline's name).",
    ),
]
#: ``group:`` the asset's group in the UI (default: its kind's group, as the docs list).
AssetGroup = Annotated[
    str | None,
    AfterValidator(_group),
    Field(
        description="The asset's group in the UI (letters, digits, _); default: its kind's "
        "group (watermark_ingestion, watermark_column_ingestion, watermark_time_ingestion, ...).",
    ),
]
#: ``owners:`` Dagster's asset owners.
AssetOwners = Annotated[
    tuple[str, ...],
    AfterValidator(_owners),
    Field(description="The asset's owners: emails or 'team:NAME' (default: none)."),
]
#: ``tags:`` Dagster's asset tags, added to the kinds' own.
AssetTags = Annotated[
    dict[str, str],
    AfterValidator(_tags),
    Field(description="Tags on the asset, e.g. {domain: sales} (default: none)."),
]


class PipelineModel(Model):
    """What every pipeline kind shares, written once: its name's rule and its asset's Dagster
    attributes (``freshness``, ``automation_condition``, ``group``, ``key_prefix``, ``owners``,
    ``tags``), and its schema policy (``schema``: what a run does when its source's columns
    change)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schema_policy: SchemaPolicy = Field(
        default_factory=SchemaPolicy,
        alias="schema",
        description="What a run does when its source's files stop matching the declared schema: "
        "{mode: fail|add_columns|rescue|ignore, hints: {column: TYPE}} (default: fail).",
    )
    freshness: Freshness = None
    automation_condition: AutomationSetting = None
    group: AssetGroup = None
    owners: AssetOwners = ()
    tags: AssetTags = Field(default_factory=dict)
    key_prefix: AssetKeyPrefix = ()

    @property
    def asset_key_path(self) -> tuple[str, ...]:
        """The path of the pipeline's asset key: ``key_prefix``, then its name (the one place
        it is made: ``defs/keys.asset_key`` turns it into Dagster's ``AssetKey``)."""
        return (*self.key_prefix, self.name)  # type: ignore[attr-defined]

    @field_validator("name", check_fields=False)
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return pipeline_name(value)

    @model_validator(mode="after")
    def _infer_of_file_pipelines(self) -> PipelineModel:
        source = getattr(self, "source", None)
        if self.schema_policy.infer and getattr(source, "type", None) != "files":
            kind = getattr(source, "type", None) or type(self).__name__
            raise ValueError(
                f"schema.infer is true but this pipeline's source is {kind!r}: only a file "
                "pipeline's 'files' source (CSV with a header, JSON lines) infers its schema; "
                "give the source's schema and remove infer"
            )
        return self
