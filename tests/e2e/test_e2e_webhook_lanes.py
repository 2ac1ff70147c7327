"""No endpoint waits behind another (docs/guarantees.md, "Status webhooks"), through `sendonce run`.

A workspace has three endpoints that hang (they hold each request 30 s, past the promised 15)
and one healthy endpoint. The local stack runs the delivery function at most 5 at a time: its fast
lane's event source 3 (`WebhookDeliveryMaxConcurrency=3`, given as `sam deploy
--parameter-overrides` would be, through SENDONCE_LOCAL_PARAMETER_OVERRIDES) and its slow lane's
2. After 10 sends, the healthy endpoint has every `message.sent` within 5 s of the change (the
event's `timestamp`, the message's `updatedAt` at `sent`; one machine, one clock), while the
hanging endpoints' deliveries wait in the slow lane.

Its own stack and workspace: the hanging endpoints must not see the other modules' messages. The
hanging receivers let every request go when the module ends, so nothing waits for them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime

import pytest
import requests

from bench.webhooks import HANGING, LaneReceivers, lane_receivers
from tests.e2e.conftest import LocalStack, running_stack
from tests.e2e.e2e_support import created_id, eventually, send, sms, unique_body, unique_phone

SENDS = 10
BOUND_SECONDS = 5.0  # the issue's: the healthy endpoint's message.sent within 5 s of the change
WAIT_SECONDS = 120.0  # generous: 2 noisy cores; the bound is asserted on the timestamps, not on this
OVERRIDES = "WebhookDeliveryMaxConcurrency=3 WebhookSlowLaneMaxConcurrency=2"


@pytest.fixture(scope="module")
def receivers() -> Iterator[LaneReceivers]:
    with lane_receivers() as state:
        yield state


@pytest.fixture(scope="module")
def lanes_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalStack, str]]:
    log = tmp_path_factory.mktemp("lanes-stack") / "sendonce-run.log"
    settings = {
        "SENDONCE_LOCAL_PARAMETER_OVERRIDES": OVERRIDES,
        "SENDONCE_PROVIDER_TIMEOUT_SECONDS": "2",
        "SENDONCE_SANDBOX_DELIVERY_EVENTS": "false",  # queued and sent: the changes this test follows
    }
    keys = (("ws_lanes", "sk_e2e_lanes_key"), ("ws_lanes_other", "sk_e2e_lanes_other_key"))
    with running_stack(log, settings, keys) as local:
        yield local, log.read_text(errors="replace")


def _add_endpoint(stack: LocalStack, url: str) -> str:
    answer = requests.post(
        f"{stack.api}/v1/webhook-endpoints",
        data=json.dumps({"url": url}),
        headers={**stack.auth(), "Content-Type": "application/json"},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    endpoint_id: str = answer.json()["endpoint"]["id"]
    return endpoint_id


def _epoch(moment: str) -> float:
    return datetime.fromisoformat(moment.replace("Z", "+00:00")).timestamp()


def test_the_stack_runs_each_lane_as_its_parameters_say(lanes_stack: tuple[LocalStack, str]) -> None:
    _, banner = lanes_stack

    assert re.search(r"WebhookDeliveryQueue \(3 at a time\)", banner), banner
    assert re.search(r"WebhookSlowLaneQueue \(2 at a time\)", banner), banner
    assert "WebhookDeliveryMaxConcurrency=3" in banner


def test_a_healthy_endpoint_hears_of_every_send_within_5_s_while_three_others_hang(
    lanes_stack: tuple[LocalStack, str], receivers: LaneReceivers
) -> None:
    stack, _ = lanes_stack
    _add_endpoint(stack, f"{receivers.base}/healthy")
    # Warm, as a stack in use is: the fast lane's execution environments started by a first round
    # of sends (a cold start is the cold-start bench's figure, not this one's).
    warm = {created_id(send(stack, sms(unique_phone(), unique_body("warm")))) for _ in range(SENDS)}
    eventually(lambda: len(receivers.healthy_of("message.sent", warm)) == SENDS, timeout=WAIT_SECONDS)
    for number in range(HANGING):
        _add_endpoint(stack, f"{receivers.base}/hang/{number}")

    sent = {created_id(send(stack, sms(unique_phone(), unique_body("lanes")))) for _ in range(SENDS)}

    told = eventually(
        lambda: found if len(found := receivers.healthy_of("message.sent", sent)) == SENDS else None,
        timeout=WAIT_SECONDS,
        interval=0.5,
    )
    late = {
        message_id: round(at - _epoch(payload["timestamp"]), 2)
        for message_id, (at, payload) in told.items()
        if at - _epoch(payload["timestamp"]) > BOUND_SECONDS
    }
    assert late == {}, f"message.sent reached the healthy endpoint later than {BOUND_SECONDS} s: {late}"
    # Each message.sent is the message as it stood at `sent`: the timestamp is that change's.
    assert all(payload["data"]["message"]["status"] == "sent" for _, payload in told.values())
    # Each message.queued too (one may come after its message.sent: each delivery is its own record).
    eventually(lambda: len(receivers.healthy_of("message.queued", sent)) == SENDS, timeout=WAIT_SECONDS)
    # The hanging endpoints were called (and held on): the healthy one did not wait behind them.
    with receivers.lock:
        assert sorted(receivers.hung) == [f"/hang/{number}" for number in range(HANGING)]
