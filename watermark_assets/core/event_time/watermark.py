"""Kind ``"event_time"``: how far event time has progressed, per input and for the whole query.

Seed 004 (Structured Streaming): each input's watermark is ``max(event time seen) - delay``;
several inputs are combined by a policy into the global watermark (``tracker.py``), which only
moves forward. This module holds the *value*, committed with the data it covers in one Delta
commit:

- :class:`InputMark` per input: its watermark, the greatest event time it has seen, and the
  processing time it last had rows (to tell an idle input, ``tracker.py``). ``None`` = never had
  rows (Spark counts such an input as 0 under the min policy).
- :class:`EventTimeWatermark`: the marks by input name, ``watermark_ms``, the global watermark
  (0 before any data, as Spark's ``globalWatermarkMs``), and ``started_ms``, the processing time
  of the first run it saw (an input that never had rows is idle once that is long enough ago).

``advance`` and ``merge`` take the larger value field by field (``started_ms``: the earlier):
commutative, associative and idempotent, so two runs that commit at once never lose each other's
progress, and no field ever goes down (property-tested). Each input may also keep the local
watermarks of its partitions (seed 002): merged partition by partition, and rescaled to the max
of the old ones when the input's partitioning changes (``InputMark.merge``). Times are
milliseconds since the epoch, UTC; the JSON writes them as ISO instants so that a person can
read a commit's metadata.

Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from watermark_assets.core.errors import WatermarkJSONError
from watermark_assets.core.event_time.operators import LocalWatermarks
from watermark_assets.core.frozen_map import FrozenMap
from watermark_assets.core.text import millis_text
from watermark_assets.core.time.instant import format_millis, parse_millis
from watermark_assets.core.watermark import Watermark, register


def _later(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


@dataclass(frozen=True, kw_only=True)
class InputMark:
    """One input's progress. ``watermark_ms``: max event time - delay (None: no rows yet);
    ``max_event_ms``: the greatest event time seen; ``last_data_ms``: the processing time of
    the last run in which it had rows.

    ``local``: the local watermark of each partition of the input (seed 002's watermark filter
    state, e.g. ``event_date=2024-01-30`` of an upstream table partitioned by day), under
    ``partitioning`` (the partition columns; None: not tracked). The input's watermark is their
    maximum, as Spark's is the maximum over its partitions.
    """

    watermark_ms: int | None = None
    max_event_ms: int | None = None
    last_data_ms: int | None = None
    local: LocalWatermarks = field(default_factory=LocalWatermarks)
    partitioning: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.local and self.partitioning is None:
            raise ValueError(
                f"local watermarks {dict(self.local)} need the partitioning they are of"
            )

    def merge(self, other: InputMark) -> InputMark:
        """Field by field, the later value. Local watermarks under one partitioning: partition
        by partition, the later; under two: the partitioning of the mark that had data last
        wins, and none of its partitions is below the other's maximum (seed 002's rescaling).
        Commutative and idempotent; associative under one partitioning (marks of two only meet
        when a run's observation rescales the committed one, see ``tracker.observe``)."""
        local, partitioning = _merge_local(self, other)
        return InputMark(
            watermark_ms=_later(self.watermark_ms, other.watermark_ms),
            max_event_ms=_later(self.max_event_ms, other.max_event_ms),
            last_data_ms=_later(self.last_data_ms, other.last_data_ms),
            local=local,
            partitioning=partitioning,
        )

    @property
    def has_data(self) -> bool:
        return self.max_event_ms is not None

    def to_dict(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "watermark": None if self.watermark_ms is None else format_millis(self.watermark_ms),
            "max_event_time": None
            if self.max_event_ms is None
            else format_millis(self.max_event_ms),
            "last_data_at": None if self.last_data_ms is None else format_millis(self.last_data_ms),
        }
        if self.partitioning is not None:
            fields["partitioning"] = list(self.partitioning)
            fields["local"] = {key: format_millis(ms) for key, ms in self.local.items()}
        return fields

    @classmethod
    def from_dict(cls, text: str, raw: Any) -> InputMark:
        base = {"watermark", "max_event_time", "last_data_at"}
        if not isinstance(raw, dict) or not (
            set(raw) == base or set(raw) == base | {"partitioning", "local"}
        ):
            raise WatermarkJSONError(
                text,
                'an input is {"watermark", "max_event_time", "last_data_at"}: ISO or null, '
                'with "partitioning" (a list of columns) and "local" (partition -> ISO) or not',
            )
        values = [
            _read_instant(text, raw[k]) for k in ("watermark", "max_event_time", "last_data_at")
        ]
        partitioning = raw.get("partitioning")
        local = raw.get("local", {})
        if partitioning is not None and (
            not isinstance(partitioning, list)
            or not all(isinstance(c, str) for c in partitioning)
            or not isinstance(local, Mapping)
        ):
            raise WatermarkJSONError(
                text, '"partitioning" is a list of column names and "local" an object'
            )
        if partitioning is None and local:
            raise WatermarkJSONError(text, '"local" watermarks need their "partitioning"')
        locals_ms: dict[str, int] = {}
        for key, value in local.items():
            millis = _read_instant(text, value)
            if millis is None:
                raise WatermarkJSONError(text, f"local watermark of {key!r} is null")
            locals_ms[str(key)] = millis
        return cls(
            watermark_ms=values[0],
            max_event_ms=values[1],
            last_data_ms=values[2],
            local=LocalWatermarks(locals_ms),
            partitioning=None if partitioning is None else tuple(partitioning),
        )


def _merge_local(a: InputMark, b: InputMark) -> tuple[LocalWatermarks, tuple[str, ...] | None]:
    """The local watermarks of ``a.merge(b)`` (symmetric in a and b; see InputMark.merge)."""
    if a.partitioning == b.partitioning:
        merged = dict(a.local)
        for key, ms in b.local.items():
            merged[key] = max(ms, merged.get(key, ms))
        return LocalWatermarks(merged), a.partitioning

    def rank(mark: InputMark) -> tuple[bool, int, str]:  # a merged mark keeps its winner's
        return (
            mark.partitioning is not None,
            -1 if mark.last_data_ms is None else mark.last_data_ms,
            json.dumps(mark.partitioning),
        )

    kept, other = (a, b) if rank(a) >= rank(b) else (b, a)
    floor = other.local.maximum
    if floor is None:
        return kept.local, kept.partitioning
    return LocalWatermarks({k: max(ms, floor) for k, ms in kept.local.items()}), kept.partitioning


def _text(millis: int | None) -> str | None:
    return None if millis is None else format_millis(millis)


def _read_instant(text: str, value: Any) -> int | None:
    if value is None:
        return None
    millis = parse_millis(value) if isinstance(value, str) else None
    if millis is None:
        raise WatermarkJSONError(
            text, f"{value!r} is not an ISO instant like 2024-01-30T12:00:00.000Z (or null)"
        )
    return millis


class InputMarks(FrozenMap[str, InputMark]):
    """Input name -> :class:`InputMark`, in name order."""

    def _prepare(self, items: dict[str, InputMark]) -> dict[str, InputMark]:
        for name, mark in items.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"input name {name!r} is refused: a non-empty string")
            if not isinstance(mark, InputMark):
                raise TypeError(f"input {name!r}: {mark!r} is not an InputMark")
        return items


@register
@dataclass(frozen=True, kw_only=True)
class EventTimeWatermark:
    """The global event-time watermark and each input's mark (module docstring)."""

    kind: ClassVar[str] = "event_time"

    watermark_ms: int = 0
    inputs: InputMarks = field(default_factory=InputMarks)
    started_ms: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.inputs, InputMarks):
            object.__setattr__(self, "inputs", InputMarks(self.inputs))

    @classmethod
    def empty(cls) -> EventTimeWatermark:
        return cls()

    @property
    def is_empty(self) -> bool:
        """No input has had rows: nothing is late yet."""
        return not any(mark.has_data for mark in self.inputs.values())

    def mark(self, name: str) -> InputMark:
        """The mark of input ``name`` (an empty one if it never had rows)."""
        return self.inputs.get(name, InputMark())

    def advance(self, observed: EventTimeWatermark) -> EventTimeWatermark:
        """The watermark after ``observed`` (the tracker's next value) was committed: never
        lower than ``self`` in any field."""
        return self.merge(observed)

    def merge(self, other: EventTimeWatermark) -> EventTimeWatermark:
        """Field by field and input by input, the later value (commutative, associative,
        idempotent)."""
        names = set(self.inputs) | set(other.inputs)
        marks = {n: self.mark(n).merge(other.mark(n)) for n in names}
        starts = [s for s in (self.started_ms, other.started_ms) if s is not None]
        return EventTimeWatermark(
            watermark_ms=max(self.watermark_ms, other.watermark_ms),
            inputs=InputMarks(marks),
            started_ms=min(starts) if starts else None,
        )

    def to_json(self) -> str:
        """``{"watermark": "2024-01-30T12:00:00.000Z", "inputs": {"events": {...}},
        "started_at": ...}``."""
        return json.dumps(
            {
                "watermark": format_millis(self.watermark_ms),
                "inputs": {name: mark.to_dict() for name, mark in self.inputs.items()},
                "started_at": _text(self.started_ms),
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> EventTimeWatermark:
        """The watermark :meth:`to_json` wrote."""
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise WatermarkJSONError(text, f"not JSON ({exc})") from None
        if not isinstance(raw, dict) or set(raw) != {"watermark", "inputs", "started_at"}:
            raise WatermarkJSONError(
                text, 'an event_time watermark is {"watermark", "inputs", "started_at"}'
            )
        watermark = _read_instant(text, raw["watermark"])
        inputs = raw["inputs"]
        if watermark is None or not isinstance(inputs, Mapping):
            raise WatermarkJSONError(
                text, '"watermark" is an ISO instant and "inputs" an object of inputs'
            )
        marks = {name: InputMark.from_dict(text, value) for name, value in inputs.items()}
        started = _read_instant(text, raw["started_at"])
        return cls(watermark_ms=watermark, inputs=InputMarks(marks), started_ms=started)

    def __str__(self) -> str:
        if self.is_empty:
            return "(empty: no event seen yet)"
        return f"event time watermark {millis_text(self.watermark_ms)}"


if TYPE_CHECKING:

    def _conforms(w: EventTimeWatermark) -> Watermark[EventTimeWatermark]:
        return w
