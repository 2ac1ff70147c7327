"""Failover between sms providers on moto, through the real API and dispatcher functions, against the
local sandbox's HTTP provider and Twilio (each on its own port, with the sandbox's faults).

A message goes to the next provider only when the current one provably did not accept it; a 5xx
from a provider that dedups is retried there; a lost Twilio answer is asked about, and settles the
message on what Twilio says; a refusal of the recipient fails it; a provider that failed to accept
several messages in a row is skipped by every execution environment; and redelivered records racing
a failover never deliver a message twice.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sendonce.aws_clients import client
from sendonce.entrypoints.dispatch import build as build_dispatcher
from sendonce.settings import DispatcherSettings

from sendonce_local.deliveries import DeliveryLog
from sendonce_local.faults import FaultBoard
from sendonce_local.sandbox import HttpProvider, HttpProviderServer
from sendonce_local.twilio_sandbox import TwilioProvider, TwilioServer
from tests.integration.conftest import Stack, function, sqs_event
from tests.support.lambda_context import FakeLambdaContext
from tests.support.ports import free_port

TO = "+15550100000"
# The sandbox answers a `timeout` fault this long after the provider's timeout: kept short here.
PROVIDER_TIMEOUT_SECONDS = "1"


@dataclass
class Providers:
    """The sandbox's HTTP provider and Twilio, their faults, and every message they accepted."""

    deliveries: DeliveryLog
    faults: FaultBoard

    def fault(self, provider: str, mode: str, count: int = 1) -> None:
        self.faults.arm({"provider": provider, "channel": "sms", "mode": mode, "count": count})

    def delivered(self, message_id: str) -> list[str]:
        """The providers that accepted `message_id`, one entry per acceptance."""
        return [d["provider"] for d in self.deliveries.all() if d["messageId"] == message_id]


@pytest.fixture
def providers(stack: Stack) -> Iterator[Providers]:
    deliveries, faults = DeliveryLog(), FaultBoard()
    http = HttpProvider(deliveries, lambda: stack.secrets.http_provider_token, faults)
    twilio = TwilioProvider(deliveries, faults, lambda: stack.secrets.twilio)
    servers = [
        HttpProviderServer("127.0.0.1", free_port(), http),
        TwilioServer("127.0.0.1", free_port(), twilio),
    ]
    for server in servers:
        server.start()
    faults.attach("http", servers[0])
    faults.attach("twilio", servers[1])
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", f"http://127.0.0.1:{servers[0].port}")
    stack.setenv("SENDONCE_TWILIO_BASE_URL", f"http://127.0.0.1:{servers[1].port}")
    stack.setenv("SENDONCE_TWILIO_FROM", "+15005550006")
    stack.setenv("SENDONCE_TWILIO_STATUS_CALLBACK_URL", "https://api.sendonce.test/v1/webhooks/twilio")
    stack.setenv("SENDONCE_TWILIO_VISIBILITY_SECONDS", "1")
    stack.setenv("SENDONCE_PROVIDER_TIMEOUT_SECONDS", PROVIDER_TIMEOUT_SECONDS)
    try:
        yield Providers(deliveries, faults)
    finally:
        for server in servers:
            server.stop()


def _send(stack: Stack, body: str) -> str:
    answer = stack.send(body={"channel": "sms", "to": TO, "body": body})
    assert answer.status == 201, answer.raw_body
    message_id: str = answer.json["message"]["id"]
    return message_id


def _deliver(stack: Stack, rounds: int = 4) -> None:
    """Dispatch every visible sms record, then again once the ones handed back come due."""
    for _ in range(rounds):
        if stack.queue_depth("sms") == 0:
            return
        stack.dispatch("sms")
        time.sleep(1.2)  # a lost answer is asked about after its visibility delay (1 s here)


def _attempts(stack: Stack, message_id: str) -> list[tuple[str, str]]:
    return [(a["provider"], a["outcome"]) for a in stack.message(message_id)["providerAttempts"]]


# ---------------------------------------------------------------------------- the next provider
@pytest.mark.parametrize(("first", "then"), [("twilio", "http"), ("http", "twilio")])
@pytest.mark.parametrize("mode", ["refused", "error_403"])
def test_given_the_first_provider_did_not_accept_then_the_next_delivers_it_once(
    stack: Stack, providers: Providers, first: str, then: str, mode: str
) -> None:
    stack.setenv("SENDONCE_SMS_PROVIDERS", f"{first},{then}")
    providers.fault(first, mode)
    message_id = _send(stack, f"{mode} at {first}")

    _deliver(stack)

    assert providers.delivered(message_id) == [then], json.dumps(stack.message(message_id))
    message = stack.message(message_id)
    assert (message["status"], message["provider"]) == ("sent", then)
    assert _attempts(stack, message_id) == [(first, "not_accepted"), (then, "accepted")]


def test_given_a_500_from_the_provider_that_dedups_then_retried_there_never_failed_over(
    stack: Stack, providers: Providers
) -> None:
    stack.setenv("SENDONCE_SMS_PROVIDERS", "http,twilio")
    providers.fault("http", "error_500")
    message_id = _send(stack, "a 500 at http")

    stack.dispatch("sms")
    assert stack.message(message_id)["status"] == "queued"  # back to its queue, for http again
    stack.dispatch("sms", _wait_for_record(stack))

    assert providers.delivered(message_id) == ["http"]
    assert _attempts(stack, message_id) == [("http", "unknown"), ("http", "accepted")]


@pytest.mark.parametrize("order", ["twilio,http", "http,twilio"])
def test_given_the_recipient_refused_then_failed_and_no_other_provider_is_tried(
    stack: Stack, providers: Providers, order: str
) -> None:
    stack.setenv("SENDONCE_SMS_PROVIDERS", order)
    first = order.split(",", maxsplit=1)[0]
    providers.fault(first, "error_400")
    message_id = _send(stack, "a 400 about the recipient")

    _deliver(stack)

    assert providers.delivered(message_id) == []
    message = stack.message(message_id)
    assert (message["status"], message["provider"]) == ("failed", None)
    assert _attempts(stack, message_id) == [(first, "failed")]


# ---------------------------------------------------------------------------- asking Twilio
def test_given_a_timeout_where_twilio_did_accept_then_asked_and_sent_with_one_delivery_in_all(
    stack: Stack, providers: Providers
) -> None:
    stack.setenv("SENDONCE_SMS_PROVIDERS", "twilio,http")
    providers.fault("twilio", "timeout")
    message_id = _send(stack, "twilio took it, its answer was lost")

    _deliver(stack)

    assert providers.delivered(message_id) == ["twilio"]
    message = stack.message(message_id)
    assert (message["status"], message["provider"]) == ("sent", "twilio")
    assert message["attempts"] == 2  # the call, then the question: no second call anywhere
    assert _attempts(stack, message_id) == [("twilio", "accepted")]


def test_given_a_timeout_where_twilio_accepted_nothing_then_asked_and_the_next_provider_sends_it(
    stack: Stack, providers: Providers
) -> None:
    stack.setenv("SENDONCE_SMS_PROVIDERS", "twilio,http")
    providers.fault("twilio", "timeout_unaccepted")
    message_id = _send(stack, "twilio took nothing")

    _deliver(stack)

    assert providers.delivered(message_id) == ["http"]
    assert _attempts(stack, message_id) == [("twilio", "not_accepted"), ("http", "accepted")]


# ---------------------------------------------------------------------------- cool-off
def test_given_a_provider_refusing_in_a_row_then_every_execution_environment_skips_it(
    stack: Stack, providers: Providers
) -> None:
    stack.setenv("SENDONCE_SMS_PROVIDERS", "twilio,http")
    stack.setenv("SENDONCE_PROVIDER_COOLOFF_AFTER", "2")
    stack.setenv("SENDONCE_PROVIDER_COOLOFF_SECONDS", "300")
    providers.fault("twilio", "error_403", count=3)
    first = [_send(stack, f"refused {n}") for n in range(2)]
    _deliver(stack)  # this execution environment counts twilio's two refusals: a cool-off starts

    # Another execution environment: a function built afresh, with nothing of the first in memory.
    function("dispatch_sms").root.use(build_dispatcher("sms", DispatcherSettings.from_environment(), client))
    later = _send(stack, "after the cool-off started")
    _deliver(stack)

    assert [providers.delivered(m) for m in (*first, later)] == [["http"], ["http"], ["http"]]
    assert _attempts(stack, later) == [("http", "accepted")]  # twilio skipped: never called
    assert providers.faults.faults()[0]["count"] == 1  # its third refusal was never used
    health = stack.dynamodb.get_item(
        TableName="MessagesTable", Key={"pk": {"S": "PROVIDER#twilio"}, "sk": {"S": "HEALTH"}}
    )["Item"]
    assert "coolUntil" in health


def test_the_last_provider_of_a_list_is_never_skipped(stack: Stack, providers: Providers) -> None:
    stack.setenv("SENDONCE_SMS_PROVIDERS", "twilio,http")
    stack.setenv("SENDONCE_PROVIDER_COOLOFF_AFTER", "1")
    providers.fault("http", "error_403", count=2)
    providers.fault("twilio", "error_403", count=2)
    message_id = _send(stack, "both refuse")

    _deliver(stack)  # twilio refuses (a cool-off), http refuses (a cool-off): failed

    assert stack.message(message_id)["status"] == "failed"
    later = _send(stack, "both cooling off")
    _deliver(stack)
    assert _attempts(stack, later)[0] == ("http", "not_accepted")  # the last, tried while cooling off


# ---------------------------------------------------------------------------- races
@pytest.mark.parametrize("mode", ["refused", "error_403", "timeout_unaccepted"])
def test_given_copies_of_a_record_racing_a_failover_then_one_delivery(
    stack: Stack, providers: Providers, mode: str
) -> None:
    stack.setenv("SENDONCE_SMS_PROVIDERS", "twilio,http")
    providers.fault("twilio", mode, count=8)
    message_id = _send(stack, f"raced {mode}")
    (record,) = stack.receive("sms")
    dispatch = function("dispatch_sms").handler
    function("dispatch_sms").root.get()  # warm, as environments that already took records are

    def redelivered(n: int) -> None:
        copy = {**record, "MessageId": f"{record['MessageId']}-{n}"}
        dispatch(sqs_event([copy], stack.queue_arn("sms")), FakeLambdaContext())

    for _ in range(3):  # the copies, then whatever they handed back (a lost answer is asked later)
        threads = [threading.Thread(target=redelivered, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        time.sleep(1.2)

    assert providers.delivered(message_id) == ["http"]
    assert stack.message(message_id)["status"] == "sent"
    assert _attempts(stack, message_id) == [("twilio", "not_accepted"), ("http", "accepted")]


def _wait_for_record(stack: Stack, timeout: float = 10.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        records = stack.receive("sms")
        if records:
            return records
        time.sleep(0.25)
    raise AssertionError("the record never came back")


def test_a_single_provider_setting_still_means_a_list_of_one(stack: Stack, providers: Providers) -> None:
    stack.setenv("SENDONCE_SMS_PROVIDER", "twilio")
    message_id = _send(stack, "twilio alone")

    _deliver(stack)

    assert providers.delivered(message_id) == ["twilio"]
    assert json.loads(json.dumps(_attempts(stack, message_id))) == [["twilio", "accepted"]]
