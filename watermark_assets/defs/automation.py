"""The asset's automation condition from the pipeline's ``automation_condition:`` key
(``config_automation.py``): Dagster's own conditions, evaluated by its automation sensor."""

from __future__ import annotations

from typing import Any

from dagster import AutomationCondition

from watermark_assets.config.shared import OnCronConfig


def automation_condition(setting: str | OnCronConfig | None) -> AutomationCondition[Any] | None:
    """``eager`` / ``on_missing`` / ``{on_cron}`` as Dagster's condition; None: no condition."""
    if setting is None:
        return None
    if isinstance(setting, OnCronConfig):
        return AutomationCondition.on_cron(setting.on_cron, setting.cron_timezone)
    if setting == "eager":
        return AutomationCondition.eager()
    return AutomationCondition.on_missing()
