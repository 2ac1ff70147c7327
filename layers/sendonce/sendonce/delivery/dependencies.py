"""The composition roots of the delivery functions: one per dispatcher (its channel), one for the
outbox, one for the hand-off from the stream.

A provider is built from its name alone: which provider carries a channel is the settings' choice
among the ones its registry entry allows. That choice is live mode's only: a test message's provider
is the simulator, whatever the channel and the settings, and the registry is never asked for it, so
no real provider's client is ever built for a test message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from sendonce.adapters.dynamodb_delivery import DynamoDbDeliveryStore
from sendonce.adapters.dynamodb_suppressions import DynamoDbSuppressionStore
from sendonce.adapters.sqs_queue import SqsRedelivery
from sendonce.aws_clients import client, client_on_first_use
from sendonce.clock import Clock, utc_now
from sendonce.composition import Root
from sendonce.delivery.dispatcher import Dispatcher
from sendonce.delivery.ports import Provider
from sendonce.delivery.retry_policy import RetryPolicy
from sendonce.messages.model import Message
from sendonce.messages.ports import MessageQueue
from sendonce.modes import Mode
from sendonce.settings import DispatcherSettings, HandoffSettings
from sendonce.sqs_batches import Redelivery

if TYPE_CHECKING:  # imported when the outbox's root is built (build_outbox), not with this module
    from sendonce.delivery.outbox import OutboxSweeper

# A claim outlives the provider's timeout by this much before the outbox may call it stranded.
CLAIM_MARGIN_SECONDS = 60
SECRET_READ_TIMEOUT_SECONDS = 3


def _ses(settings: DispatcherSettings) -> Provider:
    from sendonce.providers.ses_provider import SesProvider  # noqa: PLC0415

    return SesProvider(
        client("sesv2", timeout_seconds=settings.provider_timeout_seconds, sdk_retries=False),
        settings.email_from,
        settings.ses_configuration_set,
    )


def _sns(settings: DispatcherSettings) -> Provider:
    from sendonce.providers.sns_provider import SnsProvider  # noqa: PLC0415

    return SnsProvider(client("sns", timeout_seconds=settings.provider_timeout_seconds, sdk_retries=False))


def _http(settings: DispatcherSettings) -> Provider:
    from sendonce.adapters.secrets_manager import SecretsManagerSecret  # noqa: PLC0415
    from sendonce.providers.http_provider import HttpProvider  # noqa: PLC0415
    from sendonce.providers.with_secret import WithCurrentSecret  # noqa: PLC0415

    def with_token(token: str) -> Provider:
        return HttpProvider(settings.http_provider_url, token, settings.provider_timeout_seconds)

    # The token is read at the first send, not with the function, and then through a cache.
    token = SecretsManagerSecret(
        settings.http_provider_token_arn,
        partial(client, "secretsmanager", timeout_seconds=SECRET_READ_TIMEOUT_SECONDS),
    )
    return WithCurrentSecret(HttpProvider.name, HttpProvider.honours_idempotency_key, with_token, token)


def simulator(settings: DispatcherSettings) -> Provider:
    """Every test message's provider: it records in the messages table and reports on the events queue."""
    from sendonce.adapters.dynamodb_simulator import DynamoDbSimulatorStore  # noqa: PLC0415
    from sendonce.adapters.sqs_queue import SqsEventQueue  # noqa: PLC0415
    from sendonce.simulator.provider import Simulator  # noqa: PLC0415

    return Simulator(
        DynamoDbSimulatorStore(client("dynamodb"), settings.messages_table),
        SqsEventQueue(client("sqs"), settings.events_queue_url),
    )


# Every live provider by the name the settings give it; each module is imported only when chosen.
PROVIDERS: dict[str, Callable[[DispatcherSettings], Provider]] = {"ses": _ses, "sns": _sns, "http": _http}


@dataclass
class Providers:
    """A message's provider: in live mode the settings' choice for its channel, in test mode the
    simulator; each built on first use and then kept. `live` and `test` build them (the registry and
    the simulator unless a test gives others)."""

    settings: DispatcherSettings
    live: dict[str, Callable[[DispatcherSettings], Provider]] = field(default_factory=lambda: PROVIDERS)
    test: Callable[[DispatcherSettings], Provider] = simulator
    _built: dict[str, Provider] = field(default_factory=dict)
    _simulator: Provider | None = None

    def __call__(self, message: Message) -> Provider:
        return self.provider(message.channel, message.mode)

    def provider(self, channel: str, mode: Mode = Mode.LIVE) -> Provider:
        if mode is Mode.TEST:
            # The only provider a test message can get: the live registry is not consulted.
            if self._simulator is None:
                self._simulator = self.test(self.settings)
            return self._simulator
        if channel not in self._built:
            self._built[channel] = self.live[self.settings.provider_for(channel)](self.settings)
        return self._built[channel]

    def honour_idempotency_key(self, channel: str, mode: Mode) -> bool:
        if mode is Mode.TEST:
            from sendonce.simulator.provider import Simulator  # noqa: PLC0415

            return Simulator.honours_idempotency_key
        return self.provider(channel, mode).honours_idempotency_key


@dataclass(frozen=True, slots=True)
class DispatcherDependencies:
    settings: DispatcherSettings
    dispatcher: Dispatcher
    redelivery: Redelivery


def build_dispatcher(channel: str, settings: DispatcherSettings | None = None) -> DispatcherDependencies:
    settings = settings or DispatcherSettings.from_environment()
    providers = Providers(settings)
    providers.provider(channel)  # built with the function: its first live message should not pay for it
    dynamodb = client("dynamodb")
    return DispatcherDependencies(
        settings=settings,
        dispatcher=Dispatcher(
            store=DynamoDbDeliveryStore(dynamodb, settings.messages_table),
            suppressions=DynamoDbSuppressionStore(dynamodb, settings.messages_table),
            provider_for=providers,
            retry_policy=RetryPolicy(max_attempts=settings.max_delivery_attempts),
            claim_seconds=int(settings.provider_timeout_seconds) + CLAIM_MARGIN_SECONDS,
        ),
        # Its client is built only when a record must be postponed.
        redelivery=SqsRedelivery(client_on_first_use("sqs"), settings.queue_url(channel)),
    )


def dispatcher_root(channel: str) -> Root[DispatcherDependencies]:
    return Root(partial(build_dispatcher, channel))


def build_outbox(settings: DispatcherSettings | None = None, clock: Clock = utc_now) -> OutboxSweeper:
    # Only the outbox function sweeps: a dispatcher's cold start skips the sending use cases.
    from sendonce.adapters.dynamodb_outbox import DynamoDbOutboxStore  # noqa: PLC0415
    from sendonce.adapters.sqs_queue import SqsMessageQueue  # noqa: PLC0415
    from sendonce.delivery.outbox import OutboxSweeper  # noqa: PLC0415

    settings = settings or DispatcherSettings.from_environment()
    return OutboxSweeper(
        store=DynamoDbOutboxStore(client("dynamodb"), settings.messages_table),
        queue=SqsMessageQueue(client("sqs"), settings.queue_urls),
        provider_honours_key=Providers(settings).honour_idempotency_key,
        clock=clock,
    )


outbox_root: Root[OutboxSweeper] = Root(build_outbox)


def build_handoff(settings: HandoffSettings | None = None) -> MessageQueue:
    """HandoffFunction's: the channels' queues, which each new message from the stream goes to."""
    from sendonce.adapters.sqs_queue import SqsMessageQueue  # noqa: PLC0415  (the dispatchers' path needs none)

    settings = settings or HandoffSettings.from_environment()
    return SqsMessageQueue(client("sqs"), settings.queue_urls)


handoff_root: Root[MessageQueue] = Root(build_handoff)
