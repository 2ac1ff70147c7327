"""Secrets are read at run time, through a cache, and an unreadable secret is an outage, never a verdict.

- `SecretsManagerSecret` reads through Powertools' parameters utility on a client the composition
  root makes (a fake here): nothing at construction, once per cache age, and every failure is
  `SecretUnavailable`.
- `WithCurrentSecret`: a provider built with the current token; a rotation rebuilds it, and an
  unreadable token is a transient failure (the message is retried, never failed or sent).
- The webhook: an unreadable secret answers `503 unavailable` and publishes nothing; a wrong
  secret answers 401 and publishes nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sendonce import composition
from sendonce.adapters.secrets_manager import SecretsManagerSecret
from sendonce.api import dependencies
from sendonce.api.app import handle
from sendonce.entrypoints.shared.provider_registry import PROVIDERS
from sendonce.errors import TransientFailure
from sendonce.messages.model import Channel, Message, Status
from sendonce.messages.service import MessageService
from sendonce.provider_events.signature import sign
from sendonce.providers.with_secret import WithCurrentSecret
from sendonce.secret_values import SecretUnavailable, no_secret
from sendonce.settings import ApiSettings, DispatcherSettings

from tests.support.lambda_context import FakeLambdaContext
from tests.unit.unit_fakes import API_SETTINGS as FAKE_API_SETTINGS
from tests.unit.unit_fakes import (
    FakeEventQueue,
    FakeQueue,
    InMemoryApiKeys,
    InMemoryStore,
    ManualClock,
    fake_api_dependencies,
)

EVENTS = Path(__file__).resolve().parents[2] / "events"
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:WebhookSigningSecret-AbCdEf"
SECRET = "a-webhook-secret-of-at-least-32-characters"
API_SETTINGS = {**FAKE_API_SETTINGS, "SENDONCE_PROVIDER_EVENTS_SECRET_ARN": SECRET_ARN}


class FakeSecretsManager:
    """The one call the parameters utility makes: get_secret_value(SecretId=...)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values
        self.reads: list[str] = []
        self.failure: Exception | None = None

    def get_secret_value(self, SecretId: str) -> dict[str, Any]:  # the SDK's argument name
        self.reads.append(SecretId)
        if self.failure is not None:
            raise self.failure
        return dict(self.values[SecretId])


class ClientFactory:
    def __init__(self, client: FakeSecretsManager) -> None:
        self.client = client
        self.made = 0

    def __call__(self) -> FakeSecretsManager:
        self.made += 1
        return self.client


@pytest.fixture
def secrets_manager() -> FakeSecretsManager:
    return FakeSecretsManager({SECRET_ARN: {"SecretString": SECRET}})


# ---------------------------------------------------------------- reading a secret
def test_nothing_is_read_or_built_until_the_secret_is_needed(secrets_manager: FakeSecretsManager) -> None:
    factory = ClientFactory(secrets_manager)

    secret = SecretsManagerSecret(SECRET_ARN, factory)

    assert factory.made == 0
    assert secret() == SECRET
    assert factory.made == 1
    assert secrets_manager.reads == [SECRET_ARN]


def test_a_value_is_read_once_per_cache_age(secrets_manager: FakeSecretsManager) -> None:
    secret = SecretsManagerSecret(SECRET_ARN, ClientFactory(secrets_manager))

    assert [secret() for _ in range(5)] == [SECRET] * 5

    assert secrets_manager.reads == [SECRET_ARN]  # cached: one read for five webhooks


def test_a_rotated_value_is_picked_up_once_the_cache_expires(secrets_manager: FakeSecretsManager) -> None:
    secret = SecretsManagerSecret(SECRET_ARN, ClientFactory(secrets_manager), max_age_seconds=1)
    assert secret() == SECRET

    secrets_manager.values[SECRET_ARN] = {"SecretString": "the-rotated-value"}
    assert secret() == SECRET  # still cached
    time.sleep(1.1)

    assert secret() == "the-rotated-value"  # no redeploy, no new execution environment


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(ConnectionError("endpoint unreachable"), id="store unreachable"),
        pytest.param(PermissionError("AccessDeniedException"), id="access denied"),
        pytest.param(KeyError("ResourceNotFoundException"), id="no such secret"),
    ],
)
def test_every_failed_read_is_secret_unavailable(
    secrets_manager: FakeSecretsManager, failure: Exception
) -> None:
    secrets_manager.failure = failure

    with pytest.raises(SecretUnavailable):
        SecretsManagerSecret(SECRET_ARN, ClientFactory(secrets_manager))()


def test_a_client_that_cannot_be_made_is_secret_unavailable() -> None:
    def broken() -> Any:
        raise RuntimeError("no credentials")

    with pytest.raises(SecretUnavailable):
        SecretsManagerSecret(SECRET_ARN, broken)()


@pytest.mark.parametrize(
    "stored",
    [pytest.param({"SecretString": ""}, id="empty"), pytest.param({"SecretBinary": b"x" * 40}, id="binary")],
)
def test_a_secret_without_text_is_unavailable(stored: dict[str, Any]) -> None:
    with pytest.raises(SecretUnavailable, match="no text"):
        SecretsManagerSecret(SECRET_ARN, ClientFactory(FakeSecretsManager({SECRET_ARN: stored})))()


def test_no_secret_named_is_unavailable_and_nothing_is_called(secrets_manager: FakeSecretsManager) -> None:
    factory = ClientFactory(secrets_manager)

    with pytest.raises(SecretUnavailable, match="no secret is configured"):
        SecretsManagerSecret("", factory)()
    with pytest.raises(SecretUnavailable):
        no_secret()
    assert factory.made == 0


def test_settings_hold_the_secrets_names_never_their_values() -> None:
    api = ApiSettings.from_environment({**API_SETTINGS, "SENDONCE_WEBHOOK_SECRET": "a value"})
    dispatcher = DispatcherSettings.from_environment(
        {
            "MESSAGES_TABLE": "MessagesTable",
            "SENDONCE_HASHING_KEY_ARN": "HashingKeySecret",
            "SENDONCE_HTTP_PROVIDER_TOKEN_ARN": "arn:token",
            "SENDONCE_HTTP_PROVIDER_TOKEN": "a value",
        }
    )

    assert api.provider_events_secret_arn == SECRET_ARN
    assert dispatcher.http_provider_token_arn == "arn:token"
    assert "a value" not in repr(api) + repr(dispatcher)


# ---------------------------------------------------------------- the HTTP provider's token
class RecordingProvider:
    name = "recording"
    honours_idempotency_key = True

    def __init__(self, token: str, sent: list[tuple[str, str]]) -> None:
        self.token, self.sent = token, sent

    def send(self, message: Message) -> str:
        self.sent.append((self.token, message.id))
        return f"prov_{message.id}"


def _message() -> Message:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return Message(
        id="msg_01JH0000000000000000000000",
        workspace_id="ws",
        channel=Channel("imessage"),
        to="+15550100000",
        body="hi",
        status=Status.SENDING,
        created_at=now,
        updated_at=now + timedelta(seconds=1),
        attempts=1,
    )


def test_the_provider_is_built_with_the_current_token_and_rebuilt_on_rotation() -> None:
    sent: list[tuple[str, str]] = []
    built: list[str] = []
    tokens = iter(["token-1", "token-1", "token-2"])

    def build(token: str) -> RecordingProvider:
        built.append(token)
        return RecordingProvider(token, sent)

    provider = WithCurrentSecret("http", True, build, lambda: next(tokens))
    for _ in range(3):
        provider.send(_message())

    assert [token for token, _ in sent] == ["token-1", "token-1", "token-2"]
    assert built == ["token-1", "token-2"]  # rebuilt only when the value changed


def test_an_unreadable_token_is_a_transient_failure_and_nothing_is_sent() -> None:
    sent: list[tuple[str, str]] = []

    def unreadable() -> str:
        raise SecretUnavailable("the secret could not be read (EndpointConnectionError)")

    provider = WithCurrentSecret("http", True, lambda token: RecordingProvider(token, sent), unreadable)

    with pytest.raises(TransientFailure) as failure:
        provider.send(_message())
    assert failure.value.code == "provider_credentials_unavailable"
    assert sent == []


def test_the_http_provider_is_built_without_reading_its_token() -> None:
    settings = DispatcherSettings.from_environment(
        {
            "MESSAGES_TABLE": "MessagesTable",
            "SENDONCE_HASHING_KEY_ARN": "HashingKeySecret",
            "SENDONCE_HTTP_PROVIDER_TOKEN_ARN": "arn:token",
        }
    )

    built: list[str] = []

    def clients(service: str, **options: Any) -> Any:
        built.append(service)
        raise AssertionError("no client is built with the provider")

    provider = PROVIDERS["http"](settings, clients)

    assert built == []
    assert provider.name == "http"
    assert provider.honours_idempotency_key is True  # what the outbox asks, without a send


# ---------------------------------------------------------------- the webhook
@pytest.fixture
def events(secrets_manager: FakeSecretsManager) -> Iterator[FakeEventQueue]:
    queue = FakeEventQueue()
    dependencies.root.use(
        fake_api_dependencies(
            MessageService(
                store=InMemoryStore(),
                queue=FakeQueue(),
                dedup_window=timedelta(minutes=15),
                clock=ManualClock(),
            ),
            InMemoryApiKeys.of(),
            settings=API_SETTINGS,
            events=queue,
            provider_events_secret=SecretsManagerSecret(SECRET_ARN, ClientFactory(secrets_manager)),
        )
    )
    yield queue
    composition.reset_all()


def _webhook(secret: str) -> tuple[int, dict[str, str], dict[str, Any]]:
    raw = json.dumps(
        {
            "eventId": "evt_1",
            "messageId": "msg_01JH0000000000000000000000",
            "type": "failed",
            "occurredAt": "2026-01-01T00:00:00Z",
        }
    )
    event = json.loads((EVENTS / "api_send_sms.json").read_text(encoding="utf-8"))
    event["routeKey"] = event["requestContext"]["routeKey"] = "POST /v1/webhooks/{provider}"
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/v1/webhooks/http"
    event["headers"].pop("authorization")
    event["headers"]["content-length"] = str(len(raw))
    event["headers"]["x-sendonce-signature"] = sign(secret, int(time.time()), raw.encode())
    event["body"] = raw
    response = handle(event, FakeLambdaContext())  # type: ignore[arg-type]
    return response["statusCode"], response.get("headers") or {}, json.loads(response["body"])


def test_a_webhook_signed_with_the_secret_is_published(events: FakeEventQueue) -> None:
    status, _, _ = _webhook(SECRET)

    assert status == 200
    assert [event.event_id for event in events.published] == ["evt_1"]


def test_a_webhook_signed_with_another_secret_is_401_and_published_nowhere(events: FakeEventQueue) -> None:
    status, _, body = _webhook("change-me-webhook-secret")

    assert status == 401
    assert body["error"]["code"] == "unauthorized"
    assert events.published == []


def test_when_the_secret_cannot_be_read_the_webhook_is_503_and_published_nowhere(
    events: FakeEventQueue, secrets_manager: FakeSecretsManager
) -> None:
    secrets_manager.failure = ConnectionError("Secrets Manager is unreachable")

    status, headers, body = _webhook(SECRET)

    assert status == 503
    assert body["error"]["code"] == "unavailable"
    assert {k.lower(): v for k, v in headers.items()}.get("retry-after")
    assert events.published == []
