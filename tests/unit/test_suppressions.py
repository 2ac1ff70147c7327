"""Suppressions against in-memory ports: STOP keywords, one entry across channels, the list's rules
(a workspace's own entries, the opt-out every workspace shares, a workspace's removal of it), and
the two checks: at send time (nothing written) and at the dispatcher's claim (failed, never sent)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sendonce import channels, composition
from sendonce.api import dependencies
from sendonce.api.app import handle
from sendonce.api.shapes import SuppressionModel
from sendonce.dispatch.dispatcher import Dispatcher, DispatchOutcome, DispatchRequest
from sendonce.dispatch.retry_policy import RetryPolicy
from sendonce.errors import RecipientSuppressed, SuppressionNotFound
from sendonce.messages.batch import BatchSender
from sendonce.messages.model import Channel, Message, Status
from sendonce.messages.ports import Suppressed
from sendonce.messages.recipients import InvalidRecipient
from sendonce.messages.service import MessageService, SendCommand, SendResult
from sendonce.modes import twin_of
from sendonce.provider_events.http_body import HttpProviderEvent
from sendonce.provider_events.model import ProviderEventType, from_ses_notification
from sendonce.suppressions.model import (
    STOP_KEYWORDS,
    Reason,
    Suppression,
    is_stop,
    recipient_key,
    shares_opt_outs,
)
from sendonce.suppressions.service import SuppressionService

from tests.support.lambda_context import FakeLambdaContext
from tests.unit.unit_fakes import (
    T0,
    FakeQueue,
    InMemoryApiKeys,
    InMemoryStore,
    InMemorySuppressions,
    ManualClock,
    fake_api_dependencies,
    key_of,
)

WS, OTHER_WS = "ws_local", "ws_other"
PHONE = "+15550100000"


# ---------------------------------------------------------------------------- STOP keywords
@pytest.mark.parametrize(
    "body", ["STOP", "stop", "Stop", "  STOPALL\n", "unsubscribe", "Cancel", "end", "\tQUIT "]
)
def test_given_an_opt_out_keyword_alone_in_any_case_then_it_is_a_stop(body: str) -> None:
    assert is_stop(body)


@pytest.mark.parametrize(
    "body",
    [
        "",
        "STOP it",
        "stop.",
        "please stop",
        "S TOP",
        "STOPP",
        "\u017ftop",
        "\uff33\uff34\uff2f\uff30",
        "START",
        "HELP",
    ],
)
def test_given_any_other_body_then_it_is_no_stop(body: str) -> None:
    assert not is_stop(body)


@given(st.text(max_size=30))
def test_property_a_body_is_a_stop_exactly_when_it_is_one_keyword_in_ascii_case(body: str) -> None:
    word = body.strip()
    assert is_stop(body) == (word.isascii() and word.upper() in STOP_KEYWORDS)


# ---------------------------------------------------------------------------- one entry, every channel
@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("sms", "+1 (555) 010-0000"), ("imessage", "+15550100000")),
        (("imessage", "+15550100000"), ("sms", "+1 555 010 0000")),
        (("email", "Ann@Example.COM"), ("imessage", "ann@example.com")),
        (("imessage", "ANN@example.com"), ("email", "Ann@example.com")),
    ],
)
def test_given_a_recipient_on_one_channel_then_its_key_is_the_same_on_every_channel_that_reaches_it(
    first: tuple[str, str], second: tuple[str, str]
) -> None:
    one, other = (channels.normalise_recipient(*pair) for pair in (first, second))
    assert one.dedup_form == other.dedup_form == recipient_key(one.address) == recipient_key(other.address)


def test_given_an_address_then_ascii_case_folds_but_nothing_else() -> None:
    assert recipient_key("Ann@x.io") == recipient_key("ann@x.io")
    assert recipient_key("straße@x.io") != recipient_key("strasse@x.io")


# ---------------------------------------------------------------------------- the list's rules
@pytest.fixture
def suppressions(store: InMemoryStore) -> InMemorySuppressions:
    """The list in the store's own table: a send and a claim check it in their write."""
    return store.suppressions


@pytest.fixture
def service(suppressions: InMemorySuppressions, clock: ManualClock) -> SuppressionService:
    return SuppressionService(suppressions, clock=clock)


def test_given_a_manual_entry_then_found_in_any_form_and_on_every_channel(
    service: SuppressionService,
) -> None:
    entry, created = service.add(WS, "sms", "+1 (555) 010-0000")

    assert created
    assert SuppressionModel.of(entry).model_dump(mode="json") == {
        "to": PHONE,
        "reason": "manual",
        "createdAt": "2026-01-01T12:00:00.000Z",
        "messageId": None,
    }
    assert service.get(WS, "+15550100000") == entry
    with pytest.raises(SuppressionNotFound):
        service.get(OTHER_WS, PHONE)


def test_given_a_recipient_already_on_the_list_then_adding_keeps_the_existing_entry_whatever_its_reason(
    service: SuppressionService, suppressions: InMemorySuppressions
) -> None:
    bounced = Suppression("ann@x.io", Reason.BOUNCED, T0, "msg_1")
    suppressions.put(WS, bounced)

    entry, created = service.add(WS, "imessage", "ANN@x.io")

    assert (entry, created) == (bounced, False)


def test_given_an_entry_removed_then_gone_and_a_second_removal_is_not_found(
    service: SuppressionService,
) -> None:
    service.add(WS, "email", "ann@x.io")

    service.remove(WS, "Ann@X.io")

    with pytest.raises(SuppressionNotFound):
        service.get(WS, "ann@x.io")
    with pytest.raises(SuppressionNotFound):
        service.remove(WS, "ann@x.io")


@pytest.mark.parametrize("to", ["", "not a number", "+1", "ann@", "@x.io"])
def test_given_a_malformed_recipient_then_invalid_recipient(service: SuppressionService, to: str) -> None:
    with pytest.raises(InvalidRecipient):
        service.get(WS, to)
    with pytest.raises(InvalidRecipient):
        service.remove(WS, to)


def test_given_an_opt_out_naming_no_message_then_every_workspace_is_subject_until_it_removes_it(
    service: SuppressionService, suppressions: InMemorySuppressions, clock: ManualClock
) -> None:
    suppressions.put(None, Suppression(PHONE, Reason.OPTED_OUT, clock.now))

    assert service.get(WS, PHONE).reason is Reason.OPTED_OUT
    assert service.get(OTHER_WS, PHONE).reason is Reason.OPTED_OUT
    assert [entry.to for entry in service.list(WS, 10, None).suppressions] == [PHONE]

    clock.advance(60)
    service.remove(WS, PHONE)  # the recipient opted back in with this workspace

    with pytest.raises(SuppressionNotFound):
        service.get(WS, PHONE)
    assert service.list(WS, 10, None).suppressions == []
    assert service.get(OTHER_WS, PHONE).reason is Reason.OPTED_OUT  # the others are still subject

    clock.advance(60)
    suppressions.put(None, Suppression(PHONE, Reason.OPTED_OUT, clock.now))  # a new STOP
    assert service.get(WS, PHONE).reason is Reason.OPTED_OUT


def test_given_an_opt_out_naming_no_message_then_a_test_twin_is_not_subject_to_it(
    service: SuppressionService, suppressions: InMemorySuppressions, clock: ManualClock
) -> None:
    suppressions.put(None, Suppression(PHONE, Reason.OPTED_OUT, clock.now))

    assert service.get(WS, PHONE).reason is Reason.OPTED_OUT
    with pytest.raises(SuppressionNotFound):
        service.get(twin_of(WS), PHONE)
    assert service.list(twin_of(WS), 10, None).suppressions == []
    assert shares_opt_outs(WS)
    assert not shares_opt_outs(twin_of(WS))


def test_given_a_workspaces_entry_then_another_workspace_is_not_silenced(
    service: SuppressionService, suppressions: InMemorySuppressions
) -> None:
    suppressions.put(WS, Suppression("ann@x.io", Reason.COMPLAINED, T0, "msg_1"))

    with pytest.raises(SuppressionNotFound):
        service.get(OTHER_WS, "ann@x.io")


# ---------------------------------------------------------------------------- checked at send time
def _command(to: str = PHONE, channel: str = "sms", body: str = "hello", **changes: Any) -> SendCommand:
    return SendCommand(
        workspace_id=WS,
        channel=Channel(channel),
        recipient=channels.normalise_recipient(channel, to),
        body=body,
        subject="Hi" if channel == "email" else None,
        **changes,
    )


def test_given_a_suppressed_recipient_then_a_send_is_refused_and_nothing_is_written(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock, suppressions: InMemorySuppressions
) -> None:
    suppressions.put(WS, Suppression(PHONE, Reason.OPTED_OUT, T0, "msg_0"))
    messages = MessageService(store, queue, timedelta(minutes=15), clock)

    with pytest.raises(RecipientSuppressed) as refused:
        messages.send(_command(to="+1 (555) 010-0000", channel="imessage"))

    assert refused.value.reason == "opted_out"
    assert store.messages == {}
    assert store.locks == {}
    assert suppressions.reads == 0  # no read: checked inside the write that never happened


def test_given_a_recipient_suppressed_only_in_another_workspace_then_the_send_goes_through(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock, suppressions: InMemorySuppressions
) -> None:
    suppressions.put(OTHER_WS, Suppression(PHONE, Reason.MANUAL, T0))
    messages = MessageService(store, queue, timedelta(minutes=15), clock)

    result = messages.send(_command())

    assert result.created  # another workspace's entry silences only that workspace


def test_given_a_batch_naming_a_suppressed_recipient_among_others_then_only_that_item_is_refused(
    store: InMemoryStore, clock: ManualClock, suppressions: InMemorySuppressions
) -> None:
    suppressions.put(WS, Suppression("bounce@x.io", Reason.BOUNCED, T0, "msg_0"))
    sender = BatchSender(store, timedelta(minutes=15), clock, suppressions=suppressions)
    commands = [
        _command(body="one"),
        _command(to="Bounce@x.io", channel="email"),
        _command(body="two"),
        _command(to="bounce@X.io", channel="imessage", body="again"),
    ]

    outcomes = sender.send_many(commands)

    assert outcomes[1] == outcomes[3] == Suppressed("bounced")
    assert all(isinstance(outcomes[i], SendResult) and outcomes[i].created for i in (0, 2))  # type: ignore[union-attr]
    assert {message.to for message in store.messages.values()} == {PHONE}
    assert suppressions.reads == 1  # the whole batch's recipients in one read


# ---------------------------------------------------------------------------- checked at the claim
@dataclass
class CountingProvider:
    name: str = "http"
    honours_idempotency_key: bool = True
    calls: int = 0

    def send(self, message: Message) -> str:
        self.calls += 1
        return "prov-1"


def test_given_a_queued_message_whose_recipient_is_suppressed_then_failed_at_its_claim_and_never_sent(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock, suppressions: InMemorySuppressions
) -> None:
    messages = MessageService(store, queue, timedelta(minutes=15), clock)
    sent = messages.send(_command(send_at=T0 + timedelta(hours=1))).message
    assert sent is not None
    assert sent.status is Status.SCHEDULED
    suppressions.put(None, Suppression(PHONE, Reason.OPTED_OUT, clock.now))  # STOP, naming no message
    clock.advance(3600)
    provider = CountingProvider()
    dispatcher = Dispatcher(
        store=store,
        providers_for=lambda message: (provider,),
        retry_policy=RetryPolicy(max_attempts=3),
        claim_seconds=70,
        clock=clock,
    )

    outcome = dispatcher.dispatch(DispatchRequest(WS, sent.id))

    assert outcome is DispatchOutcome.FAILED
    assert provider.calls == 0
    failed = store.messages[sent.id]
    assert failed.status is Status.FAILED
    assert failed.error is not None
    assert failed.error.code == "recipient_suppressed"
    assert sent.id in store.released  # its dedup lock released, as any failed message's


# ---------------------------------------------------------------------------- provider events
def test_given_an_opted_out_webhook_then_it_names_its_recipient_normalised_and_maybe_a_message() -> None:
    event = HttpProviderEvent.model_validate(
        {
            "eventId": "e1",
            "type": "opted_out",
            "to": "+1 (555) 010-0000",
            "occurredAt": "2026-01-01T00:00:00Z",
        }
    ).to_event("http")

    assert (event.type, event.to, event.message_id) == (ProviderEventType.OPTED_OUT, PHONE, None)
    assert event.suppression_reason is Reason.OPTED_OUT


@pytest.mark.parametrize(
    "body",
    [
        {"eventId": "e1", "type": "opted_out", "occurredAt": "2026-01-01T00:00:00Z"},  # no to
        {"eventId": "e1", "type": "opted_out", "to": "nobody", "occurredAt": "2026-01-01T00:00:00Z"},
        {"eventId": "e1", "type": "delivered", "occurredAt": "2026-01-01T00:00:00Z"},  # no messageId
    ],
)
def test_given_an_event_missing_what_it_speaks_of_then_it_is_refused(body: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"."):
        HttpProviderEvent.model_validate(body)


def _ses(kind: str, **detail: Any) -> dict[str, Any]:
    return {
        "eventType": kind,
        "mail": {
            "messageId": "ses-1",
            "timestamp": "2026-01-01T00:00:00Z",
            "tags": {"sendonce-message-id": ["msg_1"]},
        },
        kind[0].lower() + kind[1:]: {"timestamp": "2026-01-01T00:00:01Z", **detail},
    }


@pytest.mark.parametrize(
    ("notification", "reason"),
    [
        (_ses("Bounce", bounceType="Permanent", bounceSubType="General"), Reason.BOUNCED),
        (_ses("Bounce", bounceType="Transient", bounceSubType="MailboxFull"), None),
        (_ses("Complaint", complaintFeedbackType="abuse"), Reason.COMPLAINED),
        (_ses("Delivery"), None),
    ],
)
def test_given_an_ses_event_then_only_a_permanent_bounce_or_a_complaint_suppresses(
    notification: dict[str, Any], reason: Reason | None
) -> None:
    event = from_ses_notification(notification, "sendonce-message-id")
    assert event is not None
    assert event.suppression_reason is reason
    assert event.message_id == "msg_1"


# ---------------------------------------------------------------------------- the HTTP API
_BASE = json.loads(
    (Path(__file__).resolve().parents[2] / "events" / "api_get_message.json").read_text("utf-8")
)


@pytest.fixture
def api(
    store: InMemoryStore, suppressions: InMemorySuppressions, clock: ManualClock
) -> Iterator[InMemoryStore]:
    messages = MessageService(store, FakeQueue(), timedelta(minutes=15), clock)
    dependencies.root.use(
        fake_api_dependencies(
            messages,
            InMemoryApiKeys.of(WS, OTHER_WS),
            suppressions=SuppressionService(suppressions, clock=clock),
            send_many=BatchSender(store, timedelta(minutes=15), clock, suppressions=suppressions).send_many,
        )
    )
    yield store
    composition.reset_all()


def call(method: str, path: str, body: Any = None, workspace: str = WS) -> tuple[int, dict[str, Any]]:
    event = copy.deepcopy(_BASE)
    event["routeKey"] = event["requestContext"]["routeKey"] = f"{method} {path}"
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    event["headers"]["authorization"] = f"Bearer {key_of(workspace)}"
    event.pop("pathParameters", None)
    if body is not None:
        text = json.dumps(body)
        event["body"] = text
        event["headers"]["content-type"] = "application/json"
        event["headers"]["content-length"] = str(len(text.encode()))
    response = handle(event, FakeLambdaContext())  # type: ignore[arg-type]
    return response["statusCode"], json.loads(response["body"])


def test_api_add_get_list_delete_then_sends_work_again(api: InMemoryStore) -> None:
    status, added = call("POST", "/v1/suppressions", {"channel": "email", "to": "Ann@Example.COM"})
    assert status == 201
    assert added["suppression"]["to"] == "Ann@example.com"
    assert added["suppression"]["reason"] == "manual"
    assert call("POST", "/v1/suppressions", {"channel": "imessage", "to": "ann@example.com"}) == (200, added)

    assert call("GET", "/v1/suppressions/ann%40EXAMPLE.com") == (200, added)
    status, listed = call("GET", "/v1/suppressions")
    assert (status, listed["suppressions"], listed["nextCursor"]) == (200, [added["suppression"]], None)
    assert call("GET", "/v1/suppressions/ann%40example.com", workspace=OTHER_WS)[0] == 404

    message = {"channel": "email", "to": "ann@example.com", "subject": "Hi", "body": "hello"}
    status, refused = call("POST", "/v1/messages", message)
    assert status == 422
    assert refused["error"]["code"] == "recipient_suppressed"
    assert refused["error"]["details"] == {"reason": "manual"}
    assert api.messages == {}

    status, batch = call(
        "POST", "/v1/messages/batch", {"messages": [message, {**message, "to": "bob@example.com"}]}
    )
    assert status == 200
    assert [result["status"] for result in batch["results"]] == [422, 201]
    assert batch["results"][0]["error"]["details"] == {"reason": "manual"}

    assert call("DELETE", "/v1/suppressions/ann%40example.com") == (200, {"success": True})
    assert call("POST", "/v1/messages", message)[0] == 201


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("POST", "/v1/suppressions", {"channel": "sms", "to": "not a number"}, 400, "validation_error"),
        ("POST", "/v1/suppressions", {"channel": "fax", "to": PHONE}, 400, "validation_error"),
        ("POST", "/v1/suppressions", {"channel": "email", "to": "ann@"}, 400, "validation_error"),
        ("POST", "/v1/suppressions", {"to": PHONE}, 400, "validation_error"),
        ("POST", "/v1/suppressions", {"channel": "sms", "to": PHONE, "reason": "x"}, 400, "validation_error"),
        ("GET", "/v1/suppressions/nobody", None, 400, "validation_error"),
        ("DELETE", "/v1/suppressions/%2B1", None, 400, "validation_error"),
        ("DELETE", "/v1/suppressions/%2B15550100000", None, 404, "not_found"),
        ("GET", "/v1/suppressions/bob%40example.com", None, 404, "not_found"),
        ("PUT", "/v1/suppressions/bob%40example.com", None, 405, "method_not_allowed"),
    ],
)
def test_api_bad_input_gets_a_clear_4xx(
    api: InMemoryStore, method: str, path: str, body: Any, status: int, code: str
) -> None:
    answered, answer = call(method, path, body)
    assert (answered, answer["error"]["code"]) == (status, code)
