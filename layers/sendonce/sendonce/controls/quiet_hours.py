"""Quiet hours: when a recipient is not to be disturbed, and until when a message waits.

The invariant: no message is handed over inside its recipient's quiet hours, but a critical one. A
message that would go out inside them is held, and its new `sendAt` is the end of the quiet period
that contains the instant it would have gone out, as a wall clock in the recipient's zone reads it:
the first instant after that one at which the clock shows the window's `end`, but where the clocks
change on the way (below). No instant between the two is outside quiet hours.

A window is of wall-clock times and half-open, [start, end): a message at `start` is held, one at
`end` is not. A window whose start is after its end crosses midnight (21:00-08:00). Whether an
instant is inside is judged by its own wall time in the zone, so both passes through an hour the
clocks repeat are judged alike.

Daylight saving time:
- an `end` the clocks skip that day (a spring-forward gap) ends the period at the instant they jump,
  the first one after the gap;
- an `end` the clocks show twice (an autumn fold) ends it at the first of the two, or at the second
  for a message that would have gone out between them;
- clocks that go back to a time outside the window end the period when they do;
- a gap that swallows all the time between two quiet periods joins them: the hold runs on to the
  second one's end.
A hold is never longer than 25 hours, but in that last case. A zone's offset is taken to change on a
whole second and at most once a day (every zone's does, from 2020 to 2035).

The recipient's zone is the send's own, else its phone number's when that has one zone, else the
workspace's (`recipient_zone`).
"""

from __future__ import annotations

import re
from contextlib import suppress
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from msgspec import Struct

if TYPE_CHECKING:
    pass

_TEXT = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])-([01][0-9]|2[0-3]):([0-5][0-9])")
_FORMAT = "quiet hours must be HH:MM-HH:MM, such as 21:00-08:00"
_DAY = timedelta(days=1)
_SECOND = timedelta(seconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class QuietHours(Struct, frozen=True):
    """A daily window of wall-clock times, to the minute: [start, end), across midnight if start > end."""

    start: time
    end: time

    def __post_init__(self) -> None:
        for moment in (self.start, self.end):
            if moment.tzinfo is not None or moment.second or moment.microsecond or moment.fold:
                raise ValueError("quiet hours are wall-clock times to the minute, without a time zone")
        if self.start == self.end:
            raise ValueError("quiet hours must start and end at different times, such as 21:00-08:00")

    @classmethod
    def parse(cls, text: str) -> QuietHours:
        """From "HH:MM-HH:MM", 24-hour: "21:00-08:00"."""
        matched = _TEXT.fullmatch(text)
        if matched is None:
            raise ValueError(_FORMAT)
        start_hour, start_minute, end_hour, end_minute = (int(part) for part in matched.groups())
        return cls(start=time(start_hour, start_minute), end=time(end_hour, end_minute))

    @property
    def text(self) -> str:
        """ "HH:MM-HH:MM", what `parse` reads."""
        return f"{self.start:%H:%M}-{self.end:%H:%M}"

    def __str__(self) -> str:
        return self.text

    def covers(self, wall: time) -> bool:
        """Whether a (naive) wall-clock time is inside the window."""
        if self.start < self.end:
            return self.start <= wall < self.end
        return wall >= self.start or wall < self.end

    def held_until(self, when: datetime, zone: ZoneInfo) -> datetime | None:
        """The instant (UTC) the quiet period containing `when` ends in `zone`; None outside quiet hours."""
        if when.utcoffset() is None:
            raise ValueError("an instant must be an aware datetime")
        held: datetime | None = None
        moment = when
        # A second turn only when a DST gap swallowed the time between two periods.
        while (until := self._period_end(moment, zone)) is not None:
            held = moment = until
        return held

    def _period_end(self, when: datetime, zone: ZoneInfo) -> datetime | None:
        local = when.astimezone(zone)
        wall = local.time()
        if not self.covers(wall):
            return None
        day = local.date()
        if self.start > self.end and wall >= self.start:
            day += _DAY
        end = _first_showing(day, self.end, zone, after=when)
        if local.utcoffset() != end.astimezone(zone).utcoffset():
            # The clocks changed on the way: going back to before the window ends the period then.
            change = _first_change(when, end, zone)
            if change < end and not self.covers(change.astimezone(zone).time()):
                return change
        return end


def _first_showing(day: date, wall: time, zone: ZoneInfo, *, after: datetime) -> datetime:
    """The first instant later than `after` at which the clock in `zone` shows `wall` on `day`, or
    the instant it jumps over `wall` (UTC)."""
    local = datetime(day.year, day.month, day.day, wall.hour, wall.minute, tzinfo=zone)
    first = local.astimezone(UTC)  # fold=0: the first of two, or past the gap for a skipped one
    if first.astimezone(zone).replace(tzinfo=None) != local.replace(tzinfo=None):
        return _first_change(local.replace(fold=1).astimezone(UTC), first, zone)
    if first > after:
        return first
    second = local.replace(fold=1).astimezone(UTC)
    if second > after:
        return second
    # Only a fold that takes the clocks back across midnight: `day`'s wall time is behind `after`.
    return _first_showing(day + _DAY, wall, zone, after=after)


def _first_change(low: datetime, high: datetime, zone: ZoneInfo) -> datetime:
    """The first instant in (low, high] at which the offset of `zone` is no longer `low`'s, given that
    `high`'s is not (UTC). Offsets change on whole seconds."""
    offset = low.astimezone(zone).utcoffset()
    first, last = (low - _EPOCH) // _SECOND, -((_EPOCH - high) // _SECOND)
    while last - first > 1:
        middle = (first + last) // 2
        if (_EPOCH + middle * _SECOND).astimezone(zone).utcoffset() == offset:
            first = middle
        else:
            last = middle
    return _EPOCH + last * _SECOND


def zone_of(name: str) -> ZoneInfo:
    """An IANA time zone by its name ("Europe/Paris")."""
    if not name or name == "localtime" or name.startswith("/") or ".." in name:
        raise ValueError(f"unknown time zone {name!r}: use an IANA name, such as Europe/Paris")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as error:
        raise ValueError(f"unknown time zone {name!r}: use an IANA name, such as Europe/Paris") from error


def phone_zone(e164: str) -> str | None:
    """The time zone of an E.164 phone number when phonenumbers knows it to be one; else None. Its
    time-zone data is imported on first use: a cold start that needs none never loads it."""
    import phonenumbers  # noqa: PLC0415
    from phonenumbers import timezone  # noqa: PLC0415

    try:
        number = phonenumbers.parse(e164, None)
    except phonenumbers.NumberParseException:
        return None
    zones = timezone.time_zones_for_number(number)
    return zones[0] if len(zones) == 1 and zones[0] != timezone.UNKNOWN_TIMEZONE else None


def recipient_zone(send_timezone: str | None, phone: str | None, workspace_zone: str) -> ZoneInfo:
    """The zone a recipient's quiet hours are read in: the send's own `timezone` when given, else the
    phone number's when it has exactly one, else the workspace's."""
    if send_timezone is not None:
        return zone_of(send_timezone)
    from_phone = phone_zone(phone) if phone is not None else None
    if from_phone is not None:
        with suppress(ValueError):  # a zone this system's tz database lacks
            return zone_of(from_phone)
    return zone_of(workspace_zone)
