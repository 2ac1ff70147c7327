"""The Twilio provider: what it sends, how it reads each answer, and how it asks Twilio's message list
whether a message whose answer was lost was taken (no socket: `twilio_fakes.FakeOpener`)."""

from __future__ import annotations

import base64
import http.client
import socket
import urllib.error
from datetime import datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from sendonce.dispatch.ports import ProviderThrottled
from sendonce.errors import (
    AmbiguousOutcome,
    DispatchFailure,
    PermanentFailure,
    ProviderRefused,
    ProviderUnreachable,
    TransientFailure,
)
from sendonce.providers import classification
from sendonce.providers.twilio_provider import (
    MAX_ANSWER_BYTES,
    MAX_PAGES,
    PAGE_SIZE,
    TwilioCredentials,
    with_query,
)

from tests.unit.twilio_fakes import (
    ACCOUNT_SID,
    AUTH_TOKEN,
    NOW,
    SENDER,
    SID,
    FakeOpener,
    answering,
    provider,
    raising,
    refusing,
    sms,
    twilio_error,
    twilio_fault,
)

MESSAGES_PATH = f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json"
SERVICE = "MG" + "b" * 32


# ---------------------------------------------------------------------------- send
def test_a_send_posts_the_form_with_basic_auth_and_the_callback_naming_the_message() -> None:
    opener = FakeOpener([answering({"sid": SID, "status": "queued"})])

    provider_id = provider(opener).send(sms(body="héllo & bye"))

    assert provider_id == SID
    [seen] = opener.seen
    assert seen.method == "POST"
    assert seen.url == "https://api.twilio.test" + MESSAGES_PATH
    assert seen.headers["content-type"] == "application/x-www-form-urlencoded"
    assert seen.headers["authorization"] == "Basic " + base64.b64encode(
        f"{ACCOUNT_SID}:{AUTH_TOKEN}".encode()
    ).decode("ascii")
    assert seen.form == {
        "To": ["+15550100000"],
        "Body": ["héllo & bye"],
        "From": [SENDER],
        "StatusCallback": [
            "https://api.sendonce.test/v1/webhooks/twilio?messageId=msg_01JDZ0000000000000000000000"
        ],
    }
    assert seen.timeout == 5.0


def test_a_messaging_service_sender_is_sent_as_messaging_service_sid() -> None:
    opener = FakeOpener([answering({"sid": SID})])

    provider(opener, sender=SERVICE).send(sms())

    assert opener.seen[0].form["MessagingServiceSid"] == [SERVICE]
    assert "From" not in opener.seen[0].form


def test_without_a_callback_url_no_status_callback_is_asked_for() -> None:
    opener = FakeOpener([answering({"sid": SID})])

    provider(opener, callback="").send(sms())

    assert "StatusCallback" not in opener.seen[0].form


def test_a_callback_url_with_a_query_keeps_it() -> None:
    assert (
        with_query("https://h.test/cb?stage=1", messageId="m 1") == "https://h.test/cb?stage=1&messageId=m+1"
    )


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b'{"sid": 12}',
        b'{"sid": ""}',
        b"[]",
        b'{"sid": "' + b"S" * (MAX_ANSWER_BYTES + 1) + b'"}',
    ],
)
def test_a_2xx_is_accepted_whatever_its_body_and_our_id_stands_in_for_an_unreadable_sid(body: bytes) -> None:
    opener = FakeOpener([answering(body)])

    assert provider(opener).send(sms()) == sms().id


def test_without_a_sender_nothing_is_sent_and_the_next_provider_may_take_it() -> None:
    opener = FakeOpener()

    with pytest.raises(ProviderUnreachable):
        provider(opener, sender=" ").send(sms())

    assert opener.seen == []


# Every `twilio` row of the table, met through the real send: the failure its verdict names.
_VERDICT_FAILURE = {
    classification.Verdict.REJECTED: PermanentFailure,
    classification.Verdict.NOT_ACCEPTED: ProviderRefused,
    classification.Verdict.UNREACHABLE: ProviderUnreachable,
    classification.Verdict.THROTTLED: ProviderThrottled,
    classification.Verdict.MAYBE_TAKEN: AmbiguousOutcome,
}
TWILIO_ROWS = [row for row in classification.TABLE if row.provider == "twilio"]


@pytest.mark.parametrize("row", TWILIO_ROWS, ids=lambda row: row.signal)
def test_each_twilio_row_is_what_its_fault_raises(row: classification.Row) -> None:
    failure = twilio_fault(row.signal)

    assert type(failure) is _VERDICT_FAILURE[row.verdict]
    assert row.why in str(failure)


@pytest.mark.parametrize(
    ("reply", "expected", "code"),
    [
        # urllib wraps whatever stops the request being written: nothing can have been taken.
        (
            raising(urllib.error.URLError(socket.gaierror(-2, "Name or service not known"))),
            ProviderUnreachable,
            None,
        ),
        (raising(urllib.error.URLError(TimeoutError("connect timed out"))), ProviderUnreachable, None),
        # Written, then the answer was lost.
        (raising(ConnectionResetError(104, "reset")), AmbiguousOutcome, "provider_timeout"),
        (raising(http.client.RemoteDisconnected("closed")), AmbiguousOutcome, "provider_timeout"),
        (raising(TimeoutError("read timed out")), AmbiguousOutcome, "provider_timeout"),
        (raising(http.client.IncompleteRead(b"")), AmbiguousOutcome, "provider_error"),
        # A redirect is an answer that took nothing, and it is never followed.
        (refusing(302), ProviderRefused, "provider_rejected"),  # a redirect, never followed
        # Twilio's code decides before its status; a code without a row falls back to the status.
        (refusing(400, twilio_error(21211, 400)), PermanentFailure, "provider_rejected"),
        (refusing(400, twilio_error(21606, 400)), ProviderRefused, "provider_rejected"),
        (refusing(400, twilio_error(99999, 400)), PermanentFailure, "provider_rejected"),
        (refusing(401, twilio_error(20003, 401)), ProviderRefused, "provider_rejected"),
        (refusing(429, twilio_error(20429, 429)), ProviderThrottled, "provider_throttled"),
        (refusing(500, twilio_error(20500, 500)), AmbiguousOutcome, "provider_error"),
        (refusing(400, {"code": True}), PermanentFailure, "provider_rejected"),
    ],
)
def test_each_failure_is_read_as_what_it_says_of_the_message(
    reply: Any, expected: type, code: str | None
) -> None:
    with pytest.raises(expected) as raised:
        provider(FakeOpener([reply])).send(sms())

    failure = raised.value
    assert type(failure) is expected
    assert isinstance(failure, DispatchFailure)
    if code is not None:
        assert failure.code == code


def test_a_refusal_never_quotes_twilios_message_which_may_hold_the_number() -> None:
    body = {**twilio_error(21211, 400), "message": "The 'To' number +15550100000 is not valid"}

    with pytest.raises(PermanentFailure) as raised:
        provider(FakeOpener([refusing(400, body)])).send(sms())

    assert "+15550100000" not in str(raised.value)
    assert "21211" in str(raised.value)


# ---------------------------------------------------------------------------- find
SINCE = NOW


def _entry(
    body: str = "hello",
    *,
    created: datetime = NOW + timedelta(seconds=1),
    sid: str = SID,
    sender: str | None = SENDER,
    service: str | None = None,
    direction: str = "outbound-api",
) -> dict[str, Any]:
    return {
        "sid": sid,
        "to": "+15550100000",
        "from": sender,
        "messaging_service_sid": service,
        "body": body,
        "direction": direction,
        "status": "queued",
        "date_created": format_datetime(created),
        "date_sent": None,
    }


def _page(*entries: dict[str, Any], next_page: str | None = None) -> dict[str, Any]:
    return {"messages": list(entries), "next_page_uri": next_page, "page_size": PAGE_SIZE}


def test_find_lists_by_recipient_only_and_answers_the_matching_sid() -> None:
    opener = FakeOpener([answering(_page(_entry("other"), _entry(sid="SMmine")), status=200)])

    found = provider(opener).find(sms(), SINCE)

    assert found == "SMmine"
    [seen] = opener.seen
    assert seen.method == "GET"
    assert seen.path == MESSAGES_PATH
    # No DateSent filter: a message still queued has none, and would be hidden by it.
    assert seen.query == {"To": ["+15550100000"], "PageSize": [str(PAGE_SIZE)]}
    assert seen.headers["authorization"].startswith("Basic ")


@pytest.mark.parametrize(
    "entry",
    [
        _entry("hello "),  # the body must match exactly
        _entry(sender="+15550100998"),  # another sender of the account
        _entry(direction="inbound"),  # the recipient's own message
    ],
)
def test_find_ignores_what_is_not_the_message(entry: dict[str, Any]) -> None:
    opener = FakeOpener([answering(_page(entry), status=200)])

    assert provider(opener).find(sms(), SINCE) is None


def test_find_matches_a_messaging_services_message_on_the_service() -> None:
    entries = _page(
        _entry(sid="SMother", sender=None, service="MGother"), _entry(sender=None, service=SERVICE)
    )
    opener = FakeOpener([answering(entries, status=200)])

    assert provider(opener, sender=SERVICE).find(sms(), SINCE) == SID


def test_find_takes_a_message_created_just_before_since_for_the_clocks_skew() -> None:
    opener = FakeOpener([answering(_page(_entry(created=SINCE - timedelta(seconds=30))), status=200)])

    assert provider(opener).find(sms(), SINCE) == SID


def test_find_stops_at_the_first_message_older_than_the_attempt() -> None:
    older = _entry(sid="SMold", created=SINCE - timedelta(hours=1))
    opener = FakeOpener([answering(_page(_entry("other"), older, next_page="/more"), status=200)])

    assert provider(opener).find(sms(), SINCE) is None
    assert len(opener.seen) == 1  # the next page is older still


def test_find_follows_the_next_page_while_the_messages_are_recent() -> None:
    next_page = f"{MESSAGES_PATH}?To=%2B15550100000&PageSize=50&Page=1&PageToken=PAx"
    opener = FakeOpener(
        [
            answering(_page(*[_entry("other")] * 3, next_page=next_page), status=200),
            answering(_page(_entry(sid="SMsecond")), status=200),
        ]
    )

    assert provider(opener).find(sms(), SINCE) == "SMsecond"
    assert opener.seen[1].url == "https://api.twilio.test" + next_page


def test_find_cannot_tell_past_its_pages() -> None:
    pages = [answering(_page(_entry("other"), next_page=f"/p{n}"), status=200) for n in range(MAX_PAGES)]

    with pytest.raises(AmbiguousOutcome) as raised:
        provider(FakeOpener(pages)).find(sms(), SINCE)

    assert raised.value.code == "provider_lookup_failed"


@pytest.mark.parametrize(
    "reply",
    [
        refusing(500),
        refusing(401, twilio_error(20003, 401)),
        raising(urllib.error.URLError(ConnectionRefusedError(111, "refused"))),
        raising(TimeoutError("timed out")),
        raising(ConnectionResetError(104, "reset")),
        answering(b"not json", status=200),
        answering({"messages": "nope"}, status=200),
        answering(_page(_entry("other"), next_page="https://elsewhere.test/steal"), status=200),
        answering(_page(_entry(sid="")), status=200),
    ],
)
def test_find_raises_when_it_cannot_tell_never_none(reply: Any) -> None:
    with pytest.raises(AmbiguousOutcome) as raised:
        provider(FakeOpener([reply])).find(sms(), SINCE)

    assert raised.value.code == "provider_lookup_failed"


def test_find_keeps_an_entry_whose_date_it_cannot_read() -> None:
    entry = {**_entry(), "date_created": "yesterday-ish"}

    assert provider(FakeOpener([answering(_page(entry), status=200)])).find(sms(), SINCE) == SID


def test_the_provider_is_askable_and_never_repeated() -> None:
    twilio = provider(FakeOpener())

    assert twilio.name == "twilio"
    assert twilio.honours_idempotency_key is False
    assert twilio.visibility_seconds == 10.0


# ---------------------------------------------------------------------------- credentials
def test_credentials_are_read_from_the_secrets_json() -> None:
    credentials = TwilioCredentials.parse('{"accountSid": " ACx ", "authToken": "t0k", "other": 1}')

    assert credentials == TwilioCredentials("ACx", "t0k")
    assert "t0k" not in repr(credentials)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "t0k",
        "[]",
        '{"accountSid": "ACx"}',
        '{"authToken": "t0k"}',
        '{"accountSid": "", "authToken": "t0k"}',
        '{"accountSid": "ACx", "authToken": 5}',
    ],
)
def test_a_secret_that_is_not_the_credentials_json_is_unreachable(value: str) -> None:
    with pytest.raises(ProviderUnreachable) as raised:
        TwilioCredentials.parse(value)

    assert raised.value.code == "provider_credentials_unavailable"
    assert isinstance(raised.value, TransientFailure)  # with no provider left, retried like an outage
    if value:
        assert value not in str(raised.value)
