"""Dispatch<Channel>Function: its composition root and its SQS batch, each record handled alone.

Every dispatcher is this one module: a channel is declared once (`sendonce.channels`), and its
function's file in functions/ only names it (`dispatcher_function("sms")`), so a channel costs no
module here.

A record that cannot be read fails alone and reaches the dead-letter queue after its redrive;
it never blocks the rest of its batch.

A dispatcher never starts a provider call its invocation could not finish: before each record it
checks the time left, and once that is shorter than the provider's timeout plus a margin, it hands
that record and every later one back untouched (reported as failures, so SQS brings them back):
nothing claimed, no attempt counted. A call cut off by the function's timeout would leave a claimed
attempt whose outcome nobody records, which through SES or SNS ends `unknown`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from msgspec import Struct
from msgspec.structs import replace

from sendonce import channels
from sendonce.adapters.dynamodb_dispatch import DynamoDbDispatchStore
from sendonce.adapters.dynamodb_provider_health import DynamoDbProviderHealth
from sendonce.adapters.sqs_queue import SqsRedelivery, copy_of
from sendonce.aws_clients import Clients, client, client_on_first_use
from sendonce.composition import Root
from sendonce.dispatch.dispatcher import Dispatcher, DispatchRequest
from sendonce.dispatch.retry_policy import RetryPolicy
from sendonce.entrypoints.shared.hashing_key import deployment_keyed_hash
from sendonce.entrypoints.shared.provider_registry import PROVIDERS, ProviderBuilder, Providers
from sendonce.entrypoints.shared.sqs_batches import (
    LambdaHandler,
    Redelivery,
    SqsRecord,
    process_batch,
    read_record,
    retried_later,
)
from sendonce.messages.ids import looks_like_message_id
from sendonce.observability import logger, metrics
from sendonce.settings import DispatcherSettings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

# A claim outlives the provider's timeout by this much before the outbox may call it stranded.
CLAIM_MARGIN_SECONDS = 60
# Time a record needs beyond the provider's own timeout: the connection (botocore allows 3 s), the
# claim before the call and the write after it.
PROVIDER_CALL_MARGIN_SECONDS = 5.0


# ---------------------------------------------------------------------------- composition root
class DispatcherDependencies(Struct, frozen=True):
    settings: DispatcherSettings
    dispatcher: Dispatcher
    redelivery: Redelivery


def build(
    channel: str,
    settings: DispatcherSettings,
    clients: Clients,
    live: Mapping[str, ProviderBuilder] = PROVIDERS,
) -> DispatcherDependencies:
    """A channel's dispatcher, its providers chosen from `live` (the registry's)."""
    providers = Providers.of(settings, clients, live)
    listed = providers.providers(channel)  # built with the function: its first message should not pay
    dynamodb = clients("dynamodb")
    return DispatcherDependencies(
        settings=settings,
        dispatcher=Dispatcher(
            store=DynamoDbDispatchStore(
                dynamodb, settings.messages_table, deployment_keyed_hash(settings.hashing_key_arn, clients)
            ),
            providers_for=providers,
            retry_policy=RetryPolicy(max_attempts=settings.max_dispatch_attempts),
            claim_seconds=int(settings.provider_timeout_seconds) + CLAIM_MARGIN_SECONDS,
            # One provider has nobody to skip to: its deliveries never read or write a cool-off.
            health=DynamoDbProviderHealth(
                dynamodb,
                settings.messages_table,
                after=settings.provider_cooloff_after,
                cooloff_seconds=settings.provider_cooloff_seconds,
            )
            if len(listed) > 1
            else None,
            call_seconds=settings.provider_timeout_seconds + PROVIDER_CALL_MARGIN_SECONDS,
        ),
        # Its client is built only when a record must be postponed.
        redelivery=SqsRedelivery(client_on_first_use("sqs", build=clients), settings.queue_url(channel)),
    )


def _from_environment(channel: str) -> DispatcherDependencies:
    return build(channel, DispatcherSettings.from_environment(), client)


# ---------------------------------------------------------------------------- the batch
class UnreadableRecord(ValueError):
    pass


class OutOfTime(RuntimeError):
    """Too little time left for a provider call: the record goes back to its queue untouched."""


def dispatch_request(body: str) -> DispatchRequest:
    try:
        parsed = json.loads(body)
        workspace_id, message_id = parsed["workspaceId"], parsed["messageId"]
    except (ValueError, TypeError, KeyError):
        raise UnreadableRecord("the record does not name a message") from None
    if not isinstance(workspace_id, str) or not isinstance(message_id, str):
        raise UnreadableRecord("the record does not name a message")
    if not looks_like_message_id(message_id):
        raise UnreadableRecord("the record does not name a message")
    return DispatchRequest(workspace_id=workspace_id, message_id=message_id, seen=copy_of(parsed))


def handle_batch(dependencies: DispatcherDependencies, event: Any, context: LambdaContext) -> dict[str, Any]:
    needed_millis = (dependencies.settings.provider_timeout_seconds + PROVIDER_CALL_MARGIN_SECONDS) * 1000
    handed_back: list[str] = []

    def time_left() -> float:
        return float(context.get_remaining_time_in_millis()) / 1000

    def handle_record(record: SqsRecord) -> str:
        # Once out of time, stay out: every later record goes back too, whatever the clock says.
        if handed_back or context.get_remaining_time_in_millis() < needed_millis:
            handed_back.append(record.message_id)
            raise OutOfTime("too little time left for a provider call")
        request = replace(
            read_record(record, dispatch_request, UnreadableRecord, "message.dispatch.unreadable_record"),
            receive_count=record.receive_count,
        )
        return retried_later(
            dependencies.redelivery,
            record,
            lambda: dependencies.dispatcher.dispatch(request, time_left).value,
            "message.dispatch.postpone_failed",
            message_id=request.message_id,
        )

    result = process_batch(event, handle_record)
    if handed_back:
        metrics.add_metric(name="DispatchHandedBack", unit="Count", value=len(handed_back))
        logger.warning(
            "message.dispatch.out_of_time",
            extra={
                "event": "message.dispatch.out_of_time",
                "handed_back": len(handed_back),
                "remaining_millis": context.get_remaining_time_in_millis(),
                "needed_millis": needed_millis,
            },
        )
    return result


# ---------------------------------------------------------------------------- the function
def dispatcher_function(channel: str) -> tuple[LambdaHandler, Root[DispatcherDependencies]]:
    """A channel's dispatcher function: its handler and its composition root."""
    channels.spec(channel)  # an unknown channel fails at import, not on its first message
    root = Root(partial(_from_environment, channel))

    @logger.inject_lambda_context(clear_state=True)
    @metrics.log_metrics
    def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
        return handle_batch(root.get(), event, context)

    return handler, root
