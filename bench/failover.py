"""A failover delivery against a plain one, in one run, on the in-process stack (issue 32).

The sms dispatcher's real handler, fed one queued record per invocation, against the sandbox's HTTP
provider and Twilio on loopback ports, in rounds that alternate the two settings:
- plain: `SENDONCE_SMS_PROVIDERS=http`, the one provider takes every message;
- failover: `twilio,http`, Twilio refuses each message for its account (`error_403`: not
  accepted) and the HTTP provider takes it, in the same invocation.
A third setting, asked (`timeout_unaccepted` at Twilio: the answer never comes, Twilio's list is
asked once it can be trusted and shows nothing, then the HTTP provider), is counted in calls and
invocations; its time is the provider's timeout and the visibility delay, by design.
The cool-off is set out of reach (`SENDONCE_PROVIDER_COOLOFF_AFTER` high), so every failover is the
first in a row: its run's write is counted. The AWS calls and the p50 of each setting are taken
round by round, and a ratio's figure is the median of the rounds.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sendonce import composition

from bench.call_counter import COUNTER
from bench.events import send_event, sqs_event
from bench.local_stack import API_KEY, BenchStack, start_stack
from bench.probes import QUEUE, StreamReaders, hand_off, queued_records
from bench.quiet import silenced_stdout
from bench.stats import median_of_rounds, percentile, spread
from sendonce_local.deliveries import DeliveryLog
from sendonce_local.faults import FaultBoard
from sendonce_local.intrinsics import queue_arn
from sendonce_local.lambda_runtime import LambdaContext
from sendonce_local.sandbox import HttpProvider, HttpProviderServer
from sendonce_local.twilio_sandbox import TwilioCredentials, TwilioProvider, TwilioServer
from tests.support.ports import free_port

PER_ROUND = 10
HOST = "127.0.0.1"
SETTINGS = {"plain": "http", "failover": "twilio,http", "asked": "twilio,http"}
FAULTS = {"failover": "error_403", "asked": "timeout_unaccepted"}


@dataclass
class Samples:
    seconds: list[float] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    invocations: list[int] = field(default_factory=list)
    operations: list[str] = field(default_factory=list)


@dataclass
class Sandbox:
    faults: FaultBoard
    deliveries: DeliveryLog
    servers: list[Any]


@contextmanager
def _sandbox(stack: BenchStack) -> Iterator[Sandbox]:
    token, twilio = uuid.uuid4().hex, TwilioCredentials.generate()
    secrets = stack.client("secretsmanager")
    secrets.put_secret_value(SecretId="HttpProviderTokenSecret", SecretString=token)
    secrets.put_secret_value(
        SecretId="TwilioCredentialsSecret",
        SecretString=json.dumps({"accountSid": twilio.account_sid, "authToken": twilio.auth_token}),
    )
    deliveries, faults = DeliveryLog(), FaultBoard()
    http = HttpProviderServer(HOST, free_port(HOST), HttpProvider(deliveries, lambda: token, faults))
    twilio_server = TwilioServer(HOST, free_port(HOST), TwilioProvider(deliveries, faults, lambda: twilio))
    for name, server in (("http", http), ("twilio", twilio_server)):
        server.start()
        faults.attach(name, server)
    os.environ.update(
        {
            "SENDONCE_HTTP_PROVIDER_URL": f"http://{HOST}:{http.port}",
            "SENDONCE_TWILIO_BASE_URL": f"http://{HOST}:{twilio_server.port}",
            "SENDONCE_TWILIO_FROM": "+15005550006",
            "SENDONCE_TWILIO_VISIBILITY_SECONDS": "1",
            "SENDONCE_PROVIDER_TIMEOUT_SECONDS": "1",
            "SENDONCE_PROVIDER_COOLOFF_AFTER": "1000000",
        }
    )
    try:
        yield Sandbox(faults, deliveries, [http, twilio_server])
    finally:
        for server in (http, twilio_server):
            server.stop()


def _use(setting: str) -> None:
    """The dispatcher redeployed with `setting`'s providers: its roots built afresh, then warmed."""
    os.environ["SENDONCE_SMS_PROVIDERS"] = SETTINGS[setting]
    composition.reset_all()


def _queue(stack: BenchStack, readers: StreamReaders, count: int) -> list[dict[str, Any]]:
    api = stack.functions["ApiFunction"]
    handler, context = api.load(), LambdaContext(api.spec)
    with silenced_stdout():
        for _ in range(count):
            body = {
                "channel": "sms",
                "to": f"+1555{uuid.uuid4().int % 10_000_000:07d}",
                "body": uuid.uuid4().hex,
            }
            answer = handler(send_event(body, API_KEY), context)
            if answer.get("statusCode") != 201:
                raise RuntimeError(f"a bench send was refused: {answer}")
    hand_off(stack, readers)
    records = queued_records(stack, count)
    if len(records) != count:  # a record of an earlier message, or one missing: the figures would lie
        raise RuntimeError(f"{len(records)} records queued for {count} messages")
    return records


def _deliver(stack: BenchStack, record: dict[str, Any], into: Samples) -> None:
    """One message's delivery: its record, and whatever it hands back, until it is sent."""
    function = stack.functions["DispatchSmsFunction"]
    handler, context = function.load(), LambdaContext(function.spec)
    event = sqs_event([record], queue_arn(QUEUE))
    seconds, calls, invocations, operations = 0.0, 0, 0, []
    for _ in range(4):
        with COUNTER.counting() as log, silenced_stdout():
            started = time.perf_counter()
            result = handler(event, context)
            seconds += time.perf_counter() - started
        calls, invocations = calls + len(log), invocations + 1
        operations += log.operations()
        if not result.get("batchItemFailures"):
            break
        time.sleep(1.05)  # handed back until Twilio's list can be trusted (1 s here)
    else:
        raise RuntimeError(f"a bench message was never delivered: {record['MessageId']}")
    # Done: its record leaves the queue, as the event source deletes a record its function took.
    stack.client("sqs").delete_message(
        QueueUrl=stack.queue_urls[QUEUE], ReceiptHandle=record["ReceiptHandle"]
    )
    into.seconds.append(seconds)
    into.calls.append(calls)
    into.invocations.append(invocations)
    into.operations = operations


def _measure(stack: BenchStack, sandbox: Sandbox, rounds: int) -> tuple[dict[str, Any], dict[str, Any]]:
    readers = StreamReaders(stack)
    samples = {setting: Samples() for setting in SETTINGS}
    ratios: list[float] = []
    for number in range(rounds):
        per_round: dict[str, list[float]] = {}
        order = list(SETTINGS) if number % 2 == 0 else list(reversed(SETTINGS))
        for setting in order:
            _use(setting)
            records = _queue(stack, readers, PER_ROUND + 1)
            taken = Samples()
            for index, record in enumerate(records):
                if setting in FAULTS:
                    sandbox.faults.arm({"provider": "twilio", "channel": "sms", "mode": FAULTS[setting]})
                _deliver(stack, record, taken if index else Samples())  # the first warms the roots
            samples[setting].seconds += taken.seconds
            samples[setting].calls += taken.calls
            samples[setting].invocations += taken.invocations
            samples[setting].operations = taken.operations
            per_round[setting] = taken.seconds
        ratios.append(percentile(per_round["failover"], 0.5) / percentile(per_round["plain"], 0.5))
    delivered = {entry["provider"] for entry in sandbox.deliveries.all()}
    made = rounds * len(SETTINGS) * (PER_ROUND + 1)  # the warm-ups included
    figures = {
        "plain_calls": _mode(samples["plain"].calls),
        "failover_calls": _mode(samples["failover"].calls),
        "asked_calls": _mode(samples["asked"].calls),
        "asked_invocations": _mode(samples["asked"].invocations),
        "plain_p50_ms": round(percentile(samples["plain"].seconds, 0.5) * 1000, 2),
        "failover_p50_ms": round(percentile(samples["failover"].seconds, 0.5) * 1000, 2),
        "failover_p50_over_plain": round(median_of_rounds(ratios), 3),
        "failover_extra_calls": _mode(samples["failover"].calls) - _mode(samples["plain"].calls),
        # Every message made, delivered once: failover never sends twice.
        "deliveries_per_message": round(len(sandbox.deliveries.all()) / made, 3),
        "spread": {"failover_p50_over_plain": spread(ratios)},
    }
    details = {
        "operations": {setting: s.operations for setting, s in samples.items()},
        "providers_delivering": sorted(delivered),
        "deliveries": len(sandbox.deliveries.all()),
        "messages": made,
    }
    return figures, details


def _mode(values: list[int]) -> int:
    return max(set(values), key=values.count) if values else 0


def run_failover_bench(rounds: int = 5) -> tuple[dict[str, Any], dict[str, Any]]:
    print(f"failover: {rounds} rounds of {PER_ROUND} deliveries per setting ...", file=sys.stderr, flush=True)
    saved = dict(os.environ)
    stack = start_stack()
    try:
        with _sandbox(stack) as sandbox:
            return _measure(stack, sandbox, rounds)
    finally:
        stack.stop()
        os.environ.clear()
        os.environ.update(saved)
        composition.reset_all()


if __name__ == "__main__":
    COUNTER.install()
    found, seen = run_failover_bench(rounds=int(sys.argv[1]) if len(sys.argv) > 1 else 3)
    print(json.dumps({"figures": found, "details": seen}, indent=2))
