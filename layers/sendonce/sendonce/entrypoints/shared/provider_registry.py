"""The providers a message can go out through, for the dispatchers and the outbox: each built from
its name, its settings and the clients it is given.

A provider is built from its name alone: which providers carry a channel, and in which order, is
the settings' choice among the ones its registry entry allows. That choice is live mode's only: a
test message's provider is the simulator, whatever the channel and the settings, and the registry
is never asked for it, so no real provider's client is ever built for a test message.
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


def _twilio(settings: DispatcherSettings, clients: Clients) -> Provider:
    from sendonce.adapters.secrets_manager import SecretsManagerSecret  # noqa: PLC0415
    from sendonce.providers.twilio_provider import TwilioCredentials, TwilioProvider  # noqa: PLC0415
    from sendonce.providers.with_secret import AskableWithCurrentSecret  # noqa: PLC0415

    def with_credentials(value: str) -> TwilioProvider:
        return TwilioProvider(
            TwilioCredentials.parse(value),
            base_url=settings.twilio_base_url,
            sender=settings.twilio_from,
            status_callback_url=settings.twilio_status_callback_url,
            timeout_seconds=settings.provider_timeout_seconds,
            visibility_seconds=settings.twilio_visibility_seconds,
        )

    # The account SID and auth token are read at the first send, then through the secret's cache.
    credentials = SecretsManagerSecret(
        settings.twilio_credentials_arn,
        partial(clients, "secretsmanager", timeout_seconds=SECRET_READ_TIMEOUT_SECONDS),
    )
    return AskableWithCurrentSecret(
        TwilioProvider.name,
        TwilioProvider.honours_idempotency_key,
        with_credentials,
        credentials,
        visibility_seconds=settings.twilio_visibility_seconds,
    )


def _sms_v2(settings: DispatcherSettings, clients: Clients) -> Provider:
    from sendonce.providers.sms_v2_provider import SmsV2Provider  # noqa: PLC0415

    return SmsV2Provider(
        clients(
            "pinpoint-sms-voice-v2", timeout_seconds=settings.provider_timeout_seconds, sdk_retries=False
        ),
        configuration_set=settings.sms_v2_configuration_set,
        origination_identity=settings.sms_v2_origination_identity,
    )


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
PROVIDERS: dict[str, ProviderBuilder] = {
    "ses": _ses,
    "sns": _sns,
    "http": _http,
    "twilio": _twilio,
    "sms-v2": _sms_v2,
}


def _with(build: ProviderBuilder, clients: Clients) -> Callable[[DispatcherSettings], Provider]:
    return lambda settings: build(settings, clients)


class Providers(Struct):
    """A message's providers, in the order they are tried: in live mode the settings' list for its
    channel, in test mode the simulator alone; each built on first use and then kept. `live` and
    `test` build them (`of`: the registry's and the simulator, with the clients given; a test gives
    its own)."""

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

    def __call__(self, message: Message) -> tuple[Provider, ...]:
        return self.providers(message.channel, message.mode)

    def providers(self, channel: str, mode: Mode = Mode.LIVE) -> tuple[Provider, ...]:
        if mode is Mode.TEST:
            # The only provider a test message can get: the live registry is not consulted.
            if self._simulator is None:
                self._simulator = self.test(self.settings)
            return (self._simulator,)
        return tuple(self._provider(name) for name in self.settings.providers_for(channel))

    def _provider(self, name: str) -> Provider:
        if name not in self._built:
            self._built[name] = self.live[name](self.settings)
        return self._built[name]

    def honour_idempotency_key(self, channel: str, mode: Mode) -> bool:
        """Whether a dead claim's call may be repeated: only when every provider of the channel's
        list dedups on the message id (which of them the dead claim called is not known)."""
        if mode is Mode.TEST:
            from sendonce.simulator.provider import Simulator  # noqa: PLC0415

            return Simulator.honours_idempotency_key
        return all(provider.honours_idempotency_key for provider in self.providers(channel, mode))
