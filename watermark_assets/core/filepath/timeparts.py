"""Landing partition prefixes <-> datetimes, through a strftime-like template.

A template such as ``date=%Y-%m-%d/hour=%H`` may use only ``%Y %m %d %H %M``, starting with ``%Y``
and going from the coarsest field to the finest without a gap. Every field has a fixed width (the
year zero-padded to 4 digits), so the lexicographic order of prefixes is their chronological
order, the property the watermark's comparisons rely on. A prefix stands for the closed-open
interval [start, start + one grain).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Literal

from watermark_assets.core.clock import ensure_utc
from watermark_assets.core.errors import PartitionTemplateError

Grain = Literal["minute", "hour", "day", "month", "year"]

# Directive -> (grain, width, datetime attribute), coarsest first.
_FIELDS: dict[str, tuple[Grain, int, str]] = {
    "Y": ("year", 4, "year"),
    "m": ("month", 2, "month"),
    "d": ("day", 2, "day"),
    "H": ("hour", 2, "hour"),
    "M": ("minute", 2, "minute"),
}
_ORDER = list(_FIELDS)
_EXAMPLE = "'date=%Y-%m-%d' or 'date=%Y-%m-%d/hour=%H'"


@functools.lru_cache(maxsize=256)
def _tokenize(template: str) -> tuple[tuple[bool, str], ...]:
    """(is_directive, text) pieces of ``template``; refuses unknown or misordered directives
    (once per template: a listing parses a prefix per file)."""
    pieces: list[tuple[bool, str]] = []
    literal = ""
    index = 0
    while index < len(template):
        char = template[index]
        if char != "%":
            literal += char
            index += 1
            continue
        directive = template[index + 1 : index + 2]
        if directive not in _FIELDS:
            raise PartitionTemplateError(
                f"partition template {template!r} uses '%{directive}'; only %Y %m %d %H %M are "
                f"allowed, because their fixed width makes text order time order. Use e.g. "
                f"{_EXAMPLE}",
                template=template,
            )
        if literal:
            pieces.append((False, literal))
            literal = ""
        pieces.append((True, directive))
        index += 2
    if literal:
        pieces.append((False, literal))
    return tuple(pieces)


@dataclass(frozen=True)
class PartitionTemplate:
    """A validated partition prefix template (see the module docstring); invalid ones raise
    :class:`~watermark_assets.exceptions.PartitionTemplateError` naming the template and the fix.
    """

    template: str

    def __post_init__(self) -> None:
        template = self.template
        if not template or template.startswith("/") or template.endswith("/") or "//" in template:
            raise PartitionTemplateError(
                f"partition template {template!r} must be a non-empty relative path without empty "
                f"components; use e.g. {_EXAMPLE}",
                template=template,
            )
        directives = [text for is_directive, text in _tokenize(template) if is_directive]
        if directives != _ORDER[: len(directives)] or not directives:
            raise PartitionTemplateError(
                f"partition template {template!r} has the fields {directives}; they must start "
                "with %Y and go from the coarsest to the finest without a gap (%Y, %m, %d, %H, %M) "
                f"so that text order is time order. Use e.g. {_EXAMPLE}",
                template=template,
            )

    @property
    def depth(self) -> int:
        """The number of '/'-separated components of a prefix."""
        return self.template.count("/") + 1

    @property
    def grain(self) -> Grain:
        """The finest field present: one prefix covers one grain of time."""
        directives = [text for is_directive, text in _tokenize(self.template) if is_directive]
        return _FIELDS[directives[-1]][0]

    def format(self, dt: datetime) -> str:
        """The prefix of the partition containing ``dt`` (aware; converted to UTC first)."""
        utc = ensure_utc(dt)
        return "".join(
            f"{getattr(utc, _FIELDS[text][2]):0{_FIELDS[text][1]}d}" if is_directive else text
            for is_directive, text in _tokenize(self.template)
        )

    def parse(self, prefix: str) -> datetime:
        """The start (aware UTC) of the partition ``prefix``; a prefix that does not match the
        template raises :class:`~watermark_assets.exceptions.PartitionTemplateError`."""
        parsed = self.try_parse(prefix)
        if parsed is None:
            raise PartitionTemplateError(
                f"partition prefix {prefix!r} does not match the template {self.template!r} "
                f"(for example {self.format(datetime(2024, 1, 28, 14, tzinfo=timezone.utc))!r}); "
                "check the source's partition_template",
                template=self.template,
                value=prefix,
            )
        return parsed

    def try_parse(self, prefix: str) -> datetime | None:
        """Like :meth:`parse`, but None when ``prefix`` does not match."""
        match = self._pattern().fullmatch(prefix)
        if match is None:
            return None
        values = {name: int(text) for name, text in match.groupdict().items()}
        try:
            return datetime(
                values["Y"],
                values.get("m", 1),
                values.get("d", 1),
                values.get("H", 0),
                values.get("M", 0),
                tzinfo=timezone.utc,
            )
        except ValueError:  # e.g. month 13 or 2023-02-29
            return None

    def _pattern(self) -> re.Pattern[str]:
        return _compiled(self.template)


@functools.lru_cache(maxsize=256)
def _compiled(template: str) -> re.Pattern[str]:
    """The regular expression of a template's prefixes (once per template)."""
    return re.compile(
        "".join(
            f"(?P<{text}>[0-9]{{{_FIELDS[text][1]}}})" if is_directive else re.escape(text)
            for is_directive, text in _tokenize(template)
        )
    )
