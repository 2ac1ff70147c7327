"""The composition roots of the webhook functions: the stream's recorder, and the deliverer.

The sender checks a target and posts to the address it checked (`webhooks.outbound`); the local
stack's settings let it reach loopback receivers. The deliverer's two lanes are two queues
(`webhooks.delivery`): each record is postponed in the queue it came from, and a task is moved
only to the slow lane's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sendonce.adapters.dynamodb_webhooks import DynamoDbWebhookStore
from sendonce.adapters.sqs_queue import SqsRedelivery
from sendonce.adapters.sqs_webhook_queue import SqsDeliveryQueue
from sendonce.aws_clients import client, client_on_first_use
from sendonce.composition import Root
from sendonce.settings import MessageChangesSettings, WebhookDeliverySettings
from sendonce.sqs_batches import Redelivery
from sendonce.webhooks.delivery import Answer, Sender, WebhookDeliverer, parse_schedule
from sendonce.webhooks.events import EventRecorder


def sender(*, allow_private: bool) -> Sender:
    """Checks the target before every attempt, then posts to the very address it checked."""
    from sendonce.webhooks import outbound  # noqa: PLC0415

    def send(url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> Answer:
        try:
            target = outbound.check_url(url, allow_private=allow_private)
        except outbound.UnsafeTarget as refused:
            return Answer(None, f"refused: {refused.reason}")
        answer = outbound.post(target, body, headers, timeout=timeout)
        return Answer(answer.status, answer.error, answer.timed_out)

    return send


def target_checker(*, allow_private: bool) -> Callable[[str], object]:
    """The check at registration: a host that does not resolve yet is taken (it is checked again,
    resolved, before every attempt); one that resolves to an address it may not reach is refused."""
    from sendonce.webhooks import outbound  # noqa: PLC0415

    def check(url: str) -> object:
        try:
            return outbound.check_url(url, allow_private=allow_private)
        except outbound.Unresolvable:
            return None

    return check


def build_recorder(settings: MessageChangesSettings | None = None) -> EventRecorder:
    settings = settings or MessageChangesSettings.from_environment()
    store = DynamoDbWebhookStore(client("dynamodb"), settings.webhooks_table)
    return EventRecorder(
        events=store, endpoints=store, queue=SqsDeliveryQueue(client("sqs"), settings.webhook_queue_url)
    )


recorder_root: Root[EventRecorder] = Root(build_recorder)


@dataclass(frozen=True, slots=True)
class DeliveryDependencies:
    deliverer: WebhookDeliverer
    redelivery: Redelivery  # postpones the fast lane's records
    slow_redelivery: Redelivery  # and the slow lane's
    slow_lane_queue: str  # the slow lane queue's name: a record whose eventSourceARN ends with it is its


def queue_name(url_or_arn: str) -> str:
    """A queue's name, the last part of its URL (`.../<account>/<name>`) or ARN (`...:<name>`)."""
    return url_or_arn.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]


def build_delivery(settings: WebhookDeliverySettings | None = None) -> DeliveryDependencies:
    settings = settings or WebhookDeliverySettings.from_environment()
    store = DynamoDbWebhookStore(client("dynamodb"), settings.webhooks_table)
    sqs = client_on_first_use("sqs")
    return DeliveryDependencies(
        deliverer=WebhookDeliverer(
            events=store,
            endpoints=store,
            send=sender(allow_private=settings.allow_private_targets),
            slow_lane=SqsDeliveryQueue(sqs, settings.slow_lane_queue_url),
            schedule=parse_schedule(settings.retry_schedule),
            timeout_seconds=settings.timeout_seconds,
        ),
        redelivery=SqsRedelivery(sqs, settings.webhook_queue_url),
        slow_redelivery=SqsRedelivery(sqs, settings.slow_lane_queue_url),
        slow_lane_queue=queue_name(settings.slow_lane_queue_url),
    )


delivery_root: Root[DeliveryDependencies] = Root(build_delivery)
