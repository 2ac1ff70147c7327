"""Email as senders write it, against the in-memory ports: `to` an address or a list, `cc`, `bcc`,
`replyTo` and `html`; recipients de-duplicated across the three lists and counted after that; the
echo of `to` as given; suppressed recipients dropped and named at acceptance, in a batch and at the
claim; and one provider call carrying every recipient left."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError
from sendonce.api.commands import SendMessageRequest, command_of
from sendonce.api.message_view import message_shape
from sendonce.api.shapes import MessageModel
from sendonce.dispatch.dispatcher import Dispatcher, DispatchOutcome, DispatchRequest
from sendonce.dispatch.retry_policy import RetryPolicy
from sendonce.errors import RecipientSuppressed
from sendonce.messages.batch import BatchSender
from sendonce.messages.edits import MessageChanges, edited_payload
from sendonce.messages.model import Channel, Message, Status
from sendonce.messages.ports import Suppressed
from sendonce.messages.service import MessageService, SendResult, lock_of
from sendonce.providers.http_provider import HttpProvider
from sendonce.providers.ses_provider import SesProvider
from sendonce.suppressions.model import Reason, Suppression

from tests.unit.unit_fakes import T0, TEST_KEYED_HASH, FakeQueue, InMemoryStore, ManualClock


def _request(**body: Any) -> SendMessageRequest:
    return SendMessageRequest.model_validate({"channel": "email", "subject": "s", "body": "hi", **body})


def _errors(body: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ValidationError) as caught:
        SendMessageRequest.model_validate(body)
    return {".".join(str(p) for p in error["loc"]) or "body": error["msg"] for error in caught.value.errors()}


def _send(store: InMemoryStore, clock: ManualClock, key: str | None = None, **body: Any) -> SendResult:
    service = MessageService(store=store, queue=FakeQueue(), dedup_window=timedelta(minutes=15), clock=clock)
    payload = {"channel": "email", "subject": "s", "body": "hi", **body}
    return service.send(command_of(_request(**body), "ws_a", key, payload=payload if key else None))


def _suppress(store: InMemoryStore, *addresses: str, reason: Reason = Reason.BOUNCED) -> None:
    for address in addresses:
        store.suppressions.add("ws_a", Suppression(to=address, reason=reason, created_at=T0))


# ---------------------------------------------------------------------------- the request
def test_given_an_address_twice_across_to_cc_and_bcc_then_kept_once_where_it_first_appears() -> None:
    request = _request(
        to=["Ann@X.io", "bob@x.io", "ann@x.io"], cc=["BOB@X.IO", "cy@x.io"], bcc=["CY@x.io", "dee@x.io"]
    )

    assert request.to == ["Ann@x.io", "bob@x.io"]
    assert request.cc == ["cy@x.io"]
    assert request.bcc == ["dee@x.io"]


def test_given_50_recipients_after_de_duplication_then_accepted_and_51_refused() -> None:
    fifty = [f"r{i}@x.io" for i in range(50)]
    _request(to=fifty[:30], cc=fifty[20:45], bcc=[*fifty[40:], *(a.upper() for a in fifty[:10])])

    errors = _errors(
        {"channel": "email", "subject": "s", "body": "hi", "to": fifty[:30], "cc": [*fifty[30:], "one@x.io"]}
    )
    assert list(errors) == ["to"]
    assert (
        errors["to"]
        == "Value error, at most 50 recipients in to, cc and bcc together, once each; these name 51"
    )


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"to": []}, "to"),
        ({"to": [f"r{i}@x.io" for i in range(51)]}, "to"),
        ({"to": ["a@x.io", "not an address"]}, "to"),
        ({"to": 7}, "to"),
        ({"cc": ["a@x.io", 7]}, "cc.1"),
        ({"cc": "a@x.io"}, "cc"),
        ({"bcc": ["nope"]}, "bcc"),
        ({"replyTo": "nope"}, "replyTo"),
        ({"replyTo": ["a@x.io"]}, "replyTo"),
        ({"html": ""}, "html"),
        ({"html": "x" * 200_001}, "html"),
        ({"body": None}, "body"),
    ],
)
def test_given_a_bad_email_field_then_refused_naming_it(changes: dict[str, Any], field: str) -> None:
    body = {"channel": "email", "subject": "s", "body": "hi", "to": "a@x.io", **changes}
    assert field in _errors({k: v for k, v in body.items() if v is not None})


def test_given_html_then_body_may_be_left_out_and_html_is_kept_to_200000_characters() -> None:
    request = _request(to="a@x.io", body=None, html="<p>" + "x" * 199_997)
    command = command_of(request, "ws_a", None)

    assert request.body is None
    assert command.body == ""
    assert command.html is not None
    assert len(command.html) == 200_000
    assert "body" in _errors({"channel": "email", "subject": "s", "to": "a@x.io"})


@pytest.mark.parametrize("channel", ["sms", "imessage"])
@pytest.mark.parametrize(
    "changes",
    [
        {"to": ["+15550100000"]},
        {"cc": ["a@x.io"]},
        {"bcc": ["a@x.io"]},
        {"replyTo": "a@x.io"},
        {"html": "<p>hi</p>"},
    ],
    ids=["to-list", "cc", "bcc", "replyTo", "html"],
)
def test_given_an_email_field_on_another_channel_then_refused_naming_it(
    channel: str, changes: dict[str, Any]
) -> None:
    body = {"channel": channel, "to": "+15550100000", "body": "hi", **changes}
    (name,) = changes
    errors = _errors(body)
    assert name in errors
    assert f"not allowed for {channel}" in errors[name]


# ---------------------------------------------------------------------------- the message
def test_given_one_address_as_a_string_then_the_message_is_exactly_as_before(
    store: InMemoryStore, clock: ManualClock
) -> None:
    result = _send(store, clock, to="Ann@X.io")
    assert result.message is not None
    shown = MessageModel.of(result.message).model_dump(mode="json")

    assert shown["to"] == "Ann@x.io"
    assert not {"cc", "bcc", "replyTo", "html", "suppressedRecipients"} & set(shown)
    assert list(shown) == list(message_shape(result.message))


def test_given_lists_then_the_message_echoes_them_as_accepted(
    store: InMemoryStore, clock: ManualClock
) -> None:
    result = _send(
        store,
        clock,
        to=["Ann@X.io"],
        cc=["ANN@x.io", "bob@x.io"],
        bcc=["cy@x.io"],
        replyTo="Desk@X.io",
        html="<p>hi</p>",
    )
    assert result.message is not None
    shown = MessageModel.of(result.message).model_dump(mode="json")

    assert shown["to"] == ["Ann@x.io"]  # a list of one stays a list
    assert shown["cc"] == ["bob@x.io"]
    assert shown["bcc"] == ["cy@x.io"]
    assert shown["replyTo"] == "Desk@x.io"
    assert shown["html"] == "<p>hi</p>"
    assert "suppressedRecipients" not in shown
    assert store.messages[result.message.id] == result.message


def test_given_the_same_recipients_in_another_order_and_field_then_a_duplicate(
    store: InMemoryStore, clock: ManualClock
) -> None:
    first = _send(store, clock, to=["a@x.io", "b@x.io"], cc=["c@x.io"])
    again = _send(store, clock, to="C@x.io", bcc=["B@X.io", "a@x.io"])

    assert first.created
    assert again.duplicate
    assert again.message is not None
    assert first.message is not None
    assert again.message.id == first.message.id
    assert _send(store, clock, to=["a@x.io", "b@x.io"]).created  # another set: another message


def test_given_one_of_three_suppressed_then_accepted_without_it_and_named(
    store: InMemoryStore, clock: ManualClock
) -> None:
    _suppress(store, "b@x.io")

    result = _send(store, clock, to=["a@x.io", "B@x.io"], cc=["c@x.io"])

    assert result.created
    assert result.message is not None
    shown = MessageModel.of(result.message).model_dump(mode="json")
    assert shown["to"] == ["a@x.io"]
    assert shown["cc"] == ["c@x.io"]
    assert shown["suppressedRecipients"] == ["B@x.io"]
    # Its identity is every recipient it named: a retry is its duplicate, whatever is suppressed since.
    store.suppressions.remove("ws_a", "b@x.io", T0)
    assert _send(store, clock, to=["a@x.io", "B@x.io"], cc=["c@x.io"]).duplicate


def test_given_a_to_string_suppressed_and_a_cc_left_then_to_is_an_empty_list(
    store: InMemoryStore, clock: ManualClock
) -> None:
    _suppress(store, "a@x.io")

    result = _send(store, clock, to="a@x.io", cc=["c@x.io"])

    assert result.message is not None
    shown = MessageModel.of(result.message).model_dump(mode="json")
    assert (shown["to"], shown["cc"], shown["suppressedRecipients"]) == ([], ["c@x.io"], ["a@x.io"])


def test_given_every_recipient_suppressed_then_422_and_nothing_written(
    store: InMemoryStore, clock: ManualClock
) -> None:
    _suppress(store, "a@x.io", reason=Reason.COMPLAINED)
    _suppress(store, "b@x.io")

    with pytest.raises(RecipientSuppressed) as caught:
        _send(store, clock, key="k1", to=["a@x.io"], bcc=["b@x.io"])

    assert caught.value.reason == "complained"  # the first recipient's
    assert store.messages == {}
    assert store.locks == {}
    assert store.ties == {}


def test_given_a_keyed_send_to_a_list_then_its_tie_is_the_set_and_a_retry_replays(
    store: InMemoryStore, clock: ManualClock
) -> None:
    first = _send(store, clock, key="k1", to=["a@x.io", "b@x.io"])
    clock.advance(3600)  # past the dedup window: only the tie answers

    again = _send(store, clock, key="k1", to=["a@x.io", "b@x.io"])

    assert again.replayed
    assert again.message == first.message
    assert len(store.ties) == 1


# ---------------------------------------------------------------------------- a batch
def test_given_batch_items_with_lists_then_each_drops_its_suppressed_or_is_refused(
    store: InMemoryStore, clock: ManualClock
) -> None:
    _suppress(store, "b@x.io", "c@x.io")
    sender = BatchSender(store, timedelta(minutes=15), clock=clock, suppressions=store.suppressions)
    commands = [
        command_of(_request(to=["a@x.io", "b@x.io"]), "ws_a", None),
        command_of(_request(to="c@x.io", cc=["B@x.io"]), "ws_a", None),
        command_of(_request(to=["b@x.io", "a@x.io"]), "ws_a", None),  # the first's set: its duplicate
    ]

    first, second, third = sender.send_many(commands)

    assert isinstance(first, SendResult)
    assert first.created
    assert first.message is not None
    assert (first.message.to_list, first.message.suppressed_recipients) == (("a@x.io",), ("b@x.io",))
    assert second == Suppressed("bounced")
    assert isinstance(third, SendResult)
    assert third.duplicate
    assert third.message is not None
    assert third.message.id == first.message.id


# ---------------------------------------------------------------------------- the claim and providers
@dataclass
class RecordingProvider:
    name: str = "http"
    honours_idempotency_key: bool = True
    calls: list[Message] = field(default_factory=list)

    def send(self, message: Message) -> str:
        self.calls.append(message)
        return "prov-1"


def _dispatch(store: InMemoryStore, clock: ManualClock, message: Message, provider: RecordingProvider) -> Any:
    dispatcher = Dispatcher(
        store, lambda _: (provider,), RetryPolicy(max_attempts=3), claim_seconds=60, clock=clock
    )
    return dispatcher.dispatch(DispatchRequest(workspace_id="ws_a", message_id=message.id))


def test_given_a_recipient_suppressed_after_acceptance_then_the_send_drops_it_and_names_it(
    store: InMemoryStore, clock: ManualClock
) -> None:
    created = _send(store, clock, to=["a@x.io", "b@x.io"], bcc=["c@x.io"]).message
    assert created is not None
    _suppress(store, "c@x.io")
    provider = RecordingProvider()

    assert _dispatch(store, clock, created, provider) is DispatchOutcome.SENT

    (sent,) = provider.calls
    assert (sent.to_list, sent.bcc, sent.suppressed_recipients) == (("a@x.io", "b@x.io"), (), ("c@x.io",))
    assert store.messages[created.id].suppressed_recipients == ("c@x.io",)
    assert store.messages[created.id].status is Status.SENT


def test_given_every_recipient_suppressed_after_acceptance_then_failed_and_never_sent(
    store: InMemoryStore, clock: ManualClock
) -> None:
    created = _send(store, clock, to=["a@x.io"], cc=["b@x.io"]).message
    assert created is not None
    _suppress(store, "a@x.io", "b@x.io")
    provider = RecordingProvider()

    assert _dispatch(store, clock, created, provider) is DispatchOutcome.FAILED

    assert provider.calls == []
    failed = store.messages[created.id]
    assert failed.error is not None
    assert failed.error.code == "recipient_suppressed"


@dataclass
class FakeSes:
    calls: list[dict[str, Any]] = field(default_factory=list)

    def send_email(self, **request: Any) -> dict[str, Any]:
        self.calls.append(request)
        return {"MessageId": "ses-1"}


def _message(**changes: Any) -> Message:
    fields: dict[str, Any] = {
        "id": "msg_1",
        "workspace_id": "ws_a",
        "channel": Channel("email"),
        "to": "a@x.io",
        "body": "hi",
        "subject": "s",
        "status": Status.SENDING,
        "created_at": T0,
        "updated_at": T0,
        **changes,
    }
    return Message(**fields)


def test_given_an_email_with_lists_then_ses_gets_one_call_with_every_recipient_and_part() -> None:
    ses = FakeSes()
    message = _message(
        to_list=("a@x.io", "b@x.io"), cc=("c@x.io",), bcc=("d@x.io",), reply_to="r@x.io", html="<p>"
    )

    SesProvider(ses, "from@x.io").send(message)

    (call,) = ses.calls
    assert call["Destination"] == {
        "ToAddresses": ["a@x.io", "b@x.io"],
        "CcAddresses": ["c@x.io"],
        "BccAddresses": ["d@x.io"],
    }
    assert call["ReplyToAddresses"] == ["r@x.io"]
    assert call["Content"]["Simple"]["Body"] == {
        "Text": {"Data": "hi", "Charset": "UTF-8"},
        "Html": {"Data": "<p>", "Charset": "UTF-8"},
    }


def test_given_a_plain_email_then_ses_gets_the_call_it_always_got() -> None:
    ses = FakeSes()
    SesProvider(ses, "from@x.io").send(_message())

    (call,) = ses.calls
    assert call["Destination"] == {"ToAddresses": ["a@x.io"]}
    assert "ReplyToAddresses" not in call
    assert call["Content"]["Simple"]["Body"] == {"Text": {"Data": "hi", "Charset": "UTF-8"}}


def test_given_html_alone_then_ses_gets_no_text_part() -> None:
    ses = FakeSes()
    SesProvider(ses, "from@x.io").send(_message(body="", html="<p>hi</p>"))

    assert ses.calls[0]["Content"]["Simple"]["Body"] == {"Html": {"Data": "<p>hi</p>", "Charset": "UTF-8"}}


@dataclass
class Opener:
    bodies: list[dict[str, Any]] = field(default_factory=list)

    def open(self, request: Any, timeout: float) -> Any:
        self.bodies.append(json.loads(request.data))
        return _Answer()


class _Answer:
    def __enter__(self) -> _Answer:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def read(self, _: int) -> bytes:
        return b""


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, {"to": "a@x.io"}),
        (
            {
                "to_list": ("a@x.io", "b@x.io"),
                "cc": ("c@x.io",),
                "bcc": (),
                "reply_to": "r@x.io",
                "html": "<p>",
            },
            {"to": ["a@x.io", "b@x.io"], "cc": ["c@x.io"], "bcc": [], "replyTo": "r@x.io", "html": "<p>"},
        ),
    ],
    ids=["plain", "lists"],
)
def test_given_an_email_then_the_http_provider_payload_carries_its_fields_as_accepted(
    changes: dict[str, Any], expected: dict[str, Any]
) -> None:
    opener = Opener()
    HttpProvider("http://provider.invalid", "token", 1.0, opener=opener).send(_message(**changes))

    (body,) = opener.bodies
    assert body == {"messageId": "msg_1", "channel": "email", "subject": "s", "body": "hi", **expected}


# ---------------------------------------------------------------------------- an edit
def test_given_a_scheduled_email_to_a_set_when_its_body_is_edited_then_its_lock_is_the_sets_new_content(
    store: InMemoryStore, clock: ManualClock
) -> None:
    """The lock an edit moves to is the one a new send of the same recipients and content takes,
    suppressed recipients included; its key tie stays the set's."""
    _suppress(store, "c@x.io")
    later = (T0 + timedelta(hours=1)).isoformat()
    sent = _send(store, clock, key="k1", to=["a@x.io", "b@x.io"], bcc=["c@x.io"], sendAt=later)
    assert sent.message is not None
    assert sent.message.suppressed_recipients == ("c@x.io",)
    (tie,) = store.ties
    service = MessageService(store=store, queue=FakeQueue(), dedup_window=timedelta(minutes=15), clock=clock)

    edited = service.edit("ws_a", sent.message.id, MessageChanges(body="changed"))

    same = command_of(_request(to=["c@x.io"], cc=["B@x.io", "a@x.io"], body="changed"), "ws_a", None)
    assert edited.dedup_lock_id == TEST_KEYED_HASH(lock_of(same))
    assert (edited.to_list, edited.bcc, edited.suppressed_recipients) == (
        ("a@x.io", "b@x.io"),
        (),
        ("c@x.io",),
    )
    assert list(store.ties) == [tie]
    assert edited_payload(edited)["to"] == ["a@x.io", "b@x.io"]
