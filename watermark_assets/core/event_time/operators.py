"""Seed 002's watermark operators, on plain values: rescaling, the merger and the sort buffer.

- :class:`LocalWatermarks` (the watermark filter's state): one watermark per partition of an
  input (a landing partition, a Spark partition), persisted. When the partitioning changes
  (partitions merged or split), every new partition starts at the **maximum** of the old ones,
  so no partition emits a watermark below one already emitted ("On scaling: scan all states,
  take the maximum value as the watermark").
- :class:`WatermarkMerger` (the exchange's merger): one queue of watermark messages per input;
  only once every queue holds one is the minimum known and emitted; then the messages with that
  value are removed. The output never goes backwards, and an input that never reported holds
  the output back (seed 002's rule; ``tracker.py`` has the idle-input variant).
- :class:`SortBuffer` (the sort operator): rows buffered by (event time, key); a watermark
  drains every row with event time below it, in order, so the output is append-only and
  ordered. The drained rows leave the state.

Standard library only. Times are integer milliseconds (any ordered integers work).
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from watermark_assets.core.frozen_map import FrozenMap


class LocalWatermarks(FrozenMap[str, int]):
    """Partition id -> its local watermark (ms), in id order."""

    def advance(self, partition: str, watermark_ms: int) -> LocalWatermarks:
        """``partition``'s watermark moved to ``watermark_ms`` (kept only when greater)."""
        current = self.get(partition)
        if current is not None and current >= watermark_ms:
            return self
        return LocalWatermarks({**self, partition: watermark_ms})

    @property
    def maximum(self) -> int | None:
        return max(self.values()) if self else None

    def rescale(self, partitions: Iterable[str]) -> LocalWatermarks:
        """The state after the partitioning changed to ``partitions``: each starts at the max of
        the old watermarks (nothing before: an empty state stays empty)."""
        top = self.maximum
        if top is None:
            return LocalWatermarks()
        return LocalWatermarks({partition: top for partition in partitions})


@dataclass
class WatermarkMerger:
    """The merger of seed 002 over named inputs (module docstring); mutable, like an operator.

    ``receive(input, value)`` returns the watermarks emitted by that message, in order (usually
    zero or one). ``add_input`` registers an upstream that appeared on scaling (an empty queue:
    the output waits for its first watermark, which scaling makes at least the old maximum).
    """

    inputs: Iterable[str]
    emitted: int | None = None
    _queues: dict[str, deque[int]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        names = list(self.inputs)
        if not names:
            raise ValueError("a merger needs at least one input")
        if len(set(names)) != len(names):
            raise ValueError(f"input names {names} repeat a name")
        self.inputs = tuple(names)
        self._queues = {name: deque() for name in names}

    def add_input(self, name: str) -> None:
        if name in self._queues:
            raise ValueError(f"input {name!r} is already an input of the merger")
        self._queues[name] = deque()
        self.inputs = (*self.inputs, name)

    def receive(self, name: str, value: int) -> list[int]:
        """Buffer ``value`` from input ``name``; emit what every queue now allows."""
        queue = self._queues.get(name)
        if queue is None:
            raise KeyError(f"{name!r} is not an input of the merger ({list(self._queues)})")
        if queue and value < queue[-1]:
            raise ValueError(
                f"input {name!r} sent watermark {value} after {queue[-1]}: an input's "
                "watermarks never go backwards"
            )
        queue.append(value)
        out: list[int] = []
        while all(self._queues.values()):
            low = min(q[0] for q in self._queues.values())
            for q in self._queues.values():
                while q and q[0] == low:  # clean up every message with the emitted value
                    q.popleft()
            if self.emitted is None or low > self.emitted:
                self.emitted = low
                out.append(low)
        return out

    def pending(self) -> Mapping[str, tuple[int, ...]]:
        """The buffered messages per input (for the UI: which input holds the output back)."""
        return {name: tuple(q) for name, q in self._queues.items()}


@dataclass
class SortBuffer:
    """Rows buffered by ``(event_ms, key)`` until a watermark passes them (module docstring)."""

    _rows: list[tuple[int, Any, Any]] = field(default_factory=list, repr=False)
    _drained_to: int | None = None

    def add(self, event_ms: int, key: Any, row: Any) -> None:
        """Buffer one row. A row below a watermark already drained is refused: it is late and
        belongs to the late records, not to an ordered output."""
        if self._drained_to is not None and event_ms < self._drained_to:
            raise ValueError(
                f"row {key!r} at {event_ms} is below the watermark {self._drained_to} already "
                "drained: it is late (route it to the late records)"
            )
        bisect.insort(self._rows, (event_ms, key, row), key=lambda r: (r[0], r[1]))

    def drain(self, watermark_ms: int) -> list[Any]:
        """Every buffered row with event time below ``watermark_ms``, in (event time, key)
        order; they leave the buffer."""
        cut = bisect.bisect_left([r[0] for r in self._rows], watermark_ms)
        out, self._rows = self._rows[:cut], self._rows[cut:]
        if self._drained_to is None or watermark_ms > self._drained_to:
            self._drained_to = watermark_ms
        return [row for _, _, row in out]

    def __len__(self) -> int:
        return len(self._rows)
