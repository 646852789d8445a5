"""A pipeline's ``automation_condition:`` key: Dagster's declarative automation on its asset.

Absent (the default), the asset has no automation condition: its sensor, schedule or a user
starts its runs. ``eager`` materializes a partition when an upstream asset's partition it reads
is updated, or when a new partition appears (Dagster's ``AutomationCondition.eager()``: only the
latest time window, never while an upstream is missing or in progress); ``on_missing``
materializes partitions that were never materialized (``AutomationCondition.on_missing()``);
``{on_cron: "0 6 * * *"}`` after each cron tick once every upstream has been updated since
(``AutomationCondition.on_cron()``). ``defs/automation.py`` builds the condition; Dagster's
automation sensor (``default_automation_condition_sensor``) evaluates it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator

from watermark_assets.config_base import Model


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
