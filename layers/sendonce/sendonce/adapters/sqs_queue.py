"""The channel queues on SQS: one queue per channel, a small JSON body naming the message."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from sendonce.errors import DependencyUnavailable, QueueUnavailable
from sendonce.messages.ports import Deliverable
from sendonce.provider_events.model import ProviderEvent


def queue_body(message: Deliverable) -> str:
    return json.dumps({"messageId": message.id, "workspaceId": message.workspace_id}, separators=(",", ":"))


class SqsMessageQueue:
    def __init__(self, client: Any, queue_urls: Mapping[str, str]) -> None:
        self._client = client
        self._queue_urls = dict(queue_urls)

    def enqueue(self, message: Deliverable, delay_seconds: int = 0) -> None:
        try:
            self._client.send_message(
                QueueUrl=self._queue_urls[message.channel],
                MessageBody=queue_body(message),
                DelaySeconds=min(max(delay_seconds, 0), 900),
            )
        except Exception as error:
            raise QueueUnavailable(str(error)) from error


class SqsRedelivery:
    """Postpones a record of one queue: the backoff of a retry without sleeping in the Lambda."""

    MAX_VISIBILITY_SECONDS = 12 * 60 * 60

    def __init__(self, client_factory: Callable[[], Any], queue_url: str) -> None:
        self._client_factory = client_factory
        self._client: Any = None
        self._queue_url = queue_url

    def postpone(self, receipt_handle: str, seconds: int) -> None:
        if self._client is None:
            self._client = self._client_factory()
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

    def publish(self, event: ProviderEvent) -> None:
        try:
            self._client.send_message(QueueUrl=self._queue_url, MessageBody=event.to_json())
        except Exception as error:
            raise DependencyUnavailable(str(error)) from error
