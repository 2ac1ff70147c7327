"""The composition root of the API function: settings, clients and adapters, built once, lazily."""

from __future__ import annotations

from datetime import timedelta
from functools import cache

from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

from sendonce.adapters.dynamodb_messages import DynamoDbMessageStore
from sendonce.adapters.sqs_queue import SqsEventQueue, SqsMessageQueue
from sendonce.api.idempotency import SendOnce, idempotency_config, make_idempotent
from sendonce.aws_clients import client
from sendonce.messages.service import MessageService
from sendonce.settings import api_settings


@cache
def message_service() -> MessageService:
    settings = api_settings()
    return MessageService(
        store=DynamoDbMessageStore(client("dynamodb"), settings.messages_table),
        queue=SqsMessageQueue(client("sqs"), settings.queue_urls()),
        dedup_window=timedelta(seconds=settings.dedup_window_seconds),
    )


@cache
def send_idempotency_config() -> IdempotencyConfig:
    return idempotency_config(api_settings().idempotency_ttl_seconds)


@cache
def idempotent_sender(send: SendOnce) -> SendOnce:
    return make_idempotent(
        send, api_settings().idempotency_table, client("dynamodb"), send_idempotency_config()
    )


@cache
def event_queue() -> SqsEventQueue:
    return SqsEventQueue(client("sqs"), api_settings().events_queue_url)
