"""What every configuration model is: strict and frozen; and what a pipeline name may be.

The bottom of the package: every model module (and ``storage.py``) imports it, it imports none
of them.
"""

from __future__ import annotations

import re

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
