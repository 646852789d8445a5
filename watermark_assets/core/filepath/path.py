"""A landing path is a partition prefix plus a file name; names must sort chronologically.

Paths are relative to the source root and '/'-separated: ``date=2024-01-28/hour=14/f.ndjson.gz`` is
the prefix ``date=2024-01-28/hour=14`` and the name ``f.ndjson.gz``; a file at the root has the
prefix ``''``. Every comparison of names and paths is plain string comparison (code point by code
point, as Python's ``<``), which is why names must start with a sortable identifier.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from enum import Enum

from watermark_assets.core.errors import UnsortableFileNameError


def split_path(path: str) -> tuple[str, str]:
    """``(partition prefix, file name)`` of a relative path; the prefix is ``''`` at the root.

    Raises ValueError for an absolute path (leading '/'), an empty path, a trailing '/' or an
    empty component ('a//b'): such a path cannot be compared with the others.
    """
    if not path:
        raise ValueError(
            "file path is empty; expected a relative path such as 'date=2024-01-28/f.gz'"
        )
    if path.startswith("/"):
        raise ValueError(
            f"file path {path!r} starts with '/'; expected a path relative to the source root, "
            "such as 'date=2024-01-28/f.gz'"
        )
    prefix, _, name = path.rpartition("/")
    if not name:
        raise ValueError(
            f"file path {path!r} ends with '/'; expected a file name after the last '/'"
        )
    prefix_components(prefix, what="file path", whole=path)
    return prefix, name


def prefix_components(
    prefix: str, *, what: str = "partition prefix", whole: str | None = None
) -> tuple[str, ...]:
    """The '/'-separated components of a partition prefix; ``()`` for the root prefix ``''``.

    Prefixes are ordered by comparing these tuples (each component as a plain string), so that
    ``'x/y'`` versus ``'x-1'`` compares ``'x'`` with ``'x-1'`` rather than ``'/'`` with ``'-'``.
    Raises ValueError for a leading or trailing '/' or an empty component.
    """
    if prefix == "":
        return ()
    components = tuple(prefix.split("/"))
    if "" in components:
        shown = whole if whole is not None else prefix
        raise ValueError(
            f"{what} {shown!r} has an empty component (leading, trailing or double '/'); "
            "expected components such as 'date=2024-01-28/hour=14'"
        )
    return components


class NameOrdering(str, Enum):
    """How file names are known to sort chronologically (the pipeline's ``file_name_ordering``)."""

    AUTO = "auto"
    """Any of the detectable identifiers below is required."""
    UNIX_TIMESTAMP = "unix_timestamp"
    UUIDV7 = "uuidv7"
    ISO8601 = "iso8601"
    LEXICOGRAPHIC = "lexicographic"
    """Nothing is checked: the user vouches that names sort chronologically."""


# A Unix timestamp in seconds (10 digits: 2001-2286) or milliseconds (13 digits), not followed by
# another digit. Mixing seconds and milliseconds in one source would mis-sort; that is the
# producer's contract, not something one name can show.
_UNIX_TIMESTAMP = re.compile(r"[0-9]{10,13}(?![0-9])")

# The first 48 bits of a UUIDv7 are the Unix time in milliseconds, written as 8 hex, '-', 4 hex;
# they alone order the files. Its leading hex digit is '0' until the year 2527, which keeps random
# hex words out. Accepted: that 13-character time prefix followed by the rest of a version-7 UUID
# ('-7xxx-[89ab]xxx-xxxxxxxxxxxx'), or followed by something that is neither a hex digit nor '-'
# (the seed's short form '01926abc-def0.parquet'). A UUIDv4 ('-4xxx-') is refused. Lowercase only:
# upper- and lowercase hex do not sort together.
_UUIDV7 = re.compile(
    r"0[0-9a-f]{7}-[0-9a-f]{4}"
    r"(?:-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}(?![0-9a-f])|(?![0-9a-f-]))"
)

# An ISO 8601 date in the extended form, optionally 'T' and the hour, minutes, seconds, a fraction
# and 'Z'. The final look-ahead refuses a name whose timestamp goes on in a shape we do not accept,
# notably an offset such as '+02:00': names with different offsets do not sort chronologically.
_ISO8601 = re.compile(
    r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"(?:T(?:[01][0-9]|2[0-3])(?::[0-5][0-9](?::[0-5][0-9](?:\.[0-9]+)?)?)?Z?(?![0-9]|[:.+-][0-9])"
    r"|(?![0-9]|T[0-9]))"
)

_PATTERNS: dict[NameOrdering, re.Pattern[str]] = {
    NameOrdering.UNIX_TIMESTAMP: _UNIX_TIMESTAMP,
    NameOrdering.UUIDV7: _UUIDV7,
    NameOrdering.ISO8601: _ISO8601,
}


def detect_name_ordering(name: str) -> NameOrdering | None:
    """The sortable identifier a file name starts with, or None.

    - UNIX_TIMESTAMP: 10 to 13 digits (seconds or milliseconds) not followed by another digit,
      e.g. ``1706450400-uuid.parquet``.
    - UUIDV7: the 48-bit millisecond time prefix of a UUIDv7 (``0xxxxxxx-xxxx``, lowercase hex),
      either as a full version-7 UUID or followed by a character that is neither hex nor '-',
      e.g. ``01926abc-def0.parquet``.
    - ISO8601: ``YYYY-MM-DD``, optionally ``THH[:MM[:SS[.f]]]`` and ``Z``, not followed by a
      digit or an offset, e.g. ``2024-01-28T14:00:00.parquet``.

    The three shapes cannot match the same name, so the answer is unique.
    """
    for ordering, pattern in _PATTERNS.items():
        if pattern.match(name):
            return ordering
    return None


def check_sortable(path: str, ordering: NameOrdering) -> None:
    """Refuse a path whose file name is not known to sort chronologically under ``ordering``.

    LEXICOGRAPHIC accepts every name (the user vouches); AUTO accepts any identifier
    :func:`detect_name_ordering` finds; a specific ordering requires that identifier. Otherwise
    raises :class:`~watermark_assets.exceptions.UnsortableFileNameError`.
    """
    if not is_sortable(path, ordering):
        raise UnsortableFileNameError(path, ordering.value)


def is_sortable(path: str, ordering: NameOrdering) -> bool:
    """Whether a path's file name is known to sort chronologically (see :func:`check_sortable`)."""
    _, name = split_path(path)
    if ordering is NameOrdering.LEXICOGRAPHIC:
        return True
    if ordering is NameOrdering.AUTO:
        return detect_name_ordering(name) is not None
    return bool(_PATTERNS[ordering].match(name))


def name_time(name: str) -> datetime | None:
    """The time a sortable file name encodes (aware UTC), or None when it encodes none.

    Unix seconds or milliseconds, the 48-bit millisecond prefix of a UUIDv7, or an ISO 8601
    timestamp (read as UTC when it has no 'Z'). Shown next to a watermark so a person reads
    "how far ingestion has got" as a time, not only as a path.
    """
    ordering = detect_name_ordering(name)
    match = _PATTERNS[ordering].match(name) if ordering is not None else None
    if match is None:
        return None
    text = match.group(0)
    if ordering is NameOrdering.UNIX_TIMESTAMP:
        if len(text) not in (10, 13):  # 11 or 12 digits: neither seconds nor milliseconds
            return None
        return datetime.fromtimestamp(int(text) / (1000 if len(text) == 13 else 1), tz=timezone.utc)
    if ordering is NameOrdering.UUIDV7:
        millis = int(text[:8] + text[9:13], 16)
        return datetime.fromtimestamp(millis / 1000, tz=timezone.utc)
    parsed = datetime.fromisoformat(text.removesuffix("Z"))
    return parsed.replace(tzinfo=timezone.utc)
