"""What every configuration model shares: strict frozen models, pipeline names, YAML instants.

Split from ``config.py`` so that a watermark kind's configuration can live in a module of its
own (``config_event_time.py``) and still be one of ``config.PipelineConfig``'s members.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,62}$")


class Model(BaseModel):
    """Unknown keys are refused (a typo must not pass silently); values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def pipeline_name(value: str) -> str:
    """``value`` when it is a valid pipeline name, else ValueError with the rule and an example."""
    if not _NAME_PATTERN.match(value):
        raise ValueError(
            f"{value!r} is not a valid pipeline name; use lower-case letters, digits and '_', "
            "starting with a letter (e.g. 'web_events')"
        )
    return value


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
