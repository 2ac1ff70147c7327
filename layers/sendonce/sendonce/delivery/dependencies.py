"""The composition root of a dispatcher function: one per channel, built once, lazily."""

from __future__ import annotations

from functools import cache

from sendonce.adapters.dynamodb_messages import DynamoDbMessageStore
from sendonce.adapters.sqs_queue import SqsMessageQueue, SqsRedelivery
from sendonce.aws_clients import client
from sendonce.delivery.dispatcher import Dispatcher
from sendonce.delivery.outbox import OutboxSweeper
from sendonce.delivery.retry_policy import RetryPolicy
from sendonce.messages.model import Channel
from sendonce.ports import Provider
from sendonce.settings import dispatcher_settings

# A claim outlives the provider's timeout by this much before the outbox may call it stranded.
CLAIM_MARGIN_SECONDS = 60


@cache
def provider(channel: Channel) -> Provider:
    settings = dispatcher_settings()
    timeout = settings.provider_timeout_seconds
    choice = settings.provider_for(channel)
    if choice == "ses":
        from sendonce.providers.ses_provider import SesProvider  # noqa: PLC0415

        return SesProvider(
            client("sesv2", timeout_seconds=timeout, sdk_retries=False),
            settings.email_from,
            settings.ses_configuration_set,
        )
    if choice == "sns":
        from sendonce.providers.sns_provider import SnsProvider  # noqa: PLC0415

        return SnsProvider(client("sns", timeout_seconds=timeout, sdk_retries=False))
    from sendonce.providers.http_provider import HttpProvider  # noqa: PLC0415

    return HttpProvider(settings.http_provider_url, settings.http_provider_token, timeout)


@cache
def dispatcher() -> Dispatcher:
    settings = dispatcher_settings()
    return Dispatcher(
        store=DynamoDbMessageStore(client("dynamodb"), settings.messages_table),
        provider_for=provider,
        retry_policy=RetryPolicy(max_attempts=settings.max_delivery_attempts),
        claim_seconds=int(settings.provider_timeout_seconds) + CLAIM_MARGIN_SECONDS,
    )


@cache
def redelivery(channel: Channel) -> SqsRedelivery:
    return SqsRedelivery(client("sqs"), dispatcher_settings().queue_url(channel))


def provider_honours_idempotency_key(channel: Channel) -> bool:
    return provider(channel).honours_idempotency_key


@cache
def outbox_sweeper() -> OutboxSweeper:
    settings = dispatcher_settings()
    return OutboxSweeper(
        store=DynamoDbMessageStore(client("dynamodb"), settings.messages_table),
        queue=SqsMessageQueue(client("sqs"), {channel: settings.queue_url(channel) for channel in Channel}),
        provider_honours_key=provider_honours_idempotency_key,
    )
