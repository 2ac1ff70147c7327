"""The composition root of the API function: one object, built from its settings on first use."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

from sendonce.adapters.dynamodb_sending import DynamoDbSendingStore
from sendonce.adapters.sqs_queue import SqsEventQueue, SqsMessageQueue
from sendonce.api.answers import send_answer
from sendonce.api.idempotency import SendOnce, StoredAnswer, idempotency_config, make_idempotent
from sendonce.aws_clients import client
from sendonce.composition import Root
from sendonce.messages.service import MessageService, SendCommand
from sendonce.provider_events.ports import EventQueue
from sendonce.settings import ApiSettings


@dataclass(frozen=True, slots=True)
class ApiDependencies:
    settings: ApiSettings
    messages: MessageService
    idempotency_config: IdempotencyConfig
    # `send_once(request={"workspace", "key", "payload"}, command=...)`: at most once per key.
    send_once: SendOnce
    events: EventQueue

    def send(self, command: SendCommand) -> StoredAnswer:
        return send_answer(self.messages.send(command))


def build(settings: ApiSettings | None = None) -> ApiDependencies:
    settings = settings or ApiSettings.from_environment()
    dynamodb, sqs = client("dynamodb"), client("sqs")
    messages = MessageService(
        store=DynamoDbSendingStore(dynamodb, settings.messages_table),
        queue=SqsMessageQueue(sqs, settings.queue_urls),
        dedup_window=timedelta(seconds=settings.dedup_window_seconds),
    )
    config = idempotency_config(settings.idempotency_ttl_seconds)

    def send(*, request: dict[str, Any], command: SendCommand) -> StoredAnswer:
        """The once-only part: its answer is what an Idempotency-Key replays."""
        return send_answer(messages.send(command))

    return ApiDependencies(
        settings=settings,
        messages=messages,
        idempotency_config=config,
        send_once=make_idempotent(send, settings.idempotency_table, dynamodb, config),
        events=SqsEventQueue(sqs, settings.events_queue_url),
    )


root: Root[ApiDependencies] = Root(build)
