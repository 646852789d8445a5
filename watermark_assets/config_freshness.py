"""A pipeline's ``freshness:`` key: when Dagster calls its asset late (a ``FreshnessPolicy``).

Absent (or without ``fail_after``), the policy is derived from the pipeline's cadence and the
time it gives late data (``defs/freshness.py``); ``freshness: {fail_after, warn_after}`` sets
it; ``freshness: false`` gives the asset none.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator, model_validator

from watermark_assets.config_base import Model
from watermark_assets.core.event_time.duration import parse_duration_ms

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
