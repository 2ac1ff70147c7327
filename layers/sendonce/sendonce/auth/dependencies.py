"""The composition root of the authorizer function: the API key store, from its settings."""

from __future__ import annotations

from sendonce.adapters.dynamodb_api_keys import DynamoDbApiKeyStore
from sendonce.aws_clients import client
from sendonce.composition import Root
from sendonce.settings import AuthorizerSettings


def build(settings: AuthorizerSettings | None = None) -> DynamoDbApiKeyStore:
    settings = settings or AuthorizerSettings.from_environment()
    return DynamoDbApiKeyStore(client("dynamodb"), settings.api_keys_table)


root: Root[DynamoDbApiKeyStore] = Root(build)
