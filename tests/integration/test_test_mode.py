"""Test mode against moto, through the real handlers: the twins are apart (keys, locks, messages,
endpoints, usage), a test message reaches the simulator and no provider client is ever built for it,
the simulator's reports are applied as provider events, and test data expires after 7 days."""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from sendonce import aws_clients
from sendonce.aws_clients import Clients
from sendonce.entrypoints.dispatch import build as build_dispatcher
from sendonce.entrypoints.shared.provider_registry import PROVIDERS
from sendonce.messages.model import Message
from sendonce.modes import twin_of
from sendonce.provider_events.model import SIMULATOR, ProviderEvent, ProviderEventType
from sendonce.settings import DispatcherSettings
from sendonce_cli.main import main

from tests.integration.conftest import (
    WORKSPACE,
    ApiAnswer,
    FakeHttpProvider,
    FakeLambdaContext,
    Stack,
    function,
    sqs_event,
)

TWIN = twin_of(WORKSPACE)
REPORTS_DEADLINE_SECONDS = 15


def _api(stack: Stack, method: str, path: str, workspace: str, body: Any = None, **kw: Any) -> ApiAnswer:
    name = "api_send_sms.json" if body is not None else "api_get_message.json"
    extra = {"body": body} if body is not None else {}
    return stack.call(stack.event(name, method=method, path=path, workspace=workspace, **extra, **kw))


def _send(stack: Stack, workspace: str, body: dict[str, Any], key: str | None = None) -> dict[str, Any]:
    name = {"sms": "api_send_sms.json", "imessage": "api_send_imessage.json", "email": "api_send_email.json"}
    answer = stack.send(name[body["channel"]], body=body, workspace=workspace, key=key)
    assert answer.status == 201, answer.raw_body
    message: dict[str, Any] = answer.json["message"]
    return message


def _apply_events(stack: Stack, count: int) -> dict[str, Any]:
    """`count` records of the events queue fed to the status function, as its event source mapping
    would, once they are visible (the simulator reports a second after the call)."""
    records: list[dict[str, Any]] = []
    deadline = time.monotonic() + REPORTS_DEADLINE_SECONDS
    while len(records) < count and time.monotonic() < deadline:
        records.extend(stack.receive("events"))
        time.sleep(0.1)
    assert len(records) == count, records
    event = sqs_event(records, stack.queue_arn("events"))
    result: dict[str, Any] = function("status").handler(event, FakeLambdaContext(function_name="status"))
    return result


def _deliveries(stack: Stack, workspace: str, message_id: str | None = None) -> ApiAnswer:
    query = {"messageId": message_id} if message_id else None
    return _api(stack, "GET", "/v1/test/deliveries", workspace, query=query)


# ---------------------------------------------------------------------------- isolation
def test_the_twins_never_see_nor_block_each_other(stack: Stack) -> None:
    sms = {"channel": "sms", "to": "+15550100077", "body": "same content, same key"}
    live = _send(stack, WORKSPACE, sms, key="order-1")
    test = _send(stack, TWIN, sms, key="order-1")  # neither the lock nor the key is the live one's

    assert live["id"] != test["id"]
    for workspace, mine, theirs in ((WORKSPACE, live, test), (TWIN, test, live)):
        assert _api(stack, "GET", f"/v1/messages/{mine['id']}", workspace).status == 200
        assert _api(stack, "GET", f"/v1/messages/{theirs['id']}", workspace).status == 404
        assert _api(stack, "DELETE", f"/v1/messages/{theirs['id']}", workspace).status == 404
        listed = _api(stack, "GET", "/v1/messages", workspace).json["messages"]
        assert [m["id"] for m in listed] == [mine["id"]]
        # Within each twin, the guard and the key work as in live mode.
        again = stack.send("api_send_sms.json", body=sms, workspace=workspace, key="order-1")
        assert again.header("Idempotency-Replayed") == "true"
        assert again.json["message"]["id"] == mine["id"]
        duplicate = stack.send("api_send_sms.json", body=sms, workspace=workspace)
        assert duplicate.status == 200
        assert duplicate.json["duplicateOnly"] is True


def test_endpoints_and_usage_are_each_twins_own(stack: Stack) -> None:
    stack.setenv("SENDONCE_WEBHOOK_ALLOW_PRIVATE_TARGETS", "true")
    added = _api(stack, "POST", "/v1/webhook-endpoints", TWIN, body={"url": "http://127.0.0.1:9/test-hooks"})
    assert added.status == 201, added.raw_body
    endpoint = added.json["endpoint"]["id"]
    _send(stack, TWIN, {"channel": "sms", "to": "+15550100078", "body": "counted in the twin"})

    assert _api(stack, "GET", "/v1/webhook-endpoints", WORKSPACE).json["endpoints"] == []
    assert _api(stack, "GET", f"/v1/webhook-endpoints/{endpoint}", WORKSPACE).status == 404
    assert [e["id"] for e in _api(stack, "GET", "/v1/webhook-endpoints", TWIN).json["endpoints"]] == [
        endpoint
    ]
    assert _api(stack, "GET", "/v1/usage", TWIN).json["quota"]["usedToday"] == 1
    assert _api(stack, "GET", "/v1/usage", WORKSPACE).json["quota"]["usedToday"] == 0


def test_create_api_key_test_issues_a_key_of_the_twin(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = ["--endpoint-url", os.environ["AWS_ENDPOINT_URL"]]
    assert main(["create-api-key", "--workspace", "ws_cli", "--test", *endpoint]) == 0
    key = capsys.readouterr().out.strip()
    assert key.startswith("sk_test_")

    body = {"channel": "sms", "to": "+15550100083", "body": "from a new test key"}
    sent = stack.call(stack.event("api_send_sms.json", body=body, headers={"Authorization": f"Bearer {key}"}))
    assert sent.status == 201, sent.raw_body
    message_id = sent.json["message"]["id"]
    assert _api(stack, "GET", f"/v1/messages/{message_id}", twin_of("ws_cli")).status == 200
    assert _api(stack, "GET", f"/v1/messages/{message_id}", "ws_cli").status == 404
    # A twin is named by its live workspace: its own id is refused, and nothing is stored.
    assert main(["create-api-key", "--workspace", twin_of("ws_cli"), *endpoint]) == 2


# ---------------------------------------------------------------------------- no provider, ever
@pytest.fixture
def spied_providers(stack: Stack) -> dict[str, list[str]]:
    """Every live provider of the registry replaced by a spy in the dispatchers' roots, built here
    with clients that count themselves: what was built, what it was given, which clients."""
    seen: dict[str, list[str]] = {"built": [], "sent": []}

    class Spy:
        honours_idempotency_key = True

        def __init__(self, name: str) -> None:
            self.name = name

        def send(self, message: Message) -> str:
            seen["sent"].append(message.id)
            return f"{self.name}-{message.id}"

    def spy(name: str) -> Any:
        def build(settings: DispatcherSettings, clients: Clients) -> Spy:
            seen["built"].append(name)
            return Spy(name)

        return build

    clients: list[str] = seen.setdefault("clients", [])

    def client(service: str, **options: Any) -> Any:
        clients.append(service)
        return aws_clients.client(service, **options)

    stack.setenv("SENDONCE_EMAIL_PROVIDER", "ses")  # set first: a setting changed forgets every root
    settings = DispatcherSettings.from_environment()
    spies = {name: spy(name) for name in PROVIDERS}
    for channel in ("sms", "imessage", "email"):
        function(f"dispatch_{channel}").root.use(build_dispatcher(channel, settings, client, live=spies))
    return seen


def test_no_provider_client_is_ever_built_for_a_test_message(
    stack: Stack, spied_providers: dict[str, list[str]]
) -> None:
    bodies = [
        {"channel": "sms", "to": "+15550100079", "body": "test sms"},
        {"channel": "imessage", "to": "+15550100079", "body": "test imessage"},
        {"channel": "email", "to": "ann@example.com", "subject": "hi", "body": "test email"},
    ]
    test_ids = [_send(stack, TWIN, body)["id"] for body in bodies]
    for channel in ("sms", "imessage", "email"):
        assert stack.dispatch(channel) == {"batchItemFailures": []}
    # Each dispatcher's cold start builds its channel's live provider, for live messages; no more.
    built_for_live_at_start = list(spied_providers["built"])
    assert len(built_for_live_at_start) == 3

    assert spied_providers["sent"] == []
    # The simulator's, and the hashing key's read for the claim's suppression check: no SES, no SNS.
    assert set(spied_providers["clients"]) <= {"dynamodb", "sqs", "secretsmanager"}
    for message_id in test_ids:
        assert _api(stack, "GET", f"/v1/messages/{message_id}", TWIN).json["message"]["status"] == "sent"
        assert len(_deliveries(stack, TWIN, message_id).json["deliveries"]) == 1

    # The spies are the providers a live message gets: the same dispatcher calls them for one.
    live = _send(stack, WORKSPACE, {"channel": "sms", "to": "+15550100079", "body": "live sms"})
    stack.dispatch("sms")
    assert spied_providers["sent"] == [live["id"]]
    assert spied_providers["built"] == built_for_live_at_start


# ---------------------------------------------------------------------------- the simulator's reports
def test_the_opt_out_number_is_delivered_then_suppressed_in_the_twin_alone(
    stack: Stack,
) -> None:
    message = _send(stack, TWIN, {"channel": "sms", "to": "+15005550004", "body": "stop me"})
    stack.dispatch("sms")

    result = _apply_events(stack, 2)

    assert result == {"batchItemFailures": []}
    assert _api(stack, "GET", f"/v1/messages/{message['id']}", TWIN).json["message"]["status"] == "delivered"
    recorded = {
        item["type"]["S"]
        for item in stack.scan("MessagesTable")
        if item["pk"]["S"].startswith("EVENT#simulator#") and item["messageId"]["S"] == message["id"]
    }
    assert recorded == {"delivered", "opted_out"}
    # The opt-out suppresses the number in the twin, and only there.
    entry = _api(stack, "GET", "/v1/suppressions/%2B15005550004", TWIN).json["suppression"]
    assert (entry["reason"], entry["messageId"]) == ("opted_out", message["id"])
    again = _api(
        stack, "POST", "/v1/messages", TWIN, {"channel": "sms", "to": "+15005550004", "body": "more"}
    )
    assert (again.status, again.json["error"]["code"]) == (422, "recipient_suppressed")
    assert _api(stack, "GET", "/v1/suppressions/%2B15005550004", WORKSPACE).status == 404


def test_the_bounce_address_ends_failed_and_is_suppressed_in_the_twin(stack: Stack) -> None:
    email = {"channel": "email", "to": "bounce@simulator.amazonses.com", "subject": "hi", "body": "bounce"}
    message = _send(stack, TWIN, email)
    stack.dispatch("email")
    _apply_events(stack, 1)

    got = _api(stack, "GET", f"/v1/messages/{message['id']}", TWIN).json["message"]
    assert (got["status"], got["error"]["code"]) == ("failed", "bounced")
    # As SES's permanent bounce: the address is suppressed in the twin (only), and a failed message
    # holds no lock, so the same send is refused for the suppression, not caught as a duplicate.
    entry = _api(stack, "GET", "/v1/suppressions/bounce%40simulator.amazonses.com", TWIN).json["suppression"]
    assert (entry["reason"], entry["messageId"]) == ("bounced", message["id"])
    again = _api(stack, "POST", "/v1/messages", TWIN, email)
    assert (again.status, again.json["error"]["code"]) == (422, "recipient_suppressed")
    assert _api(stack, "GET", "/v1/suppressions/bounce%40simulator.amazonses.com", WORKSPACE).status == 404


def test_the_complaint_address_is_delivered_then_suppressed_in_the_twin(stack: Stack) -> None:
    email = {
        "channel": "email",
        "to": "complaint@simulator.amazonses.com",
        "subject": "hi",
        "body": "complain",
    }
    message = _send(stack, TWIN, email)
    stack.dispatch("email")
    _apply_events(stack, 2)

    assert _api(stack, "GET", f"/v1/messages/{message['id']}", TWIN).json["message"]["status"] == "delivered"
    entry = _api(stack, "GET", "/v1/suppressions/complaint%40simulator.amazonses.com", TWIN).json[
        "suppression"
    ]
    assert entry["reason"] == "complained"


def test_the_permanent_number_fails_with_no_delivery(stack: Stack) -> None:
    message = _send(stack, TWIN, {"channel": "sms", "to": "+15005550001", "body": "refused"})
    stack.dispatch("sms")

    got = _api(stack, "GET", f"/v1/messages/{message['id']}", TWIN).json["message"]
    assert (got["status"], got["error"]["code"]) == ("failed", "provider_rejected")
    assert _deliveries(stack, TWIN, message["id"]).json["deliveries"] == []


def test_a_simulator_event_never_moves_a_live_message(stack: Stack, http_provider: FakeHttpProvider) -> None:
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    live = _send(stack, WORKSPACE, {"channel": "imessage", "to": "+15550100080", "body": "live"})
    stack.dispatch("imessage")
    forged = ProviderEvent(
        SIMULATOR, "sim_forged", live["id"], ProviderEventType.FAILED, "2026-01-01T00:00:00Z"
    )
    stack.sqs.send_message(QueueUrl=stack.queue_urls["EventsQueue"], MessageBody=forged.to_json())

    _apply_events(stack, 1)

    assert stack.message(live["id"])["status"] == "sent"


# ---------------------------------------------------------------------------- GET /v1/test/deliveries
def test_deliveries_are_read_with_a_test_key_only(stack: Stack) -> None:
    message = _send(stack, TWIN, {"channel": "sms", "to": "+15550100081", "body": "count me"})
    stack.dispatch("sms")

    mine = _deliveries(stack, TWIN, message["id"])
    assert mine.status == 200, mine.raw_body
    [delivery] = mine.json["deliveries"]
    assert (delivery["messageId"], delivery["to"], delivery["body"]) == (
        message["id"],
        "+15550100081",
        "count me",
    )
    assert _deliveries(stack, TWIN).json["deliveries"] == [delivery]
    assert _deliveries(stack, WORKSPACE).status == 404
    assert _deliveries(stack, WORKSPACE, message["id"]).status == 404
    assert _api(stack, "GET", f"/v1/messages/{message['id']}", WORKSPACE).status == 404


# ---------------------------------------------------------------------------- 7 days
def test_test_data_expires_after_7_days_live_data_after_its_retention(stack: Stack) -> None:
    body = {"channel": "sms", "to": "+15550100082", "body": "kept a week"}
    test, live = _send(stack, TWIN, body, key="kept"), _send(stack, WORKSPACE, body, key="kept")
    stack.dispatch("sms")

    def kept(item: dict[str, Any], message: dict[str, Any]) -> float:
        """Days from the message's creation to the item's expiry (DynamoDB's TTL)."""
        created = datetime.fromisoformat(message["createdAt"].replace("Z", "+00:00"))
        return (int(item["expiresAt"]["N"]) - int(created.timestamp())) / timedelta(days=1).total_seconds()

    assert kept(stack.message_item(test["id"]), test) == 7
    assert kept(stack.message_item(live["id"]), live) == 90
    simulated = [i for i in stack.scan("MessagesTable") if i["pk"]["S"] == f"SIMULATOR#{TWIN}"]
    assert simulated
    assert all(7 <= kept(item, test) < 7.01 for item in simulated)
    ties = {i["messageId"]["S"]: i for i in stack.scan("MessagesTable") if i["pk"]["S"].startswith("KEYTIE#")}
    assert kept(ties[test["id"]], test) == 7
    assert "expiresAt" not in ties[live["id"]]  # a live key stays tied to its message for good
