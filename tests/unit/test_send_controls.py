"""Send controls in the sending use case, against in-memory ports (CONTRACT section 16): the frequency
cap refuses with the time its place comes back and never counts a replay, a duplicate or a critical
send; quiet hours hold a message in its recipient's zone (the send's, the phone number's, else the
workspace's) and an edit's new sendAt alike; an expiry is an instant or a validity from sendAt.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from msgspec.structs import replace
from sendonce.api.message_view import message_shape
from sendonce.channels import normalise_recipient
from sendonce.errors import RecipientCapped, TooManyCappedRecipients
from sendonce.limits.model import Limits
from sendonce.messages.edits import MessageChanges
from sendonce.messages.model import Channel, HeldFor, Message, Priority, Status
from sendonce.messages.service import MessageService, SendCommand
from sendonce.status_webhooks.model import Event
from sendonce.status_webhooks.rules import EventType

from tests.unit.unit_fakes import FakeLimits, FakeQueue, InMemoryStore, ManualClock

WS = "ws_a"
PARIS = ZoneInfo("Europe/Paris")
# 22:30 in Paris (CET, UTC+1): inside quiet hours of 21:00-08:00 there.
LATE = datetime(2026, 12, 3, 21, 30, tzinfo=UTC)


def service(store: InMemoryStore, clock: ManualClock, **controls: object) -> MessageService:
    limits = FakeLimits(overrides={WS: Limits(rate_per_second=50, daily_quota=0, **controls)})  # type: ignore[arg-type]
    return MessageService(store, FakeQueue(), timedelta(minutes=15), clock, limits)


def command(body: str = "hello", to: str = "+15550100000", **fields: object) -> SendCommand:
    made = SendCommand(WS, Channel("sms"), normalise_recipient(Channel("sms"), to), body)
    return replace(made, **fields)


def sent(messages: MessageService, made: SendCommand) -> Message:
    result = messages.send(made)
    assert result.created, result
    assert result.message is not None
    return result.message


# ---------------------------------------------------------------------------- the frequency cap
def test_given_a_cap_of_two_then_the_third_message_to_a_recipient_is_refused_with_its_retry_after() -> None:
    clock = ManualClock(datetime(2026, 12, 3, 12, 0, tzinfo=UTC))
    messages = service(InMemoryStore(), clock, per_recipient=2, per_recipient_window=600)
    sent(messages, command("one"))
    clock.advance(30)
    sent(messages, command("two"))

    with pytest.raises(RecipientCapped) as refused:
        messages.send(command("three"))

    # Both counted in 12:00's minute: a place comes back at 12:11, 630 s after 12:00:30.
    assert refused.value.retry_after_seconds == 630
    clock.advance(630)
    sent(messages, command("three"))


def test_given_a_full_cap_then_a_critical_send_and_another_recipient_still_go() -> None:
    clock = ManualClock(LATE)
    messages = service(InMemoryStore(), clock, per_recipient=1, per_recipient_window=3600)
    sent(messages, command("one"))

    critical = sent(messages, command("your code is 1234", priority=Priority.CRITICAL))
    other = sent(messages, command("two", to="+15550100001"))

    assert critical.priority is Priority.CRITICAL
    assert other.status is Status.QUEUED
    with pytest.raises(RecipientCapped):
        messages.send(command("two"))


def test_given_a_cap_then_duplicates_are_answered_and_count_nothing() -> None:
    clock = ManualClock(LATE)
    messages = service(InMemoryStore(), clock, per_recipient=2, per_recipient_window=3600)
    first = sent(messages, command("one"))

    for _ in range(3):
        again = messages.send(command("one"))
        assert again.duplicate
        assert again.message is not None
        assert again.message.id == first.id

    sent(messages, command("two"))  # the second place was still free
    with pytest.raises(RecipientCapped):
        messages.send(command("three"))


def test_given_an_email_to_several_recipients_then_each_of_them_is_counted() -> None:
    clock = ManualClock(LATE)
    messages = service(InMemoryStore(), clock, per_recipient=1, per_recipient_window=3600)
    email = Channel("email")
    to = tuple(normalise_recipient(email, address) for address in ("a@example.com", "b@example.com"))
    sent(messages, SendCommand(WS, email, to[0], "hi", subject="s", to_list=to))

    with pytest.raises(RecipientCapped):
        messages.send(SendCommand(WS, email, to[1], "another", subject="s"))


# ---------------------------------------------------------------------------- quiet hours
def test_given_quiet_hours_then_a_send_within_them_is_held_until_they_end_in_the_phones_zone() -> None:
    clock = ManualClock(LATE)
    messages = service(InMemoryStore(), clock, quiet_hours="21:00-08:00")  # the workspace's zone: UTC

    message = sent(messages, command(to="+33612345678"))  # a French mobile: Europe/Paris

    assert message.status is Status.SCHEDULED
    assert message.held_for is HeldFor.QUIET_HOURS
    assert message.send_at == datetime(2026, 12, 4, 8, 0, tzinfo=PARIS)


def test_given_quiet_hours_then_the_sends_own_zone_comes_first_and_the_workspaces_last() -> None:
    clock = ManualClock(LATE)  # 21:30 UTC, 16:30 in New York
    messages = service(InMemoryStore(), clock, quiet_hours="21:00-08:00", timezone="Asia/Tokyo")

    in_new_york = sent(messages, command("a", to="+33612345678", timezone="America/New_York"))
    us_number = sent(messages, command("b", to="+15550100000"))  # many zones: the workspace's, Tokyo

    assert in_new_york.status is Status.QUEUED  # 16:30 there: not quiet, whatever the number says
    # A US number has many zones: the workspace's, where it is 06:30, quiet until 08:00.
    assert us_number.status is Status.SCHEDULED
    assert us_number.send_at == datetime(2026, 12, 4, 8, 0, tzinfo=ZoneInfo("Asia/Tokyo"))


def test_given_quiet_hours_then_a_critical_send_is_not_held() -> None:
    clock = ManualClock(LATE)
    messages = service(InMemoryStore(), clock, quiet_hours="21:00-08:00", timezone="Europe/Paris")

    message = sent(messages, command(priority=Priority.CRITICAL))

    assert (message.status, message.held_for, message.send_at) == (Status.QUEUED, None, None)


def test_given_quiet_hours_then_a_scheduled_send_is_held_only_when_its_send_at_falls_within_them() -> None:
    clock = ManualClock(datetime(2026, 12, 3, 12, 0, tzinfo=UTC))
    messages = service(InMemoryStore(), clock, quiet_hours="21:00-08:00", timezone="Europe/Paris")

    evening = sent(messages, command("a", send_at=datetime(2026, 12, 3, 18, 0, tzinfo=PARIS)))
    night = sent(messages, command("b", send_at=datetime(2026, 12, 3, 23, 15, tzinfo=PARIS)))

    assert (evening.send_at, evening.held_for) == (datetime(2026, 12, 3, 18, 0, tzinfo=PARIS), None)
    assert (night.send_at, night.held_for) == (datetime(2026, 12, 4, 8, 0, tzinfo=PARIS), HeldFor.QUIET_HOURS)


def test_given_quiet_hours_then_an_edit_moving_send_at_into_them_is_held_and_out_of_them_is_not() -> None:
    clock = ManualClock(datetime(2026, 12, 3, 12, 0, tzinfo=UTC))
    messages = service(InMemoryStore(), clock, quiet_hours="21:00-08:00", timezone="Europe/Paris")
    message = sent(messages, command(send_at=datetime(2026, 12, 3, 18, 0, tzinfo=PARIS)))

    into = messages.edit(WS, message.id, MessageChanges(send_at=datetime(2026, 12, 3, 22, 0, tzinfo=PARIS)))
    out = messages.edit(WS, message.id, MessageChanges(send_at=datetime(2026, 12, 3, 19, 0, tzinfo=PARIS)))

    assert (into.send_at, into.held_for) == (datetime(2026, 12, 4, 8, 0, tzinfo=PARIS), HeldFor.QUIET_HOURS)
    assert (out.send_at, out.held_for) == (datetime(2026, 12, 3, 19, 0, tzinfo=PARIS), None)


# ---------------------------------------------------------------------------- expiry
def test_a_validity_counts_from_send_at_when_given_else_from_acceptance() -> None:
    clock = ManualClock(datetime(2026, 12, 3, 12, 0, tzinfo=UTC))
    messages = service(InMemoryStore(), clock)
    later = clock.now + timedelta(hours=2)

    now_sent = sent(messages, command("a", valid_for_seconds=600))
    scheduled = sent(messages, command("b", valid_for_seconds=600, send_at=later))
    instant = sent(messages, command("c", expires_at=later))

    assert now_sent.expires_at == clock.now + timedelta(minutes=10)
    assert scheduled.expires_at == later + timedelta(minutes=10)
    assert instant.expires_at == later


def test_a_held_messages_scheduled_event_says_why_and_a_scheduled_one_does_not() -> None:
    clock = ManualClock(LATE)
    messages = service(InMemoryStore(), clock, quiet_hours="21:00-08:00", timezone="Europe/Paris")
    held_message = sent(messages, command("held"))
    chosen = sent(messages, command("chosen", send_at=datetime(2026, 12, 4, 10, 0, tzinfo=PARIS)))

    def scheduled_event(message: Message) -> dict[str, object]:
        event = Event("evt_1", WS, message.id, EventType.SCHEDULED, LATE, message_shape(message), 1)
        data: dict[str, object] = event.payload()["data"]
        return data

    assert scheduled_event(held_message)["heldFor"] == "quiet_hours"
    assert "heldFor" not in scheduled_event(chosen)


def test_under_a_cap_a_message_names_at_most_forty_recipients() -> None:
    messages = service(InMemoryStore(), ManualClock(LATE), per_recipient=5, per_recipient_window=3600)
    email = Channel("email")
    to = tuple(normalise_recipient(email, f"person{i}@example.com") for i in range(41))

    with pytest.raises(TooManyCappedRecipients):
        messages.send(SendCommand(WS, email, to[0], "hi", subject="s", to_list=to))
