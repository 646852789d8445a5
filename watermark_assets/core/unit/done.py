"""Kind ``"done_at"``: when a unit was last read, the inner watermark of a unit-only pipeline.

A unit pipeline without a time dimension (one partition per survey id) has nothing to order within
a unit: its watermark per unit is simply the instant its last successful run committed, in
milliseconds since the epoch (UTC), as the seed keeps time watermarks. It only moves forward:
:meth:`DoneAt.advance` and :meth:`DoneAt.merge` take the later instant.

Standard library only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, ClassVar

from watermark_assets.core.clock import ensure_utc
from watermark_assets.core.errors import WatermarkJSONError
from watermark_assets.core.text import time_text
from watermark_assets.core.watermark import Watermark, register

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@register
@dataclass(frozen=True, order=True)
class DoneAt:
    """A unit's last successful run committed at ``ms`` (milliseconds since the epoch, UTC)."""

    kind: ClassVar[str] = "done_at"

    ms: int

    def __post_init__(self) -> None:
        if not isinstance(self.ms, int) or isinstance(self.ms, bool):
            raise TypeError(f"done_at ms {self.ms!r} is not an integer (milliseconds, UTC)")

    @classmethod
    def at(cls, when: datetime) -> DoneAt:
        """The instant ``when`` (tz-aware; naive raises NaiveDatetimeError), to the millisecond
        below."""
        return cls((ensure_utc(when) - _EPOCH) // timedelta(milliseconds=1))

    @property
    def when(self) -> datetime:
        """The instant as a UTC datetime."""
        return _EPOCH + timedelta(milliseconds=self.ms)

    @property
    def is_empty(self) -> bool:
        """Never: a unit with no run yet has no DoneAt at all."""
        return False

    def advance(self, observed: DoneAt | int) -> DoneAt:
        """The later of ``self`` and ``observed`` (a DoneAt or milliseconds); never earlier."""
        other = observed if isinstance(observed, DoneAt) else DoneAt(observed)
        return self.merge(other)

    def merge(self, other: DoneAt) -> DoneAt:
        """The later of the two: commutative, associative, idempotent."""
        return other if other.ms > self.ms else self

    def to_json(self) -> str:
        """``{"ms": 1579046400000}``."""
        return json.dumps({"ms": self.ms})

    @classmethod
    def from_json(cls, text: str) -> DoneAt:
        """The DoneAt :meth:`to_json` wrote."""
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise WatermarkJSONError(text, f"not JSON ({exc})") from None
        ms = raw.get("ms") if isinstance(raw, dict) else None
        if not isinstance(ms, int) or isinstance(ms, bool):
            raise WatermarkJSONError(text, 'a done_at watermark is {"ms": <integer>}')
        return cls(ms)

    def __str__(self) -> str:
        return f"done at {time_text(self.when)}"


if TYPE_CHECKING:

    def _conforms(w: DoneAt) -> Watermark[DoneAt | int]:
        return w
