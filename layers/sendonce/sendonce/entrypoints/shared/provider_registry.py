"""The providers a message can go out through, for the dispatchers and the outbox: each built from
its name, its settings and the clients it is given.

A provider is built from its name alone: which provider carries a channel is the settings' choice
among the ones its registry entry allows. That choice is live mode's only: a test message's provider
is the simulator, whatever the channel and the settings, and the registry is never asked for it, so
no real provider's client is ever built for a test message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

from msgspec import Struct, field

from sendonce.aws_clients import Clients
from sendonce.dispatch.ports import Provider
from sendonce.messages.model import Message
from sendonce.modes import Mode
from sendonce.settings import DispatcherSettings

SECRET_READ_TIMEOUT_SECONDS = 3

# Builds a provider from the settings, with the clients it is given.
ProviderBuilder = Callable[[DispatcherSettings, Clients], Provider]


def _ses(settings: DispatcherSettings, clients: Clients) -> Provider:
    from sendonce.providers.ses_provider import SesProvider  # noqa: PLC0415

    return SesProvider(
        clients("sesv2", timeout_seconds=settings.provider_timeout_seconds, sdk_retries=False),
        settings.email_from,
        settings.ses_configuration_set,
    )


def _sns(settings: DispatcherSettings, clients: Clients) -> Provider:
    from sendonce.providers.sns_provider import SnsProvider  # noqa: PLC0415

    return SnsProvider(clients("sns", timeout_seconds=settings.provider_timeout_seconds, sdk_retries=False))


def _http(settings: DispatcherSettings, clients: Clients) -> Provider:
    from sendonce.adapters.secrets_manager import SecretsManagerSecret  # noqa: PLC0415
    from sendonce.providers.http_provider import HttpProvider  # noqa: PLC0415
    from sendonce.providers.with_secret import WithCurrentSecret  # noqa: PLC0415

    def with_token(token: str) -> Provider:
        return HttpProvider(settings.http_provider_url, token, settings.provider_timeout_seconds)

    # The token is read at the first send, not with the function, and then through a cache.
    token = SecretsManagerSecret(
        settings.http_provider_token_arn,
        partial(clients, "secretsmanager", timeout_seconds=SECRET_READ_TIMEOUT_SECONDS),
    )
    return WithCurrentSecret(HttpProvider.name, HttpProvider.honours_idempotency_key, with_token, token)


def simulator(settings: DispatcherSettings, clients: Clients) -> Provider:
    """Every test message's provider: it records in the messages table and reports on the events queue."""
    from sendonce.adapters.dynamodb_simulator import DynamoDbSimulatorStore  # noqa: PLC0415
    from sendonce.adapters.sqs_queue import SqsEventQueue  # noqa: PLC0415
    from sendonce.simulator.provider import Simulator  # noqa: PLC0415

    return Simulator(
        DynamoDbSimulatorStore(clients("dynamodb"), settings.messages_table),
        SqsEventQueue(clients("sqs"), settings.events_queue_url),
    )


# Every live provider by the name the settings give it; each module is imported only when chosen.
PROVIDERS: dict[str, ProviderBuilder] = {"ses": _ses, "sns": _sns, "http": _http}


def _with(build: ProviderBuilder, clients: Clients) -> Callable[[DispatcherSettings], Provider]:
    return lambda settings: build(settings, clients)


class Providers(Struct):
    """A message's provider: in live mode the settings' choice for its channel, in test mode the
    simulator; each built on first use and then kept. `live` and `test` build them (`of`: the
    registry's and the simulator, with the clients given; a test gives its own)."""

    settings: DispatcherSettings
    live: Mapping[str, Callable[[DispatcherSettings], Provider]]
    test: Callable[[DispatcherSettings], Provider]
    _built: dict[str, Provider] = field(default_factory=dict)
    _simulator: Provider | None = None

    @classmethod
    def of(
        cls, settings: DispatcherSettings, clients: Clients, live: Mapping[str, ProviderBuilder] = PROVIDERS
    ) -> Providers:
        return cls(
            settings,
            live={name: _with(build, clients) for name, build in live.items()},
            test=_with(simulator, clients),
        )

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
