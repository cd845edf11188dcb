"""Scheduled replica floors (``autoscaling.schedule``): five-field cron expressions as KEDA's cron
scaler reads them, and whether a window is active at a given instant.

KEDA 2.20.2 ``pkg/scalers/cron_scaler.go`` parses ``start`` and ``end`` with robfig/cron's
``NewParser(Minute | Hour | Dom | Month | Dow)``, loads ``timezone`` with Go's
``time.LoadLocation`` (IANA names), refuses ``start == end`` and ``desiredReplicas`` 0, and is
active when the next ``end`` comes before the next ``start``
(reference/upstream/hpa-keda-controllers.json "cron_scaler"). robfig/cron v3 ``parser.go`` /
``spec.go``: fields are ``*``, ``?`` (day fields), ``a``, ``a-b``, each with an optional ``/step``,
comma-separated; month and weekday names (``JAN``, ``MON``); weekday 0 and 7 are not both
accepted (0-6, Sunday 0); when both day-of-month and day-of-week are restricted a day matches
either.
"""

from __future__ import annotations

import bisect
import datetime as dt
import zoneinfo
from dataclasses import dataclass
from functools import cache

_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 6),
)
_NAMES = {
    3: {
        m: i + 1
        for i, m in enumerate(
            ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
        )
    },
    4: {d: i for i, d in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])},
}


class CronError(ValueError):
    """A cron expression or time zone KEDA would refuse."""


def _value(text: str, index: int) -> int:
    names = _NAMES.get(index, {})
    if text.upper() in names:
        return names[text.upper()]
    if not text.isdigit():
        raise CronError(f"{_FIELDS[index][0]} {text!r} is not a number")
    return int(text)


def _field(text: str, index: int) -> tuple[frozenset[int], bool]:
    """The values one field allows, and whether it was ``*`` / ``?`` (unrestricted)."""
    name, low, high = _FIELDS[index]
    values: set[int] = set()
    star = False
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"{name} step {step_text!r} must be a positive number")
            step = int(step_text)
        if body in ("*", "?"):
            if body == "?" and index not in (2, 4):
                raise CronError(f"'?' is only allowed in the day fields, not in {name}")
            first, last = low, high
            star = star or not step_text
        elif "-" in body:
            a, _, b = body.partition("-")
            first, last = _value(a, index), _value(b, index)
        else:
            first = _value(body, index)
            last = high if step_text else first
        if not (low <= first <= high and low <= last <= high) or first > last:
            raise CronError(f"{name} {body!r} is outside {low}-{high}")
        values.update(range(first, last + 1, step))
    return frozenset(values), star


@dataclass(frozen=True)
class Cron:
    """A parsed five-field cron expression."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool
    any_weekday: bool

    @classmethod
    def parse(cls, text: str) -> Cron:
        """``"0 8 * * MON-FRI"``; CronError naming the field that is wrong."""
        fields = text.split()
        if len(fields) != 5:
            raise CronError(
                f"{text!r} has {len(fields)} fields; expected 5: minute hour day-of-month month day-of-week"
            )
        parsed = [_field(f, i) for i, f in enumerate(fields)]
        return cls(
            text,
            parsed[0][0],
            parsed[1][0],
            parsed[2][0],
            parsed[3][0],
            parsed[4][0],
            parsed[2][1],
            parsed[4][1],
        )

    def matches(self, t: dt.datetime) -> bool:
        """Whether the schedule fires at the minute of the local time ``t``."""
        if t.minute not in self.minutes or t.hour not in self.hours or t.month not in self.months:
            return False
        day = t.day in self.days
        weekday = (t.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return day and weekday
        return day or weekday


def time_zone(name: str) -> zoneinfo.ZoneInfo:
    """An IANA time zone (what Go's ``time.LoadLocation`` accepts); CronError if unknown."""
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise CronError(f"unknown time zone {name!r}: use an IANA name such as UTC or Europe/Paris") from None


@dataclass(frozen=True)
class ScheduledFloor:
    """One KEDA cron trigger: ``replicas`` while between ``start`` and ``end`` in ``timezone``."""

    start: str
    end: str
    timezone: str
    replicas: int

    def __post_init__(self) -> None:
        Cron.parse(self.start)
        Cron.parse(self.end)
        time_zone(self.timezone)
        if self.start.split() == self.end.split():
            raise CronError("start and end are the same time; KEDA refuses that")
        if self.replicas < 1:
            raise CronError("replicas must be at least 1 (KEDA refuses desiredReplicas 0)")

    def active(self, epoch_s: float) -> bool:
        """KEDA's test at ``epoch_s``: the next end fires before the next start."""
        minute = int(epoch_s // 60)
        starts, ends = _fire_minutes(self.start, self.end, self.timezone, minute // _CHUNK)
        next_start = _next(starts, minute)
        next_end = _next(ends, minute)
        return next_end < next_start


_CHUNK = 7 * 1440  # fire times are computed a week at a time, with a week of look-ahead


def _next(fires: tuple[int, ...], minute: int) -> float:
    i = bisect.bisect_right(fires, minute)
    return fires[i] if i < len(fires) else float("inf")


@cache
def _fire_minutes(start: str, end: str, zone: str, chunk: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Epoch minutes at which start and end fire, over this chunk and the next (so "next fire"
    is found for any minute of the chunk when the schedule fires at least weekly)."""
    tz = time_zone(zone)
    a, b = Cron.parse(start), Cron.parse(end)
    starts: list[int] = []
    ends: list[int] = []
    for minute in range(chunk * _CHUNK, (chunk + 2) * _CHUNK):
        local = dt.datetime.fromtimestamp(minute * 60, tz)
        if a.matches(local):
            starts.append(minute)
        if b.matches(local):
            ends.append(minute)
    return tuple(starts), tuple(ends)


# Days each month can have (February in a leap year: a schedule for the 29th fires every fourth year).
_MONTH_DAYS = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}


def never_fires(cron: Cron) -> str | None:
    """Why ``cron`` matches no minute in any year, or None. robfig/cron (v3 ``spec.go``
    ``dayMatches``) ANDs day-of-month with day-of-week only when one of them is ``*``: with
    day-of-week ``*`` a day-of-month that no chosen month has (30 February, 31 April) never
    comes, and ``Next`` gives up after five years (``spec.go``: "yearLimit"). Restricting both
    days ORs them, so a weekday still fires."""
    if not cron.any_weekday:
        return None
    if any(day <= _MONTH_DAYS[month] for month in cron.months for day in cron.days):
        return None
    months = ", ".join(str(m) for m in sorted(cron.months))
    days = ", ".join(str(d) for d in sorted(cron.days))
    return f"no month in {{{months}}} has a day {{{days}}}"
