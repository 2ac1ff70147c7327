"""Abuse and cost protections in the sending use cases, against in-memory ports (CONTRACT section 18):
destination rules refuse a phone number outside the workspace's countries, or premium-rate or
shared-cost, before anything is written and leaving the key unused; the sms budget counts each
message's segments by its encoding, and only sms; a workspace's retention reaches its messages.
The overrides' item keeps the new values, and an item written before them still reads.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from msgspec.structs import replace
from sendonce.adapters.dynamodb_limits import _change_of, _entry_of
from sendonce.channels import normalise_recipient
from sendonce.controls.destinations import DestinationRules, Refused
from sendonce.errors import DestinationNotAllowed, SmsBudgetExceeded
from sendonce.limits.model import (
    Ledger,
    Limits,
    LimitsChange,
    LimitsTimeline,
    ProtectionChange,
    sms_countries,
)
from sendonce.messages.batch import BatchSender, DestinationRefused
from sendonce.messages.model import Channel
from sendonce.messages.ports import SmsBudgetSpent
from sendonce.messages.service import MessageService, SendCommand, SendResult
from sendonce.settings import ApiSettings, InvalidSettings

from tests.unit.unit_fakes import API_SETTINGS, FakeLimits, FakeQueue, InMemoryStore, ManualClock

WS = "ws_a"
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
US, CANADA, FRANCE = "+14155550100", "+16135550123", "+33612345678"
PREMIUM_RATE = "+19002345678"  # phonenumbers: PREMIUM_RATE (US 900)
SHARED_COST = "+33884012345"  # phonenumbers: SHARED_COST (France 08 84)
# GSM-7: 160 septets in one segment, 153 a segment beyond; UCS-2: 70 units in one, 67 beyond.
TWO_GSM_SEGMENTS = "a" * 161
TWO_UCS2_SEGMENTS = "é" * 60 + "😀" * 6  # 72 UTF-16 units: the emoji makes it UCS-2


def limits(**protections: object) -> FakeLimits:
    return FakeLimits(overrides={WS: Limits(rate_per_second=50, daily_quota=0, **protections)})  # type: ignore[arg-type]


def service(store: InMemoryStore, fake: FakeLimits) -> MessageService:
    return MessageService(store, FakeQueue(), timedelta(minutes=15), ManualClock(NOW), fake)


def command(to: str = US, body: str = "hello", channel: str = "sms", **fields: object) -> SendCommand:
    made = SendCommand(
        WS, Channel(channel), normalise_recipient(Channel(channel), to), body, sms=channel == "sms"
    )
    return replace(made, **fields)


def created(result: SendResult) -> bool:
    return result.created and result.message is not None


# ---------------------------------------------------------------------------- destination rules
def test_given_sms_countries_then_a_number_outside_them_is_refused_and_nothing_is_written() -> None:
    store = InMemoryStore()
    messages = service(store, limits(sms_countries=("CA", "US")))

    assert created(messages.send(command(US)))
    assert created(messages.send(command(CANADA)))
    with pytest.raises(DestinationNotAllowed) as refused:
        messages.send(command(FRANCE))

    assert refused.value.reason == "country_not_allowed"
    assert FRANCE not in {message.to for message in store.messages.values()}
    assert len(store.messages) == 2
    assert len(store.locks) == 2  # no lock taken for the refused one


def test_given_no_countries_then_every_country_goes() -> None:
    messages = service(InMemoryStore(), limits())
    assert all(created(messages.send(command(to))) for to in (US, CANADA, FRANCE))


def test_an_imessage_to_a_phone_number_is_ruled_and_one_to_an_apple_id_is_not() -> None:
    messages = service(InMemoryStore(), limits(sms_countries=("US",)))

    with pytest.raises(DestinationNotAllowed):
        messages.send(command(FRANCE, channel="imessage"))
    assert created(messages.send(command("ann@example.fr", channel="imessage")))
    assert created(messages.send(command(US, channel="imessage")))


@pytest.mark.parametrize(("to", "reason"), [(PREMIUM_RATE, "premium_rate"), (SHARED_COST, "shared_cost")])
def test_premium_rate_and_shared_cost_numbers_are_refused_unless_the_workspace_allows_them(
    to: str, reason: str
) -> None:
    with pytest.raises(DestinationNotAllowed) as refused:
        service(InMemoryStore(), limits()).send(command(to))
    assert refused.value.reason == reason

    assert created(service(InMemoryStore(), limits(allow_premium_numbers=True)).send(command(to)))


def test_the_rules_read_the_country_and_the_type_phonenumbers_gives() -> None:
    rules = DestinationRules(frozenset({"US"}))
    assert rules.refusal([US]) is None
    assert rules.refusal([CANADA]) is Refused.COUNTRY
    assert rules.refusal(["+15550100000"]) is Refused.COUNTRY  # a number phonenumbers places nowhere
    assert DestinationRules().refusal(["+15550100000"]) is None  # no list: only the type counts
    assert DestinationRules().refusal([PREMIUM_RATE]) is Refused.PREMIUM_RATE
    assert DestinationRules(allow_premium_numbers=True).refusal([PREMIUM_RATE, SHARED_COST]) is None


def test_a_refused_send_leaves_its_key_unused_and_a_retry_once_allowed_creates() -> None:
    store, fake = InMemoryStore(), limits(sms_countries=("US",))
    messages = service(store, fake)
    keyed = command(FRANCE, idempotency_key="order-7", payload_fingerprint="fingerprint-7")

    with pytest.raises(DestinationNotAllowed):
        messages.send(keyed)
    assert store.ties == {}  # the key tied to nothing

    fake.overrides[WS] = Limits(rate_per_second=50, daily_quota=0, sms_countries=("FR", "US"))
    retried = messages.send(keyed)
    assert created(retried)
    assert not retried.replayed


def test_a_batch_refuses_the_item_outside_the_rules_and_writes_the_others() -> None:
    store = InMemoryStore()
    sender = BatchSender(store, timedelta(minutes=15), ManualClock(NOW), limits(sms_countries=("US",)))

    outcomes = sender.send_many([command(US), command(FRANCE), command(PREMIUM_RATE)])

    assert isinstance(outcomes[0], SendResult)
    assert outcomes[0].created
    assert isinstance(outcomes[1], DestinationRefused)
    assert outcomes[1].error.reason == "country_not_allowed"
    assert isinstance(outcomes[2], DestinationRefused)
    assert outcomes[2].error.reason == "premium_rate"
    assert len(store.messages) == 1


# ---------------------------------------------------------------------------- the sms budget
def test_the_budget_counts_each_sms_in_the_segments_of_its_encoding() -> None:
    store = InMemoryStore()
    messages = service(store, limits(daily_sms_segments=5))
    day = (WS, NOW.strftime("%Y-%m-%d"))

    assert created(messages.send(command(body=TWO_GSM_SEGMENTS)))
    assert store.segments_used[day] == 2
    assert created(messages.send(command(CANADA, body=TWO_UCS2_SEGMENTS)))
    assert store.segments_used[day] == 4

    with pytest.raises(SmsBudgetExceeded) as refused:
        messages.send(command(FRANCE, body=TWO_GSM_SEGMENTS))  # 2 segments; 1 left
    assert refused.value.retry_after_seconds == 12 * 3600  # to the next midnight, UTC
    assert created(messages.send(command(FRANCE, body="one segment")))
    assert store.segments_used[day] == 5


def test_only_sms_counts_against_the_budget() -> None:
    store = InMemoryStore()
    messages = service(store, limits(daily_sms_segments=1))
    assert created(messages.send(command(body="the one")))

    assert created(messages.send(command(US, body="an imessage", channel="imessage")))
    assert created(messages.send(command("ann@example.com", body="an email", channel="email", subject="Hi")))
    with pytest.raises(SmsBudgetExceeded):
        messages.send(command(CANADA, body="one sms too many"))


def test_a_batch_past_the_budget_gets_its_items_refused_with_the_budget() -> None:
    store = InMemoryStore()
    sender = BatchSender(store, timedelta(minutes=15), ManualClock(NOW), limits(daily_sms_segments=3))

    outcomes = sender.send_many([command(US, body=f"item {i}") for i in range(5)])

    assert [type(outcome).__name__ for outcome in outcomes] == ["SendResult"] * 3 + ["SmsBudgetSpent"] * 2
    assert isinstance(outcomes[3], SmsBudgetSpent)


# ---------------------------------------------------------------------------- retention
def test_a_workspaces_retention_is_kept_on_its_messages() -> None:
    store = InMemoryStore()
    result = service(store, limits(retention_days=30)).send(command())
    assert result.message is not None
    assert result.message.retention_days == 30
    plain = service(InMemoryStore(), limits()).send(command())
    assert plain.message is not None
    assert plain.message.retention_days is None  # the stack's


@pytest.mark.parametrize("days", [0, 366, -1])
def test_a_retention_outside_1_to_365_days_is_refused(days: int) -> None:
    with pytest.raises(ValueError, match="1 to 365 days"):
        ProtectionChange(retention_days=days)


# ---------------------------------------------------------------------------- the values and their item
def test_countries_are_two_letter_codes_kept_upper_case_sorted_once() -> None:
    assert sms_countries("us, ca,US") == ("CA", "US")
    assert sms_countries("") == ()
    with pytest.raises(ValueError, match="alpha-2"):
        sms_countries("USA,C1")


def test_the_settings_give_the_defaults_and_refuse_a_code_that_is_no_country() -> None:
    read = ApiSettings.from_environment(
        {**API_SETTINGS, "SENDONCE_SMS_ALLOWED_COUNTRIES": "us,ca", "SENDONCE_DAILY_SMS_SEGMENTS": "100"}
    )
    assert (read.sms_allowed_countries, read.daily_sms_segments) == ("CA,US", 100)
    assert ApiSettings.from_environment(API_SETTINGS).sms_allowed_countries == ""
    with pytest.raises(InvalidSettings, match="SENDONCE_SMS_ALLOWED_COUNTRIES"):
        ApiSettings.from_environment({**API_SETTINGS, "SENDONCE_SMS_ALLOWED_COUNTRIES": "USA"})


def test_a_change_with_the_protections_is_kept_and_an_item_without_them_still_reads() -> None:
    change = LimitsChange(
        at=1_800_000_000,
        rate_per_second=None,
        daily_quota=None,
        sms_countries=("CA", "US"),
        allow_premium_numbers=False,
        daily_sms_segments=1_000,
        retention_days=30,
    )
    assert _change_of(_entry_of(change)) == change
    everywhere = replace(change, sms_countries=(), allow_premium_numbers=True)
    assert _change_of(_entry_of(everywhere)) == everywhere

    before = {"M": {"at": {"N": "1800000000"}, "rate": {"N": "20"}, "quota": {"NULL": True}}}
    assert _change_of(before) == LimitsChange(1_800_000_000, 20, None)


def test_a_change_of_the_protections_keeps_the_rest_and_none_is_the_default() -> None:
    defaults = Limits(50, 10_000, sms_countries=("US",), daily_sms_segments=500)
    pending = LimitsChange(1_000, 20, None, per_recipient=3, per_recipient_window=600)
    change = ProtectionChange(allow_premium_numbers=True, retention_days=7).applied_to(pending)
    in_force = LimitsTimeline(defaults, (change,)).at(datetime.fromtimestamp(2_000, UTC))

    assert (in_force.rate_per_second, in_force.per_recipient) == (20, 3)
    assert in_force.sms_countries == ("US",)  # not set: the stack's default
    assert in_force.daily_sms_segments == 500
    assert (in_force.allow_premium_numbers, in_force.retention_days) == (True, 7)
    assert in_force.allowance(Ledger.SMS_SEGMENTS) == 500
