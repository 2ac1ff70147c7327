"""The status events of a message's life, measured: what MessageChangesFunction writes for each of
its status changes (always: the events API lists them, endpoints or none), and what a status-webhook
endpoint adds (the endpoints read, larger events, the tasks queued, WebhookDeliveryFunction's
deliveries).

Messages the bench has dispatched and reported delivered, each with its whole life in the
MessagesTable stream (created, claimed, sent, delivered), and none the original of a caught
duplicate (whose catch is an event of its own). The first half are told with no endpoint in their
workspace; then one endpoint taking every event type is added (a receiver on loopback answering
204), the second half are told, and each delivery queued for them is made. A message's records
(its own item's, in stream order) go to the real handler in one batch, as the stream's event source
mapping hands them over (the endpoints read once a batch); a delivery is one invocation. Both
functions are invoked once on an empty batch first, so their clients are built before anything is
timed. DynamoDB units are the capacity probe's, calls the counter's, times the wall clock's.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any

from sendonce.adapters.dynamodb_items import message_key
from sendonce.adapters.dynamodb_message_stream import change_of
from sendonce.adapters.dynamodb_webhooks import DynamoDbWebhookStore
from sendonce.clock import utc_now
from sendonce.status_webhooks.model import Endpoint, SigningSecret, new_endpoint_id, new_secret

from bench.capacity import CapacityProbe, Units, scaled
from bench.events import sqs_event
from bench.local_stack import WORKSPACE, BenchStack
from bench.probes import Invocations, StreamReaders, invoke
from bench.quiet import silenced_stdout
from bench.webhooks import receiving
from sendonce_local.intrinsics import queue_arn

CHANGES = "MessageChangesFunction"
DELIVERY = "WebhookDeliveryFunction"
DELIVERY_QUEUE = "WebhookDeliveryQueue"
# Messages told on each side (no endpoint, one endpoint).
MESSAGES = 5


@dataclass
class Telling:
    """Some messages' changes told, one invocation a message, and with an endpoint, their deliveries."""

    messages: int = 0
    records: list[int] = field(default_factory=list)  # each invocation's records (one message's)
    changes: int = 0  # status changes among them: one event each
    units: Units = field(default_factory=Units)  # DynamoDB, telling them
    invocations: Invocations = field(default_factory=Invocations)
    queue_calls: int = 0  # the changes function's SQS calls: the deliveries' tasks queued
    delivered: Invocations = field(default_factory=Invocations)  # one invocation a delivery
    delivery_units: Units = field(default_factory=Units)

    def per_message(self, units: Units) -> Units:
        return scaled(units, 1 / self.messages)

    def records_per_message(self) -> float:
        return sum(self.records) / self.messages

    def deliveries_per_message(self) -> float:
        return len(self.delivered.seconds) / self.messages

    def queue_calls_per_message(self) -> float:
        return self.queue_calls / self.messages

    def ms_per_record(self) -> float:
        """The median over the invocations of each one's milliseconds per record."""
        return statistics.median(
            seconds * 1000 / records
            for seconds, records in zip(self.invocations.seconds, self.records, strict=True)
        )

    def figures(self) -> dict[str, Any]:
        telling, delivering = self.per_message(self.units), self.per_message(self.delivery_units)
        return {
            "messages": self.messages,
            "records_per_message": self.records_per_message(),
            "changes_per_message": self.changes / self.messages,
            "wru_per_message": round(telling.wru, 2),
            "rru_per_message": round(telling.rru, 2),
            "ms_per_record": round(self.ms_per_record(), 2),
            "operations": self.invocations.operations,  # of the last message
            "deliveries_per_message": self.deliveries_per_message(),
            "queue_calls_per_message": self.queue_calls_per_message(),
            "delivery_wru_per_message": round(delivering.wru, 2),
            "delivery_rru_per_message": round(delivering.rru, 2),
            "delivery_ms_p50": round(statistics.median(self.delivered.seconds) * 1000, 2)
            if self.delivered.seconds
            else None,
            "delivery_operations": self.delivered.operations,  # of the last delivery
            "detail": sorted(set(self.units.detail + self.delivery_units.detail)),
        }


def plain_messages(stack: BenchStack, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The queue records whose messages caught no duplicate: their lives are a send's and no more."""
    dynamodb = stack.client("dynamodb")
    out = []
    for record in records:
        key = message_key(json.loads(record["Body"])["messageId"])
        item = dynamodb.get_item(TableName="MessagesTable", Key=key, ConsistentRead=True).get("Item") or {}
        if item and "duplicatesBlocked" not in item:
            out.append(record)
    return out


def records_of(stack: BenchStack, message_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each message's own records in the MessagesTable stream, from its start, in stream order."""
    keys = {f"MSG#{message_id}": message_id for message_id in message_ids}
    out: dict[str, list[dict[str, Any]]] = {message_id: [] for message_id in message_ids}
    for record in StreamReaders(stack).read():
        message_id = keys.get(record["dynamodb"].get("Keys", {}).get("pk", {}).get("S", ""))
        if message_id is not None:
            out[message_id].append(record)
    return out


def _tell(stack: BenchStack, probe: CapacityProbe, records: list[dict[str, Any]], into: Telling) -> None:
    def run() -> None:
        result = invoke(stack, CHANGES, {"Records": records}, into.invocations)
        if result.get("batchItemFailures"):
            raise RuntimeError(f"a change was not told: {result}")

    with silenced_stdout():
        into.units.add(probe.measure(run))
    into.messages += 1
    into.records.append(len(records))
    into.changes += sum(1 for record in records if change_of(record) is not None)
    into.queue_calls += sum(1 for operation in into.invocations.operations if operation.startswith("sqs."))


def _deliver(stack: BenchStack, probe: CapacityProbe, into: Telling) -> None:
    sqs = stack.client("sqs")
    url = stack.queue_urls[DELIVERY_QUEUE]
    arn = queue_arn(DELIVERY_QUEUE)
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]).get(
        "Messages", []
    ):
        for received in batch:

            def run(received: dict[str, Any] = received) -> None:
                result = invoke(stack, DELIVERY, sqs_event([received], arn), into.delivered)
                if result.get("batchItemFailures"):
                    raise RuntimeError(f"a delivery failed: {result}")

            with silenced_stdout():
                into.delivery_units.add(probe.measure(run))


def _warm(stack: BenchStack) -> None:
    """Each function once on an empty batch: its composition root built, nothing told or delivered."""
    with silenced_stdout():
        for name in (CHANGES, DELIVERY):
            invoke(stack, name, {"Records": []}, Invocations())


def measure_events(
    stack: BenchStack, probe: CapacityProbe, records: list[dict[str, Any]]
) -> dict[str, Telling]:
    """`records`: queue records of the bench workspace's `plain_messages`, all dispatched and
    reported; the first half's events told with no endpoint ("no_endpoint"), the second half's with
    one ("one_endpoint")."""
    ids = [json.loads(record["Body"])["messageId"] for record in records]
    half = len(ids) // 2
    if half == 0:
        raise RuntimeError("no message to tell the events of")
    stream = records_of(stack, ids)
    _warm(stack)
    alone = Telling()
    for message_id in ids[:half]:
        _tell(stack, probe, stream[message_id], alone)
    told = Telling()
    with receiving() as receiver:
        now = utc_now()
        endpoint = Endpoint(
            id=new_endpoint_id(now),
            workspace_id=WORKSPACE,
            url=receiver.url,
            event_types=None,
            description=None,
            created_at=now,
            secrets=(SigningSecret(new_secret()),),
        )
        DynamoDbWebhookStore(stack.client("dynamodb"), "WebhooksTable").add_endpoint(endpoint, 1)
        for message_id in ids[half : 2 * half]:
            _tell(stack, probe, stream[message_id], told)
        _deliver(stack, probe, told)
        received = len(receiver.arrivals)
    if not len(told.delivered.seconds) == received == told.changes:
        raise RuntimeError(
            f"{told.changes} changes, {len(told.delivered.seconds)} deliveries, {received} received"
        )
    return {"no_endpoint": alone, "one_endpoint": told}
