"""How a time watermark's range ``[from, to)`` is cut into windows (the seed's partitions).

Standard library only.
"""

from __future__ import annotations

from datetime import timedelta
from enum import Enum


class Partitioning(str, Enum):
    """The seed's ``ms.work.unit.partition``: how ``[from, to)`` is cut into windows."""

    MONTHLY = "monthly"
    WEEKLY = "weekly"
    DAILY = "daily"
    HOURLY = "hourly"
    NONE = "none"

    @classmethod
    def _missing_(cls, value: object) -> Partitioning | None:
        # DIL reads the name case-insensitively ("Daily" works there, so it works here).
        if isinstance(value, str):
            for member in cls:
                if member.value == value.lower():
                    return member
        return None

    @property
    def is_multi_day(self) -> bool:
        """Weekly and monthly: their ``to`` is rounded (see :mod:`.spec`)."""
        return self in (Partitioning.WEEKLY, Partitioning.MONTHLY)

    @property
    def step(self) -> timedelta | None:
        """The fixed length of a window; None for monthly (calendar months) and none."""
        return _STEPS.get(self)


_STEPS = {
    Partitioning.HOURLY: timedelta(hours=1),
    Partitioning.DAILY: timedelta(days=1),
    Partitioning.WEEKLY: timedelta(days=7),
}
