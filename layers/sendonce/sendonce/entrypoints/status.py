"""StatusFunction: applies provider delivery events (our webhook's, and SES's and End User Messaging
SMS's notifications through SNS) once each, from its SQS batch, an unreadable record failing alone."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sendonce.adapters.dynamodb_provider_events import DynamoDbProviderEventStore
from sendonce.aws_clients import Clients, client
from sendonce.composition import Root
from sendonce.entrypoints.shared.hashing_key import deployment_keyed_hash
from sendonce.entrypoints.shared.sqs_batches import SqsRecord, process_batch, read_record
from sendonce.observability import logger, metrics
from sendonce.provider_events.applier import apply_event
from sendonce.provider_events.model import ProviderEvent, from_json, from_ses_notification
from sendonce.provider_events.ports import ProviderEventStore
from sendonce.provider_events.sms_v2_events import from_sms_v2_event, is_sms_v2_event
from sendonce.providers.ses_provider import MESSAGE_ID_TAG
from sendonce.providers.sms_v2_provider import CONTEXT_MESSAGE_ID
from sendonce.settings import EventsSettings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext


def build(settings: EventsSettings, clients: Clients) -> ProviderEventStore:
    return DynamoDbProviderEventStore(
        clients("dynamodb"), settings.messages_table, deployment_keyed_hash(settings.hashing_key_arn, clients)
    )


root: Root[ProviderEventStore] = Root(lambda: build(EventsSettings.from_environment(), client))


class UnreadableEvent(ValueError):
    pass


def provider_event(body: str) -> ProviderEvent | None:
    """The event a record carries; None for a notification that is not about a message of ours."""
    try:
        data = json.loads(body)
        if isinstance(data, dict) and data.get("Type") == "Notification":  # SNS envelope: SES or sms-v2
            notification = json.loads(data["Message"])
            if not isinstance(notification, dict):
                raise TypeError("the notification's message is not a JSON object")
            if is_sms_v2_event(notification):
                return from_sms_v2_event(notification, CONTEXT_MESSAGE_ID)
            return from_ses_notification(notification, MESSAGE_ID_TAG)
        return from_json(body)
    except (ValueError, KeyError, TypeError) as error:
        raise UnreadableEvent(str(error)) from None


def handle_batch(store: ProviderEventStore, event: Any) -> dict[str, Any]:
    def handle_record(record: SqsRecord) -> str:
        parsed = read_record(record, provider_event, UnreadableEvent, "message.events.unreadable_record")
        if parsed is None:
            return "not_ours"
        return apply_event(store, parsed).value

    return process_batch(event, handle_record)


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle_batch(root.get(), event)
