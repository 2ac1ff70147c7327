"""The dispatcher's SQS batch: each record handled alone, failures reported per record.

A record that cannot be read fails alone and reaches the dead-letter queue after its redrive;
it never blocks the rest of its batch.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from sendonce import channels
from sendonce.composition import Root
from sendonce.delivery.dependencies import DispatcherDependencies, dispatcher_root
from sendonce.delivery.dispatcher import DeliveryRequest, RetryLater
from sendonce.messages.ids import looks_like_message_id
from sendonce.observability import logger, metrics
from sendonce.sqs_batches import LambdaHandler, process_batch


class UnreadableRecord(ValueError):
    pass


def delivery_request(body: str) -> DeliveryRequest:
    try:
        parsed = json.loads(body)
        workspace_id, message_id = parsed["workspaceId"], parsed["messageId"]
    except (ValueError, TypeError, KeyError):
        raise UnreadableRecord("the record does not name a message") from None
    if not isinstance(workspace_id, str) or not isinstance(message_id, str):
        raise UnreadableRecord("the record does not name a message")
    if not looks_like_message_id(message_id):
        raise UnreadableRecord("the record does not name a message")
    return DeliveryRequest(workspace_id=workspace_id, message_id=message_id)


def handle_batch(dependencies: DispatcherDependencies, event: Any, context: LambdaContext) -> dict[str, Any]:
    def handle_record(record: SQSRecord) -> str:
        try:
            request = delivery_request(record.body)
        except UnreadableRecord:
            logger.error(
                "message.dispatch.unreadable_record",
                extra={"event": "message.dispatch.unreadable_record", "sqs_message_id": record.message_id},
            )
            raise
        try:
            return dependencies.dispatcher.deliver(request).value
        except RetryLater as retry:
            try:
                dependencies.redelivery.postpone(record.receipt_handle, retry.seconds)
            except Exception:  # the queue's own visibility timeout brings it back instead
                logger.warning("message.dispatch.postpone_failed", extra={"message_id": request.message_id})
            raise

    return process_batch(event, context, handle_record)


def dispatcher_function(channel: str) -> tuple[LambdaHandler, Root[DispatcherDependencies]]:
    """A channel's dispatcher function: its handler and its composition root.

    Every dispatcher is this one function; its file in functions/ only names the channel.
    """
    channels.spec(channel)  # an unknown channel fails at import, not on its first message
    root = dispatcher_root(channel)

    @logger.inject_lambda_context(clear_state=True)
    @metrics.log_metrics
    def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
        return handle_batch(root.get(), event, context)

    return handler, root
