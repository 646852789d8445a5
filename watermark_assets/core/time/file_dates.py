"""Dated file names: ``file{date:%Y%m%d}.csv`` and which files a time window reads (pure).

A template is text with ``{date:PATTERN}`` fields, PATTERN a ``strftime`` pattern of the
directives ``%Y %y %m %b %B %d %j %H`` (and ``%%``). The finest directive is the **file period**:
``%H`` hourly, ``%d``/``%j`` daily, ``%m``/``%b``/``%B`` monthly. A file's **date** is the start
of its period (``file20200115`` is the day ``[2020-01-15, 2020-01-16)``; its date
2020-01-15T00:00Z).

A window ``[start, end)`` reads the files whose date is in it (closed at the start, open at the
end, like the window): a daily window reads one daily file, a partial window ``[D, D 12:00)``
still reads the file of day ``D``, a monthly window reads its month's daily files. So windows that
tile ``[from, to)`` read every file once. Files coarser than the windows (a monthly file read by
daily windows) or windows that do not start on a file boundary (daily files, windows at 10:00)
would split a file across windows: :meth:`DateTemplate.check_fits` refuses them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum

from watermark_assets.core.errors import FileTemplateError
from watermark_assets.core.partition_selection import TimeWindow
from watermark_assets.core.time.partitioning import Partitioning, add_months

_FIELD = re.compile(r"\{([^{}]*)\}")
_DIRECTIVE = re.compile(r"%(.)")
#: directive -> what it says of a date
_DIRECTIVES = {
    "Y": "year",
    "y": "year",
    "m": "month",
    "b": "month",
    "B": "month",
    "d": "day",
    "j": "day_of_year",
    "H": "hour",
    "%": "",
}
ACCEPTED = "%Y %y %m %b %B %d %j %H (and %% for a literal %)"


class FilePeriod(str, Enum):
    """How long one file's rows last: the template's finest directive."""

    MONTHLY = "monthly"
    DAILY = "daily"
    HOURLY = "hourly"

    def floor(self, moment: datetime) -> datetime:
        """The start of the period holding ``moment``."""
        moment = moment.replace(minute=0, second=0, microsecond=0)
        if self is FilePeriod.HOURLY:
            return moment
        moment = moment.replace(hour=0)
        return moment if self is FilePeriod.DAILY else moment.replace(day=1)

    def after(self, date: datetime) -> datetime:
        """The next file's date."""
        if self is FilePeriod.MONTHLY:
            return add_months(date, 1)
        return date + (timedelta(hours=1) if self is FilePeriod.HOURLY else timedelta(days=1))


#: How fine each partitioning's windows are, and the file periods that fit in them.
_FITS = {
    Partitioning.HOURLY: (FilePeriod.HOURLY,),
    Partitioning.DAILY: (FilePeriod.HOURLY, FilePeriod.DAILY),
    Partitioning.WEEKLY: (FilePeriod.HOURLY, FilePeriod.DAILY),
    Partitioning.MONTHLY: (FilePeriod.HOURLY, FilePeriod.DAILY, FilePeriod.MONTHLY),
    Partitioning.NONE: (FilePeriod.HOURLY, FilePeriod.DAILY, FilePeriod.MONTHLY),
}


@dataclass(frozen=True)
class DateTemplate:
    """A parsed template (module docstring); :meth:`parse` refuses what it cannot date."""

    text: str
    period: FilePeriod

    @classmethod
    def parse(cls, text: str) -> DateTemplate:
        """The template of ``text``; :class:`FileTemplateError` names the problem and the fix."""
        fields = _FIELD.findall(text)
        if not fields:
            raise FileTemplateError(
                text,
                "it has no {date:...} field",
                "name the files by date, e.g. 'https://host/files/file{date:%Y%m%d}.csv'",
            )
        if _FIELD.sub("", text).count("{") or _FIELD.sub("", text).count("}"):
            raise FileTemplateError(text, "it has an unmatched brace", "write {date:PATTERN}")
        said: set[str] = set()
        for field in fields:
            name, _, pattern = field.partition(":")
            if name != "date" or not pattern:
                raise FileTemplateError(
                    text,
                    f"{{{field}}} is not a date field",
                    "write {date:PATTERN}, e.g. {date:%Y%m%d}",
                )
            for directive in _DIRECTIVE.findall(pattern):
                if directive not in _DIRECTIVES:
                    raise FileTemplateError(
                        text, f"%{directive} is not an accepted directive", f"use {ACCEPTED}"
                    )
                said.add(_DIRECTIVES[directive])
            if pattern.count("%") != 2 * pattern.count("%%") + len(
                [d for d in _DIRECTIVE.findall(pattern) if d != "%"]
            ):
                raise FileTemplateError(text, f"{pattern!r} ends with a lone %", f"use {ACCEPTED}")
        day = ("day" in said and "month" in said) or "day_of_year" in said
        if "year" not in said or ("hour" in said and not day) or ("day" in said and not day):
            raise FileTemplateError(
                text,
                "its fields do not name one date (a year, then a month, a day and an hour as "
                "fine as the files)",
                "use e.g. {date:%Y%m} (monthly), {date:%Y%m%d} or {date:%Y-%j} (daily), "
                "{date:%Y%m%d%H} (hourly)",
            )
        if "hour" in said:
            period = FilePeriod.HOURLY
        elif day:
            period = FilePeriod.DAILY
        elif "month" in said:
            period = FilePeriod.MONTHLY
        else:
            raise FileTemplateError(
                text, "a year alone is no file period", "add %m (monthly) or %d (daily)"
            )
        return cls(text, period)

    def render(self, date: datetime) -> str:
        """The name of the file dated ``date``."""
        return _FIELD.sub(lambda m: date.strftime(m.group(1).partition(":")[2]), self.text)

    def dates_in(self, window: TimeWindow) -> Iterator[datetime]:
        """The dates of the files ``window`` reads: the period starts in ``[start, end)``."""
        date = self.period.floor(window.start)
        if date < window.start:
            date = self.period.after(date)
        while date < window.end:
            yield date
            date = self.period.after(date)

    def check_fits(self, partitioning: Partitioning, start: datetime) -> None:
        """Refuse windows a file would straddle: files coarser than the windows, or windows
        (from ``start``) that do not begin where a file begins."""
        if self.period not in _FITS[partitioning]:
            raise FileTemplateError(
                self.text,
                f"{self.period.value} files are coarser than {partitioning.value} windows (one "
                "file would be split across windows)",
                f"partition {self.period.value} or coarser, or name finer files",
            )
        if partitioning is not Partitioning.NONE and self.period.floor(start) != start:
            raise FileTemplateError(
                self.text,
                f"the windows start at {start.isoformat()}, inside a {self.period.value} file",
                f"start watermark.from where a file starts, e.g. "
                f"{self.period.floor(start).isoformat()}",
            )
