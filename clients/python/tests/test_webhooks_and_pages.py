"""Webhook verification returns the typed event or raises; lists follow every cursor."""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from client_support import MESSAGE, Api, answer, lost
from sendonce_client import errors, webhooks
from standardwebhooks.webhooks import Webhook

SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
EVENT = {
    "type": "message.delivered",
    "timestamp": "2026-11-30T00:00:01.000Z",
    "data": {"message": {**MESSAGE, "status": "delivered"}, "sequence": 2},
}


def _delivery(at: datetime, secret: str = SECRET) -> tuple[str, dict[str, str]]:
    body = json.dumps(EVENT)
    headers = {
        "Webhook-Id": "evt_1",
        "Webhook-Timestamp": str(int(at.timestamp())),
        "Webhook-Signature": Webhook(secret).sign("evt_1", at, body),
    }
    return body, headers


def test_a_signed_delivery_verifies_to_its_typed_event() -> None:
    body, headers = _delivery(datetime.now(UTC))
    event = webhooks.verify(body.encode(), headers, SECRET)
    assert event.type == "message.delivered"
    assert event.data.message is not None
    assert event.data.message.status == "delivered"
    assert event.data.campaign is None
    assert event.data.sequence == 2


def test_a_campaigns_completion_verifies_to_its_campaign() -> None:
    campaign = {
        "id": "cmp_1",
        "name": "launch",
        "channel": "sms",
        "status": "completed",
        "pausedReason": None,
        "counts": {
            "total": 3,
            "accepted": 2,
            "duplicates": 1,
            "suppressed": 0,
            "invalid": 0,
            "sent": 2,
            "delivered": 1,
            "failed": 0,
        },
        "createdAt": "2026-11-30T00:00:00.000Z",
        "startedAt": "2026-11-30T00:00:00.500Z",
        "completedAt": "2026-11-30T00:00:01.000Z",
    }
    body = json.dumps(
        {**EVENT, "type": "campaign.completed", "data": {"campaign": campaign, "sequence": None}}
    )
    at = datetime.now(UTC)
    headers = {
        "Webhook-Id": "evt_2",
        "Webhook-Timestamp": str(int(at.timestamp())),
        "Webhook-Signature": Webhook(SECRET).sign("evt_2", at, body),
    }

    event = webhooks.verify(body, headers, SECRET)

    assert event.type == "campaign.completed"
    assert event.data.message is None
    assert event.data.campaign is not None
    assert (event.data.campaign.status, event.data.campaign.counts.accepted) == ("completed", 2)
    assert event.data.sequence is None


def test_a_delivery_signed_with_another_secret_is_refused() -> None:
    other = "whsec_" + base64.b64encode(b"another secret, 32 bytes long!!!").decode()
    body, headers = _delivery(datetime.now(UTC), other)
    with pytest.raises(webhooks.WebhookVerificationError):
        webhooks.verify(body, headers, SECRET)


def test_a_tampered_body_is_refused() -> None:
    body, headers = _delivery(datetime.now(UTC))
    with pytest.raises(webhooks.WebhookVerificationError):
        webhooks.verify(body.replace("delivered", "failed"), headers, SECRET)


def test_a_delivery_older_than_the_tolerance_is_refused() -> None:
    body, headers = _delivery(datetime.now(UTC) - timedelta(minutes=10))
    with pytest.raises(webhooks.WebhookVerificationError):
        webhooks.verify(body, headers, SECRET)


def _page(ids: list[str], cursor: str | None) -> dict[str, object]:
    return {"success": True, "messages": [{**MESSAGE, "id": i} for i in ids], "nextCursor": cursor}


def test_list_follows_every_cursor_to_the_last_page(api: Api) -> None:
    api.then(answer(200, _page(["m3", "m2"], "c1")), answer(200, _page(["m1"], None)))
    ids = [message.id for message in api.client().messages.list(status="queued", page_size=2)]
    assert ids == ["m3", "m2", "m1"]
    first, second = api.requests
    assert dict(first.url.params) == {"status": "queued", "limit": "2"}
    assert dict(second.url.params) == {"status": "queued", "limit": "2", "cursor": "c1"}


def test_list_asks_for_one_campaigns_messages(api: Api) -> None:
    api.then(answer(200, _page(["m2"], "c1")), answer(200, _page(["m1"], None)))
    ids = [message.id for message in api.client().messages.list(campaign_id="cmp_1")]
    assert ids == ["m2", "m1"]
    first, second = api.requests
    assert dict(first.url.params) == {"campaignId": "cmp_1"}
    assert dict(second.url.params) == {"campaignId": "cmp_1", "cursor": "c1"}


def test_list_filters_by_channel_and_recipient(api: Api) -> None:
    api.then(answer(200, _page(["m1"], None)))
    ids = [m.id for m in api.client().messages.list(channel="sms", to="+1 555 010 0000")]
    assert ids == ["m1"]
    (sent,) = api.requests
    assert dict(sent.url.params) == {"channel": "sms", "to": "+1 555 010 0000"}


def test_a_timeline_and_the_promise_days_read_back_as_models(api: Api) -> None:
    entry = {
        "at": "2026-01-01T00:00:00.000Z",
        "kind": "webhook_delivery",
        "eventId": "evt_1",
        "responseStatus": 500,
    }
    day = {
        "date": "2026-01-01",
        "newMessages": 3,
        "replays": 1,
        "duplicatesBlocked": 2,
        "refusedSuppressed": 0,
    }
    api.then(
        answer(200, {"success": True, "message": MESSAGE, "timeline": [entry]}),
        answer(200, {"success": True, "days": [day]}),
    )
    client = api.client()

    (found,) = client.messages.timeline("msg_1")
    (counted,) = client.promise(days=1)

    assert (found.kind, found.event_id, found.response_status, found.status) == (
        "webhook_delivery",
        "evt_1",
        500,
        None,
    )
    assert (counted.new_messages, counted.duplicates_blocked) == (3, 2)
    timeline, promise = api.requests
    assert timeline.url.path == "/v1/messages/msg_1/timeline"
    assert (promise.url.path, dict(promise.url.params)) == ("/v1/promise", {"days": "1"})


def test_the_async_list_follows_every_cursor(api: Api) -> None:
    api.then(answer(200, _page(["m2"], "c1")), answer(200, _page(["m1"], None)))

    async def ids() -> list[str]:
        async with api.async_client() as client:
            return [message.id async for message in client.messages.list()]

    assert asyncio.run(ids()) == ["m2", "m1"]


def test_ids_are_sent_url_encoded(api: Api) -> None:
    api.then(answer(200, {"success": True, "message": MESSAGE}))
    api.client().messages.get("msg_1/../x")
    assert api.requests[0].url.raw_path == b"/v1/messages/msg_1%2F..%2Fx"


def test_send_at_is_sent_as_rfc3339_utc(api: Api) -> None:
    api.then(
        answer(201, {"success": True, "status": "scheduled", "duplicateOnly": False, "message": MESSAGE})
    )
    at = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    api.client().messages.send("email", "a@x.io", "hi", subject="s", send_at=at, metadata={"order": "42"})
    sent = json.loads(api.requests[0].content)
    assert sent == {
        "channel": "email",
        "to": "a@x.io",
        "body": "hi",
        "subject": "s",
        "sendAt": "2026-12-01T09:30:00Z",
        "metadata": {"order": "42"},
    }


def test_a_send_from_a_template_names_it_and_its_data_and_reads_the_version(api: Api) -> None:
    shown = {**MESSAGE, "template": {"name": "otp", "version": 2}}
    api.then(answer(201, {"success": True, "duplicateOnly": False, "message": shown}))

    result = api.client().messages.send(
        "sms", "+15550100000", template="otp", template_version=2, data={"code": "1"}, smart_encoding=True
    )

    assert json.loads(api.requests[0].content) == {
        "channel": "sms",
        "to": "+15550100000",
        "template": {"name": "otp", "version": 2},
        "data": {"code": "1"},
        "smartEncoding": True,
    }
    assert result.message is not None
    assert result.message.template is not None
    assert (result.message.template.name, result.message.template.version) == ("otp", 2)


def test_a_client_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from sendonce_client import Client  # noqa: PLC0415

    monkeypatch.delenv("SENDONCE_API_KEY", raising=False)
    with pytest.raises(ValueError, match="API key"):
        Client(transport=httpx.MockTransport(lambda request: httpx.Response(200)))


ENTRY = {"to": "+15550100000", "reason": "manual", "createdAt": "2026-11-30T00:00:00.000Z", "messageId": None}


def test_adding_a_suppression_says_whether_this_call_added_it(api: Api) -> None:
    api.then(
        answer(201, {"success": True, "suppression": ENTRY}),
        answer(200, {"success": True, "suppression": {**ENTRY, "reason": "opted_out"}}),
    )
    client = api.client()
    entry, added = client.suppressions.add("sms", "+1 (555) 010-0000")
    assert (entry.reason, added) == ("manual", True)
    entry, added = client.suppressions.add("sms", "+15550100000")
    assert (entry.reason, added) == ("opted_out", False)


def test_a_suppression_is_named_url_encoded_and_its_removal_is_not_repeated(api: Api) -> None:
    api.then(answer(200, {"success": True, "suppression": ENTRY}), lost())
    client = api.client()
    assert client.suppressions.get("+15550100000").to == "+15550100000"
    assert api.requests[0].url.raw_path == b"/v1/suppressions/%2B15550100000"
    with pytest.raises(errors.ConnectionFailed):
        client.suppressions.remove("+15550100000")
    assert len(api.requests) == 2  # a second removal would answer 404 for the first one's success


def test_an_erasure_is_asked_for_again_after_a_lost_answer_and_read_by_its_id(api: Api) -> None:
    erasure = {"id": "era_1", "status": "pending", "to": None}
    api.then(lost(), answer(202, {"success": True, "erasure": erasure}))
    api.then(answer(200, {"success": True, "erasure": {**erasure, "status": "done"}}))
    client = api.client()
    assert client.erasures.create("+1 (555) 010-0000").status == "pending"
    assert len(api.requests) == 2  # a second erasure of the recipient erases nothing more
    assert json.loads(api.requests[0].content) == {"to": "+1 (555) 010-0000"}
    done = client.erasures.get("era_1")
    assert (done.id, done.status, done.to) == ("era_1", "done", None)
    assert api.requests[2].url.raw_path == b"/v1/erasures/era_1"


def test_test_deliveries_are_read_for_one_message(api: Api) -> None:
    delivery = {
        "messageId": "msg_1",
        "channel": "sms",
        "to": "+15005550003",
        "subject": None,
        "body": "hi",
        "at": "t",
    }
    api.then(answer(200, {"success": True, "deliveries": [delivery]}))
    found = api.client().test_deliveries("msg_1")
    assert [(d.message_id, d.to) for d in found] == [("msg_1", "+15005550003")]
    assert dict(api.requests[0].url.params) == {"messageId": "msg_1"}
