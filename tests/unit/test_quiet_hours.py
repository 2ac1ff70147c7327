"""Quiet hours (sendonce.controls.quiet_hours): a held message is never handed over inside its
recipient's quiet hours, and is held no longer than the quiet period that contains it.

The properties judge an instant by its wall time in the zone, written here again rather than
borrowed from the module; the instants are drawn at random over 2020-2035, and near the zones'
DST transitions with windows whose ends fall in or around the clocks' gaps and folds.
"""

from __future__ import annotations

import subprocess
import sys
import types
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import phonenumbers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sendonce.controls.quiet_hours import QuietHours, phone_zone, recipient_zone, zone_of

PARIS = ZoneInfo("Europe/Paris")
NEW_YORK = ZoneInfo("America/New_York")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")
NIGHT = QuietHours.parse("21:00-08:00")

ZONES = [
    "Europe/Paris",
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kathmandu",
    "Pacific/Chatham",
    "America/St_Johns",
    "UTC",
    "Asia/Tokyo",
    "Africa/Casablanca",
    "America/Santiago",
    "Europe/London",
    "Pacific/Apia",
    "Asia/Tehran",
    "Africa/Cairo",  # clocks jump from 24:00 to 01:00
    "America/Havana",  # clocks go back from 01:00 to 00:00
]
FIRST = datetime(2020, 1, 1)
LAST = datetime(2035, 12, 31, 23, 59, 59)
HOUR = timedelta(hours=1)
SECOND = timedelta(seconds=1)


def local(
    year: int, month: int, day: int, hour: int, minute: int, zone: ZoneInfo, *, fold: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=zone, fold=fold)


def utc(year: int, month: int, day: int, hour: int, minute: int) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


# Parsing


def test_quiet_hours_are_parsed_from_their_start_and_end() -> None:
    assert QuietHours.parse("21:00-08:00") == QuietHours(start=time(21, 0), end=time(8, 0))
    assert QuietHours.parse("00:00-23:59") == QuietHours(start=time(0, 0), end=time(23, 59))


@pytest.mark.parametrize("text", ["21:00-08:00", "13:05-14:45", "00:00-23:59", "23:59-00:00"])
def test_quiet_hours_read_back_as_the_text_they_were_parsed_from(text: str) -> None:
    parsed = QuietHours.parse(text)
    assert parsed.text == text
    assert str(parsed) == text
    assert QuietHours.parse(str(parsed)) == parsed


@pytest.mark.parametrize(
    "text",
    [
        "21:00",
        "25:00-08:00",
        "21:60-08:00",
        "9:00-08:00",
        "21:00 - 08:00",
        "",
        "21:00-08:00\n",
        "\uff12\uff11:00-08:00",  # fullwidth digits
    ],
)
def test_quiet_hours_not_written_as_hh_mm_hh_mm_are_refused_with_an_example(text: str) -> None:
    with pytest.raises(ValueError, match=r"quiet hours must be HH:MM-HH:MM, such as 21:00-08:00"):
        QuietHours.parse(text)


def test_quiet_hours_that_end_when_they_start_are_refused() -> None:
    with pytest.raises(ValueError, match="must start and end at different times"):
        QuietHours.parse("21:00-21:00")


@pytest.mark.parametrize("moment", [time(21, 0, 30), time(21, 0, tzinfo=UTC), time(21, 0, fold=1)])
def test_quiet_hours_are_naive_wall_clock_times_to_the_minute(moment: time) -> None:
    with pytest.raises(ValueError, match="to the minute"):
        QuietHours(start=moment, end=time(8, 0))


# Examples: 21:00-08:00 in Paris, in summer (UTC+2)


def test_a_message_late_in_the_evening_is_held_until_the_next_mornings_end() -> None:
    assert NIGHT.held_until(local(2026, 6, 10, 22, 30, PARIS), PARIS) == utc(2026, 6, 11, 6, 0)


def test_a_message_just_before_the_end_is_held_until_that_mornings_end() -> None:
    assert NIGHT.held_until(local(2026, 6, 10, 7, 59, PARIS), PARIS) == utc(2026, 6, 10, 6, 0)


def test_a_message_at_the_quiet_periods_end_is_not_held() -> None:
    assert NIGHT.held_until(local(2026, 6, 10, 8, 0, PARIS), PARIS) is None


def test_a_message_at_noon_is_not_held() -> None:
    assert NIGHT.held_until(local(2026, 6, 10, 12, 0, PARIS), PARIS) is None


def test_a_message_at_the_quiet_periods_start_is_held() -> None:
    assert NIGHT.held_until(local(2026, 6, 10, 21, 0, PARIS), PARIS) == utc(2026, 6, 11, 6, 0)
    assert NIGHT.held_until(local(2026, 6, 10, 20, 59, PARIS), PARIS) is None


def test_a_message_is_judged_by_its_recipients_wall_clock_whatever_zone_it_comes_in() -> None:
    in_new_york = local(2026, 6, 10, 16, 30, NEW_YORK)  # 22:30 in Paris
    assert NIGHT.held_until(in_new_york, PARIS) == utc(2026, 6, 11, 6, 0)
    assert NIGHT.held_until(in_new_york, NEW_YORK) is None


def test_a_held_message_goes_out_at_an_instant_in_utc() -> None:
    held = NIGHT.held_until(local(2026, 6, 10, 23, 0, PARIS), PARIS)
    assert held is not None
    assert held.tzinfo is UTC


def test_a_window_inside_one_day_holds_messages_until_its_end_that_day() -> None:
    lunch = QuietHours.parse("13:00-14:00")
    assert lunch.held_until(local(2026, 6, 10, 13, 0, PARIS), PARIS) == utc(2026, 6, 10, 12, 0)
    assert lunch.held_until(local(2026, 6, 10, 13, 30, PARIS), PARIS) == utc(2026, 6, 10, 12, 0)
    assert lunch.held_until(local(2026, 6, 10, 12, 59, PARIS), PARIS) is None
    assert lunch.held_until(local(2026, 6, 10, 14, 0, PARIS), PARIS) is None
    assert lunch.held_until(local(2026, 6, 10, 23, 0, PARIS), PARIS) is None


def test_an_instant_without_a_zone_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        NIGHT.held_until(datetime(2026, 6, 10, 22, 30), PARIS)


# Daylight saving time


def test_an_end_the_clocks_skip_in_spring_ends_the_period_when_they_jump() -> None:
    # Paris, 2026-03-29: 02:00 becomes 03:00, so 02:30 never shows; the period ends at 03:00 (01:00 UTC).
    window = QuietHours.parse("01:00-02:30")
    assert window.held_until(local(2026, 3, 29, 1, 15, PARIS), PARIS) == utc(2026, 3, 29, 1, 0)
    assert window.held_until(local(2026, 3, 29, 1, 59, PARIS) + 59 * SECOND, PARIS) == utc(2026, 3, 29, 1, 0)
    assert window.held_until(utc(2026, 3, 29, 1, 0), PARIS) is None  # 03:00


def test_an_end_the_clocks_show_twice_in_autumn_ends_the_period_at_the_first() -> None:
    # Paris, 2026-10-25: 03:00 becomes 02:00 again; the first 02:30 is 00:30 UTC, the second 01:30 UTC.
    window = QuietHours.parse("00:00-02:30")
    assert window.held_until(local(2026, 10, 25, 1, 0, PARIS), PARIS) == utc(2026, 10, 25, 0, 30)
    assert window.held_until(local(2026, 10, 25, 2, 10, PARIS), PARIS) == utc(2026, 10, 25, 0, 30)


def test_a_message_in_the_repeated_hour_is_held_until_the_end_shows_again() -> None:
    window = QuietHours.parse("00:00-02:30")
    second_pass = local(2026, 10, 25, 2, 10, PARIS, fold=1)  # 01:10 UTC
    assert window.held_until(second_pass, PARIS) == utc(2026, 10, 25, 1, 30)
    assert window.held_until(local(2026, 10, 25, 2, 45, PARIS), PARIS) is None  # the first 02:45


def test_both_passes_through_a_repeated_hour_are_judged_by_their_wall_time() -> None:
    window = QuietHours.parse("02:00-02:30")
    assert window.held_until(utc(2026, 10, 25, 0, 15), PARIS) == utc(2026, 10, 25, 0, 30)  # the first 02:15
    assert window.held_until(utc(2026, 10, 25, 1, 15), PARIS) == utc(2026, 10, 25, 1, 30)  # the second 02:15


def test_new_yorks_spring_gap_and_autumn_fold_end_periods_alike() -> None:
    # 2026-03-08: 02:00 becomes 03:00 (07:00 UTC); 2026-11-01: 02:00 becomes 01:00.
    spring = QuietHours.parse("01:00-02:30")
    assert spring.held_until(local(2026, 3, 8, 1, 30, NEW_YORK), NEW_YORK) == utc(2026, 3, 8, 7, 0)
    autumn = QuietHours.parse("00:00-01:30")
    assert autumn.held_until(local(2026, 11, 1, 0, 30, NEW_YORK), NEW_YORK) == utc(2026, 11, 1, 5, 30)
    assert autumn.held_until(local(2026, 11, 1, 1, 10, NEW_YORK, fold=1), NEW_YORK) == utc(2026, 11, 1, 6, 30)


def test_clocks_that_go_back_to_before_the_window_end_the_period_when_they_do() -> None:
    # Paris, 2026-10-25: at 02:45 (00:45 UTC) the clocks are 15 minutes from 03:00, but go back to
    # 02:00 at 01:00 UTC, outside 02:30-03:00 until it shows 02:30 again (01:30 UTC).
    window = QuietHours.parse("02:30-03:00")
    assert window.held_until(utc(2026, 10, 25, 0, 45), PARIS) == utc(2026, 10, 25, 1, 0)
    assert window.held_until(utc(2026, 10, 25, 1, 45), PARIS) == utc(2026, 10, 25, 2, 0)


def test_lord_howes_half_hour_of_daylight_saving_ends_periods_alike() -> None:
    # 2026-10-04: 02:00 becomes 02:30 (+10:30 to +11); 2026-04-05: 02:00 becomes 01:30 (+11 to +10:30).
    spring = QuietHours.parse("01:00-02:15")
    assert spring.held_until(local(2026, 10, 4, 1, 30, LORD_HOWE), LORD_HOWE) == utc(2026, 10, 3, 15, 30)
    autumn = QuietHours.parse("00:00-01:45")
    assert autumn.held_until(local(2026, 4, 5, 1, 0, LORD_HOWE), LORD_HOWE) == utc(2026, 4, 4, 14, 45)
    second_pass = local(2026, 4, 5, 1, 35, LORD_HOWE, fold=1)
    assert autumn.held_until(second_pass, LORD_HOWE) == utc(2026, 4, 4, 15, 15)


def test_an_end_in_a_gap_at_midnight_ends_the_period_when_the_clocks_jump() -> None:
    # Cairo, 2026-04-24: 00:00 becomes 01:00 (22:00 UTC the day before).
    cairo = ZoneInfo("Africa/Cairo")
    window = QuietHours.parse("22:00-00:30")
    assert window.held_until(local(2026, 4, 23, 23, 0, cairo), cairo) == utc(2026, 4, 23, 22, 0)


def test_a_gap_that_swallows_the_time_between_two_periods_joins_them() -> None:
    # Quiet but for 02:30-02:45, which Paris skips on 2026-03-29: the hold runs to the 30th's 02:30.
    window = QuietHours.parse("02:45-02:30")
    assert window.held_until(local(2026, 3, 28, 3, 0, PARIS), PARIS) == utc(2026, 3, 30, 0, 30)


# Properties

minutes = st.integers(min_value=0, max_value=24 * 60 - 1).map(lambda minute: time(minute // 60, minute % 60))
windows = (
    st.tuples(minutes, minutes).filter(lambda ends: ends[0] != ends[1]).map(lambda ends: QuietHours(*ends))
)
instants = st.datetimes(min_value=FIRST, max_value=LAST, timezones=st.just(UTC))
zones = st.sampled_from(ZONES).map(ZoneInfo)
fractions = st.lists(
    st.floats(min_value=0, max_value=1, exclude_min=True, exclude_max=True), min_size=1, max_size=8
)


@cache
def transitions(name: str) -> tuple[datetime, ...]:
    """The instants (UTC) at which `name`'s offset from UTC changes, 2020-2035."""
    zone = ZoneInfo(name)
    found = []
    day = datetime(2020, 1, 1, tzinfo=UTC)
    while day.year < 2036:
        following = day + timedelta(days=1)
        if day.astimezone(zone).utcoffset() != following.astimezone(zone).utcoffset():
            low, high = day, following
            while high - low > SECOND:
                middle = low + (high - low) // 2
                if middle.astimezone(zone).utcoffset() == following.astimezone(zone).utcoffset():
                    high = middle
                else:
                    low = middle
            found.append(high)
        day = following
    return tuple(found)


@st.composite
def around_transitions(draw: st.DrawFn) -> tuple[QuietHours, datetime, ZoneInfo]:
    """An instant within a day of one of a zone's transitions, and a window whose start and end are
    near the wall times the clocks leave and jump to there."""
    name = draw(st.sampled_from([name for name in ZONES if transitions(name)]))
    zone = ZoneInfo(name)
    transition = draw(st.sampled_from(transitions(name)))
    when = transition + draw(st.integers(min_value=-26 * 3600, max_value=26 * 3600)) * SECOND
    left = (transition - SECOND).astimezone(zone)
    near = st.integers(min_value=-90, max_value=90).map(
        lambda shift: time(*divmod((left.hour * 60 + left.minute + 1 + shift) % (24 * 60), 60))
    )
    start, end = draw(
        st.tuples(st.one_of(near, minutes), st.one_of(near, minutes)).filter(lambda e: e[0] != e[1])
    )
    return QuietHours(start, end), when, zone


def wall(moment: datetime, zone: ZoneInfo) -> time:
    return moment.astimezone(zone).time()


def is_quiet(window: QuietHours, moment: datetime, zone: ZoneInfo) -> bool:
    clock = wall(moment, zone)
    if window.start < window.end:
        return window.start <= clock < window.end
    return clock >= window.start or clock < window.end


def skipped(day: date, clock: time, zone: ZoneInfo) -> bool:
    """Whether the clocks in `zone` never show `clock` on `day`."""
    shown = datetime.combine(day, clock, tzinfo=zone)
    return shown.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != shown.replace(tzinfo=None)


def days_between(first: datetime, last: datetime, zone: ZoneInfo) -> Iterator[date]:
    day = first.astimezone(zone).date()
    while day <= last.astimezone(zone).date():
        yield day
        day += timedelta(days=1)


def check_hold(window: QuietHours, when: datetime, zone: ZoneInfo, fractions: list[float]) -> None:
    held = window.held_until(when, zone)
    # a) held exactly when inside the window, as the recipient's wall clock reads it
    assert (held is None) == (not is_quiet(window, when, zone))
    if held is None:
        return
    # b) later, by no more than a day and the hour a fold adds; at the window's end, or at the
    # instant the clocks jump over it, or go back to a time outside the window
    assert held > when
    assert held.utcoffset() == timedelta(0)
    ends_on = held.astimezone(zone)
    if ends_on.time() != window.end:
        offset_before, offset_after = (held - SECOND).astimezone(zone).utcoffset(), ends_on.utcoffset()
        assert offset_before is not None
        assert offset_after is not None
        assert offset_before != offset_after  # at a transition
        if offset_before < offset_after:  # forward, over the end
            assert skipped(ends_on.date(), window.end, zone)
            assert ends_on.time() > window.end
    if held - when > 25 * HOUR:  # only when a gap swallowed the time between two periods
        assert any(skipped(day, window.end, zone) for day in days_between(when, held, zone))
    # c) a held message goes out outside quiet hours
    assert window.held_until(held, zone) is None
    assert not is_quiet(window, held, zone)
    # d) and no later than it must: every instant before then is quiet
    for fraction in fractions:
        between = when + (held - when) * fraction
        if when < between < held:
            assert is_quiet(window, between, zone)


@settings(max_examples=300, deadline=None)
@given(window=windows, when=instants, zone=zones, fractions=fractions)
def test_a_held_message_goes_out_at_the_first_instant_outside_its_quiet_hours(
    window: QuietHours, when: datetime, zone: ZoneInfo, fractions: list[float]
) -> None:
    check_hold(window, when, zone, fractions)


@settings(max_examples=300, deadline=None)
@given(case=around_transitions(), fractions=fractions)
def test_a_held_message_goes_out_at_the_first_instant_outside_its_quiet_hours_across_dst_transitions(
    case: tuple[QuietHours, datetime, ZoneInfo], fractions: list[float]
) -> None:
    window, when, zone = case
    check_hold(window, when, zone, fractions)


# Zones


def test_a_zone_is_found_by_its_iana_name() -> None:
    assert zone_of("Europe/Paris") == PARIS


@pytest.mark.parametrize(
    "name",
    [
        "Mars/Olympus",
        "",
        "../etc/passwd",
        "localtime",
        "/etc/localtime",
        "Europe",
        "Europe//Paris",
        "zone.tab",
    ],
)
def test_a_name_that_is_no_iana_zone_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="unknown time zone"):
        zone_of(name)


# Phone numbers' zones


def fake_zone_data(numbers: dict[int, tuple[str, ...]]) -> types.ModuleType:
    """A stand-in for `phonenumbers.timezone`: the zones of each country code."""
    module = types.ModuleType("phonenumbers.timezone")
    module.UNKNOWN_TIMEZONE = "Etc/Unknown"  # type: ignore[attr-defined]
    module.time_zones_for_number = lambda number: numbers.get(number.country_code, ("Etc/Unknown",))  # type: ignore[attr-defined]
    return module


@pytest.fixture
def zone_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """Phone numbers' zones from a stand-in, by country code, whichever phonenumbers package is installed."""
    fake = fake_zone_data(
        {
            33: ("Europe/Paris",),
            1: ("America/New_York", "America/Chicago"),
            44: ("Etc/Unknown",),
            61: ("Mars/Olympus",),
        }
    )
    monkeypatch.setitem(sys.modules, "phonenumbers.timezone", fake)
    monkeypatch.setattr(phonenumbers, "timezone", fake, raising=False)


@pytest.mark.usefixtures("zone_data")
def test_a_phone_number_in_a_country_of_one_zone_gives_that_zone() -> None:
    assert phone_zone("+33612345678") == "Europe/Paris"


@pytest.mark.usefixtures("zone_data")
def test_a_phone_number_of_several_zones_or_an_unknown_one_gives_none() -> None:
    assert phone_zone("+14155550100") is None
    assert phone_zone("+447700900123") is None


@pytest.mark.usefixtures("zone_data")
@pytest.mark.parametrize("text", ["not a number", "", "+", "0612345678"])
def test_what_is_not_a_phone_number_gives_no_zone(text: str) -> None:
    assert phone_zone(text) is None


def test_phonenumbers_places_a_number_in_its_one_zone_or_nowhere() -> None:
    assert phone_zone("+33612345678") == "Europe/Paris"
    assert phone_zone("+14155550100") == "America/Los_Angeles"  # San Francisco's area code
    assert phone_zone("+18002530000") is None  # toll-free: all of the North American zones
    assert phone_zone("+79161234567") is None  # a Russian mobile: all of Russia's
    assert phone_zone("+447700900123") is None  # Etc/Unknown
    assert phone_zone("not a number") is None


@pytest.mark.usefixtures("zone_data")
def test_the_sends_own_time_zone_comes_before_the_phone_numbers() -> None:
    assert recipient_zone("America/New_York", "+33612345678", "Asia/Tokyo") == NEW_YORK


@pytest.mark.usefixtures("zone_data")
def test_the_phone_numbers_single_zone_comes_before_the_workspaces() -> None:
    assert recipient_zone(None, "+33612345678", "Asia/Tokyo") == PARIS


@pytest.mark.usefixtures("zone_data")
@pytest.mark.parametrize("phone", [None, "+14155550100", "+447700900123", "+61491570006", "not a number"])
def test_without_a_zone_of_its_own_or_its_phone_numbers_a_recipient_is_in_the_workspaces(
    phone: str | None,
) -> None:
    assert recipient_zone(None, phone, "Asia/Tokyo") == ZoneInfo("Asia/Tokyo")


def test_importing_quiet_hours_loads_no_phone_number_library() -> None:
    script = (
        "import sys, sendonce.controls.quiet_hours\n"
        "print(sorted(name for name in sys.modules if 'phonenumbers' in name))"
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "[]"
