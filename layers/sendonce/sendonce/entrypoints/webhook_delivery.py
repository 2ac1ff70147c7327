"""WebhookDeliveryFunction: either lane's records side by side, a signed POST each, retried on schedule.

A delivery batch comes from one of the two lanes' queues (`webhooks.delivery`), told apart by the
record's eventSourceARN. Its records are delivered side by side, one thread each (BatchSize 10), so
one endpoint that takes its patience holds up no other record of the batch; a retry is postponed in
the queue the record came from. The deliverer's two lanes are two queues: each record is postponed
in the queue it came from, and a task is moved only to the slow lane's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from msgspec import Struct

from sendonce.adapters.dynamodb_webhooks import DynamoDbWebhookStore
from sendonce.adapters.sqs_queue import SqsRedelivery
from sendonce.adapters.sqs_webhook_queue import SqsDeliveryQueue, parse_task
from sendonce.aws_clients import Clients, client, client_on_first_use
from sendonce.composition import Root
from sendonce.entrypoints.shared.sqs_batches import (
    Redelivery,
    SqsRecord,
    process_batch,
    read_record,
    retried_later,
)
from sendonce.entrypoints.shared.webhook_sending import sender
from sendonce.observability import logger, metrics
from sendonce.settings import WebhookDeliverySettings
from sendonce.status_webhooks.delivery import Lane, WebhookDeliverer, parse_schedule

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

# A delivery batch's records side by side, one thread each: the event sources' BatchSize.
DELIVERY_WORKERS = 10


class DeliveryDependencies(Struct, frozen=True):
    deliverer: WebhookDeliverer
    redelivery: Redelivery  # postpones the fast lane's records
    slow_redelivery: Redelivery  # and the slow lane's
    slow_lane_queue: str  # the slow lane queue's name: a record whose eventSourceARN ends with it is its


def queue_name(url_or_arn: str) -> str:
    """A queue's name, the last part of its URL (`.../<account>/<name>`) or ARN (`...:<name>`)."""
    return url_or_arn.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]


def build(settings: WebhookDeliverySettings, clients: Clients) -> DeliveryDependencies:
    store = DynamoDbWebhookStore(clients("dynamodb"), settings.webhooks_table)
    sqs = client_on_first_use("sqs", build=clients)
    return DeliveryDependencies(
        deliverer=WebhookDeliverer(
            events=store,
            endpoints=store,
            send=sender(allow_private=settings.allow_private_targets),
            slow_lane=SqsDeliveryQueue(sqs, settings.slow_lane_queue_url),
            schedule=parse_schedule(settings.retry_schedule),
        ),
        redelivery=SqsRedelivery(sqs, settings.webhook_queue_url),
        slow_redelivery=SqsRedelivery(sqs, settings.slow_lane_queue_url),
        slow_lane_queue=queue_name(settings.slow_lane_queue_url),
    )


root: Root[DeliveryDependencies] = Root(lambda: build(WebhookDeliverySettings.from_environment(), client))


def handle_delivery_batch(
    dependencies: DeliveryDependencies, event: Any, workers: int = DELIVERY_WORKERS
) -> dict[str, Any]:
    def handle_record(record: SqsRecord) -> str:
        task = read_record(record, parse_task, ValueError, "webhook.delivery.unreadable_record")
        slow = queue_name(record.source_arn) == dependencies.slow_lane_queue
        lane = Lane.SLOW if slow else Lane.FAST
        return retried_later(
            dependencies.slow_redelivery if slow else dependencies.redelivery,
            record,
            lambda: dependencies.deliverer.deliver(task, lane).value,
            "webhook.delivery.postpone_failed",
            event_id=task.event_id,
        )

    return process_batch(event, handle_record, workers)


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle_delivery_batch(root.get(), event)
