"""Campaigns through `sendonce run` (CONTRACT section 14): a list uploaded with curl to the
presigned URL a create answers, fanned out once per recipient, delivered and counted; the
`campaign.completed` status webhook; repeats of one recipient in an inline list.

Two uploaded lists: one of DELIVERED_RECIPIENTS, each recipient's delivery and message checked
and the delivery counts awaited; one of FANOUT_RECIPIENTS, driven to `completed` and counted. The
local stack's emulator sends about 20 messages a second, fewer as its tables grow, so the large
list's deliveries would take many minutes: its test checks the fan-out, and that whatever was
delivered by its end was delivered once a recipient. It runs last, on a stack of its own: its
thousands of messages keep that stack's dispatchers and streams busy long after the campaign
completes, and would hold up every test after it on the shared one.
"""

from __future__ import annotations

import json
import subprocess
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
from standardwebhooks import Webhook, WebhookVerificationError

from tests.e2e.conftest import API_KEY, OTHER_API_KEY, LocalStack, running_stack
from tests.e2e.e2e_support import call, deliveries, eventually, formatted, unique_body, unique_phone
from tests.support.http_server import Reply, serving

pytestmark = pytest.mark.e2e

# The list driven to `completed` and counted.
FANOUT_RECIPIENTS = 5_000
# The list whose every delivery, message and count is checked.
DELIVERED_RECIPIENTS = 100
# High enough that the pace holds no page back.
RATE_PER_SECOND = 2_000
FANOUT_DEADLINE = 180.0
DELIVERY_DEADLINE = 120.0


@dataclass
class Receiver:
    """A customer's endpoint: verifies every delivery with the standardwebhooks library."""

    secret: str = ""
    received: list[dict[str, Any]] = field(default_factory=list)
    unverified: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def take(self, body: bytes, headers: dict[str, str]) -> int:
        with self.lock:
            try:
                payload = Webhook(self.secret).verify(body, headers)
            except WebhookVerificationError:
                self.unverified += 1
                return 400
            self.received.append({"id": headers["webhook-id"], "payload": payload})
            return 204

    def completions_of(self, campaign_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return [
                r
                for r in self.received
                if r["payload"]["type"] == "campaign.completed"
                and r["payload"]["data"]["campaign"]["id"] == campaign_id
            ]


@pytest.fixture(scope="module")
def receiver(stack: LocalStack) -> Iterator[Receiver]:
    state = Receiver()
    with serving(lambda request: Reply(state.take(request.body, request.headers))) as server:
        state.url = f"{server.url}/hooks"
        created = call(
            stack, "POST", "/v1/webhook-endpoints", {"url": state.url, "eventTypes": ["campaign.completed"]}
        )
        assert created.status_code == 201, created.text
        endpoint = created.json()["endpoint"]
        assert endpoint["eventTypes"] == ["campaign.completed"]
        state.secret = endpoint["secret"]
        try:
            yield state
        finally:
            requests.delete(
                f"{stack.api}/v1/webhook-endpoints/{endpoint['id']}", headers=stack.auth(), timeout=30
            )


@pytest.fixture(scope="module")
def large_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """A stack for the large list alone; the sandbox reports no deliveries (the messages stay `sent`),
    so nothing but the fan-out and the dispatch runs on it."""
    log = tmp_path_factory.mktemp("campaign-stack") / "sendonce-run.log"
    settings = {"SENDONCE_SANDBOX_DELIVERY_EVENTS": "false"}
    keys = (("ws_e2e", API_KEY), ("ws_e2e_other", OTHER_API_KEY))
    with running_stack(log, settings, keys) as local:
        yield local


# ---------------------------------------------------------------- helpers
def _create(stack: LocalStack, body: dict[str, Any]) -> dict[str, Any]:
    answer = call(stack, "POST", "/v1/campaigns", body)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    assert created["campaign"]["status"] == "draft"
    return created


def _upload(url: str, lines: list[dict[str, Any]], directory: Path) -> None:
    """The list PUT with curl, as a customer would: no Content-Type of its own."""
    path = directory / f"recipients-{uuid.uuid4().hex[:8]}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    done = subprocess.run(
        ["curl", "-sS", "--fail-with-body", "-X", "PUT", "--data-binary", f"@{path}", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"curl: {done.returncode} {done.stderr} {done.stdout}"


def _start(stack: LocalStack, campaign_id: str) -> None:
    started = call(stack, "POST", f"/v1/campaigns/{campaign_id}/start")
    assert started.status_code == 202, started.text
    assert started.json()["campaign"]["status"] == "sending"


def _campaign(stack: LocalStack, campaign_id: str) -> dict[str, Any]:
    answer = call(stack, "GET", f"/v1/campaigns/{campaign_id}")
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()["campaign"]
    return found


def _completed(stack: LocalStack, campaign_id: str, timeout: float) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        campaign = _campaign(stack, campaign_id)
        assert campaign["status"] in ("sending", "completed"), campaign
        return campaign if campaign["status"] == "completed" else None

    found: dict[str, Any] = eventually(done, timeout, interval=0.5)
    return found


def _campaign_messages(stack: LocalStack, campaign_id: str) -> list[dict[str, Any]]:
    """Every message of the campaign, through `GET /v1/messages?campaignId=`, page by page."""
    messages: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"campaignId": campaign_id, "limit": 100}
        if cursor:
            params["cursor"] = cursor
        answer = requests.get(f"{stack.api}/v1/messages", params=params, headers=stack.auth(), timeout=30)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        messages.extend(page["messages"])
        cursor = page.get("nextCursor")
        if not cursor:
            return messages


def _errors(stack: LocalStack, campaign_id: str) -> list[dict[str, Any]]:
    answer = call(stack, "GET", f"/v1/campaigns/{campaign_id}/errors")
    assert answer.status_code == 200, answer.text
    errors: list[dict[str, Any]] = answer.json()["errors"]
    return errors


def _distinct_phones(count: int) -> list[str]:
    """`count` distinct +1 415 numbers (E.164), in a block of their own for this run."""
    block = uuid.uuid4().int % 100
    return [f"+1415{block:02d}{n:05d}" for n in range(count)]


def _each_once(addresses: list[str]) -> bool:
    return all(times == 1 for times in Counter(addresses).values())


# ---------------------------------------------------------------- tests
def test_one_recipient_written_three_ways_gets_one_message_and_two_duplicates(stack: LocalStack) -> None:
    phone = unique_phone()
    spellings = [phone, formatted(phone), f"+1 {phone[2:5]} {phone[5:8]} {phone[8:]}"]
    assert len(set(spellings)) == 3
    created = _create(
        stack,
        {
            "name": "three spellings",
            "channel": "sms",
            "body": unique_body("campaign spellings"),
            "recipients": [{"to": to} for to in spellings],
            "ratePerSecond": RATE_PER_SECOND,
        },
    )
    assert "upload" not in created or created["upload"] is None
    campaign_id = created["campaign"]["id"]
    _start(stack, campaign_id)

    campaign = _completed(stack, campaign_id, 60)

    counts = campaign["counts"]
    assert (counts["total"], counts["accepted"], counts["duplicates"]) == (3, 1, 2)
    assert counts["suppressed"] == counts["invalid"] == 0
    messages = _campaign_messages(stack, campaign_id)
    assert [m["to"] for m in messages] == [phone]
    assert messages[0]["campaignId"] == campaign_id
    assert _errors(stack, campaign_id) == []


def test_a_completed_campaign_is_told_once_to_an_endpoint_subscribed_to_it(
    stack: LocalStack, receiver: Receiver
) -> None:
    created = _create(
        stack,
        {
            "name": "told",
            "channel": "sms",
            "body": unique_body("campaign told"),
            "recipients": [{"to": unique_phone()}, {"to": unique_phone()}],
            "ratePerSecond": RATE_PER_SECOND,
        },
    )
    campaign_id = created["campaign"]["id"]
    _start(stack, campaign_id)
    completed = _completed(stack, campaign_id, 60)

    told = eventually(lambda: receiver.completions_of(campaign_id))

    assert len(told) == 1
    payload = told[0]["payload"]
    assert payload["data"]["campaign"]["id"] == campaign_id
    assert payload["data"]["campaign"]["status"] == "completed"
    assert payload["data"]["campaign"]["counts"]["accepted"] == 2
    assert payload["data"]["campaign"]["completedAt"] == completed["completedAt"]
    assert payload["data"]["sequence"] is None
    assert receiver.unverified == 0
    # The endpoint is subscribed to campaign.completed alone: no message's event reached it.
    assert {r["payload"]["type"] for r in receiver.received} == {"campaign.completed"}


def test_an_uploaded_list_is_delivered_to_each_recipient_once_and_counted(
    stack: LocalStack, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:10]
    addresses = [f"r{n}.{tag}@example.com" for n in range(DELIVERED_RECIPIENTS)]
    created = _create(
        stack,
        {
            "name": "uploaded and delivered",
            "channel": "email",
            "subject": "A campaign",
            "body": f"Hello {tag}",
            "ratePerSecond": RATE_PER_SECOND,
        },
    )
    upload = created["upload"]
    assert upload["url"].startswith(stack.aws + "/")  # path-style, on the emulator's host and port
    campaign_id = created["campaign"]["id"]
    _upload(upload["url"], [{"to": to} for to in addresses], tmp_path)
    _start(stack, campaign_id)

    campaign = _completed(stack, campaign_id, FANOUT_DEADLINE)
    assert campaign["counts"]["total"] == campaign["counts"]["accepted"] == DELIVERED_RECIPIENTS

    def delivered() -> list[str] | None:
        seen = [d["to"] for d in deliveries(stack) if d["body"] == f"Hello {tag}"]
        return seen if len(seen) >= DELIVERED_RECIPIENTS else None

    seen = eventually(delivered, DELIVERY_DEADLINE, interval=1.0)
    assert sorted(seen) == sorted(addresses)  # each recipient, once
    messages = _campaign_messages(stack, campaign_id)
    assert sorted(m["to"] for m in messages) == sorted(addresses)
    assert {m["campaignId"] for m in messages} == {campaign_id}

    def counted() -> dict[str, Any] | None:
        counts: dict[str, Any] = _campaign(stack, campaign_id)["counts"]
        return counts if counts["delivered"] >= DELIVERED_RECIPIENTS else None

    counts = eventually(counted, DELIVERY_DEADLINE, interval=1.0)
    assert counts == {
        "total": DELIVERED_RECIPIENTS,
        "accepted": DELIVERED_RECIPIENTS,
        "duplicates": 0,
        "suppressed": 0,
        "invalid": 0,
        "sent": DELIVERED_RECIPIENTS,
        "delivered": DELIVERED_RECIPIENTS,
        "failed": 0,
    }


def test_an_uploaded_list_of_thousands_is_fanned_out_and_counted(
    large_stack: LocalStack, tmp_path: Path
) -> None:
    phones = _distinct_phones(FANOUT_RECIPIENTS)
    body = unique_body("large campaign")
    created = _create(
        large_stack,
        {"name": "large", "channel": "sms", "body": body, "ratePerSecond": RATE_PER_SECOND},
    )
    campaign_id = created["campaign"]["id"]
    _upload(created["upload"]["url"], [{"to": to} for to in phones], tmp_path)
    _start(large_stack, campaign_id)

    campaign = _completed(large_stack, campaign_id, FANOUT_DEADLINE)

    counts = campaign["counts"]
    assert counts["total"] == counts["accepted"] == FANOUT_RECIPIENTS
    assert counts["duplicates"] == counts["suppressed"] == counts["invalid"] == 0
    assert _errors(large_stack, campaign_id) == []
    # The dispatch goes on for minutes; whatever the provider took so far, it took once a recipient.
    sent = [d["to"] for d in deliveries(large_stack) if d["body"] == body]
    assert _each_once(sent)
    assert set(sent) <= set(phones)
