"""The channel queues on SQS: one queue per channel, a small JSON body naming the message and
carrying a copy of it (what the dispatcher's claim sends, while the message is still as copied)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sendonce.adapters.dynamodb_items import from_item, to_item
from sendonce.errors import DependencyUnavailable, QueueUnavailable
from sendonce.messages.model import Message
from sendonce.messages.ports import Deliverable, Handoff

if TYPE_CHECKING:  # only the events queue publishes them; the API's cold start needs no event model
    from sendonce.provider_events.model import ProviderEvent
from sendonce.side_by_side import side_by_side

# SQS takes at most 10 records in one SendMessageBatch, and holds one back at most 15 minutes.
SQS_BATCH_LIMIT = 10
MAX_DELAY_SECONDS = 900
# SQS takes records of at most 256 KiB: a record whose copy would make it larger carries none.
MAX_COPY_BYTES = 200_000


def queue_body(message: Deliverable) -> str:
    """The record: the message's id and workspace, and, for a message (not an outbox entry), a copy
    of it as the table holds it (`to_item`), which the dispatcher's claim sends while the message is
    still as copied (`copy_of`)."""
    body: dict[str, Any] = {"messageId": message.id, "workspaceId": message.workspace_id}
    if isinstance(message, Message):
        body["message"] = to_item(message, outbox_due_at=None)
        copied = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
        if len(copied.encode("utf-8")) <= MAX_COPY_BYTES:
            return copied
        del body["message"]  # an email with a large html part: the claim reads the item instead
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def copy_of(body: Mapping[str, Any]) -> Message | None:
    """The message a record's body carries (`queue_body`), or None when it carries none or one this
    code cannot read (the claim then reads the message itself)."""
    copy = body.get("message")
    if not isinstance(copy, dict):
        return None
    try:
        return from_item(copy)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def within_sqs_delay(seconds: int) -> int:
    """A delay SQS takes: 0 to MAX_DELAY_SECONDS."""
    return min(max(seconds, 0), MAX_DELAY_SECONDS)


class SqsMessageQueue:
    def __init__(self, client: Any, queue_urls: Mapping[str, str]) -> None:
        self._client = client
        self._queue_urls = dict(queue_urls)

    def enqueue(self, message: Deliverable, delay_seconds: int = 0) -> None:
        try:
            self._client.send_message(
                QueueUrl=self._queue_urls[message.channel],
                MessageBody=queue_body(message),
                DelaySeconds=within_sqs_delay(delay_seconds),
            )
        except Exception as error:
            raise QueueUnavailable(str(error)) from error

    def enqueue_batch(self, handoffs: Sequence[Handoff]) -> list[Handoff]:
        """`SendMessageBatch`, 10 records a call, per queue, the calls side by side; a record SQS refused
        is returned, not raised."""
        by_queue: dict[str, list[Handoff]] = defaultdict(list)
        refused: list[Handoff] = []
        for handoff in handoffs:
            url = self._queue_urls.get(handoff.message.channel)
            if url is None:
                refused.append(handoff)
            else:
                by_queue[url].append(handoff)
        batches = [
            (url, waiting[start : start + SQS_BATCH_LIMIT])
            for url, waiting in by_queue.items()
            for start in range(0, len(waiting), SQS_BATCH_LIMIT)
        ]
        # Each batch is its own round trip: side by side, 100 records take the time of one or two.
        for refused_here in side_by_side(lambda batch: self._send_batch(*batch), batches):
            refused += refused_here
        return refused

    def _send_batch(self, url: str, batch: list[Handoff]) -> list[Handoff]:
        try:
            response = self._client.send_message_batch(
                QueueUrl=url,
                Entries=[
                    {
                        "Id": str(index),
                        "MessageBody": queue_body(handoff.message),
                        "DelaySeconds": within_sqs_delay(handoff.delay_seconds),
                    }
                    for index, handoff in enumerate(batch)
                ],
            )
        except Exception:
            return batch
        return [batch[int(failure["Id"])] for failure in response.get("Failed", [])]


class SqsRedelivery:
    """Postpones a record of one queue: the backoff of a retry without sleeping in the Lambda."""

    MAX_VISIBILITY_SECONDS = 12 * 60 * 60

    def __init__(self, client: Any, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def postpone(self, receipt_handle: str, seconds: int) -> None:
        self._client.change_message_visibility(
            QueueUrl=self._queue_url,
            ReceiptHandle=receipt_handle,
            VisibilityTimeout=min(max(seconds, 0), self.MAX_VISIBILITY_SECONDS),
        )


class SqsEventQueue:
    """Provider events waiting to be applied: the webhook acknowledges once its event is here."""

    def __init__(self, client: Any, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def publish(self, event: ProviderEvent, delay_seconds: int = 0) -> None:
        try:
            self._client.send_message(
                QueueUrl=self._queue_url,
                MessageBody=event.to_json(),
                DelaySeconds=within_sqs_delay(delay_seconds),
            )
        except Exception as error:
            raise DependencyUnavailable(str(error)) from error
