"""The composition root of the status function: the provider event store, from its settings."""

from __future__ import annotations

from sendonce.adapters.dynamodb_provider_events import DynamoDbProviderEventStore
from sendonce.aws_clients import client
from sendonce.composition import Root
from sendonce.provider_events.ports import ProviderEventStore
from sendonce.settings import EventsSettings


def build(settings: EventsSettings | None = None) -> ProviderEventStore:
    settings = settings or EventsSettings.from_environment()
    return DynamoDbProviderEventStore(client("dynamodb"), settings.messages_table)


root: Root[ProviderEventStore] = Root(build)
