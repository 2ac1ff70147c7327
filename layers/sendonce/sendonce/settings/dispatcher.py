"""The settings of a dispatcher, and of the outbox: providers and queues for the channels they serve."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sendonce import channels
from sendonce.settings import FunctionSettings, Unreadable, integer, queue_urls, seconds, setting, text


@dataclass(frozen=True)
class DispatcherSettings(FunctionSettings):
    """A dispatcher's, and the outbox's: providers and queues for the channels they serve."""

    messages_table: str = setting("MESSAGES_TABLE", text(min_length=1))
    # The hashing key's secret (its ARN, never its value): what the suppression checks of a claim
    # find entries with (`sendonce.keyed_hash`). "" only for the outbox, which never checks one: a
    # dispatcher without it claims nothing (SecretUnavailable), it never hashes under another key.
    hashing_key_arn: str = setting("SENDONCE_HASHING_KEY_ARN", text(), "")
    queue_urls: dict[str, str] = field(default_factory=dict)
    # Each channel's providers, in the order they are tried.
    providers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    provider_timeout_seconds: float = setting(
        "SENDONCE_PROVIDER_TIMEOUT_SECONDS", seconds(above=0, maximum=60), 10.0
    )
    max_dispatch_attempts: int = setting("SENDONCE_MAX_DISPATCH_ATTEMPTS", integer(minimum=1), 5)
    http_provider_url: str = setting("SENDONCE_HTTP_PROVIDER_URL", text(), "")
    # The token's secret ARN, not its value.
    http_provider_token_arn: str = setting("SENDONCE_HTTP_PROVIDER_TOKEN_ARN", text(), "")
    ses_configuration_set: str = setting("SENDONCE_SES_CONFIGURATION_SET", text(), "")
    email_from: str = setting("SENDONCE_EMAIL_FROM", text(), "no-reply@example.com")
    # Twilio's Messages API: its base URL, the secret holding {"accountSid", "authToken"} (its ARN,
    # not its value), the sender (a phone number or a messaging service's SID), where its status
    # callbacks go (the API's /v1/webhooks/twilio), and how long after a call its message list shows it.
    twilio_base_url: str = setting("SENDONCE_TWILIO_BASE_URL", text(min_length=1), "https://api.twilio.com")
    twilio_credentials_arn: str = setting("SENDONCE_TWILIO_CREDENTIALS_ARN", text(), "")
    twilio_from: str = setting("SENDONCE_TWILIO_FROM", text(), "")
    twilio_status_callback_url: str = setting("SENDONCE_TWILIO_STATUS_CALLBACK_URL", text(), "")
    twilio_visibility_seconds: float = setting(
        "SENDONCE_TWILIO_VISIBILITY_SECONDS", seconds(above=0, maximum=900), 10.0
    )
    # AWS End User Messaging SMS: the configuration set (its event destination reports deliveries)
    # and, when given, the origination identity (a phone number, sender id or pool).
    sms_v2_configuration_set: str = setting("SENDONCE_SMS_V2_CONFIGURATION_SET", text(), "")
    sms_v2_origination_identity: str = setting("SENDONCE_SMS_V2_ORIGINATION_IDENTITY", text(), "")
    # A provider that failed to accept this many messages in a row is skipped for the cool-off.
    provider_cooloff_after: int = setting("SENDONCE_PROVIDER_COOLOFF_AFTER", integer(minimum=1), 5)
    provider_cooloff_seconds: float = setting(
        "SENDONCE_PROVIDER_COOLOFF_SECONDS", seconds(above=0, maximum=86400), 60.0
    )
    # Where the simulator reports what became of a test message, as a provider's webhook would.
    events_queue_url: str = setting("EVENTS_QUEUE_URL", text(), "")

    @classmethod
    def _derived(cls, environ: Mapping[str, str]) -> dict[str, Any]:
        providers = {spec.name: _provider_list(spec, environ) for spec in channels.all_specs()}
        return {"queue_urls": queue_urls(environ), "providers": providers}

    @classmethod
    def _derived_variables(cls) -> dict[str, Any]:
        return {
            **{spec.queue_url_setting: "" for spec in channels.all_specs()},
            **{spec.provider_setting: spec.providers[0] for spec in channels.all_specs()},
            **{spec.providers_setting: "" for spec in channels.all_specs()},
        }

    def queue_url(self, channel: str) -> str:
        return self.queue_urls.get(channel, "")

    def providers_for(self, channel: str) -> tuple[str, ...]:
        """The channel's providers, in the order they are tried."""
        return self.providers[channel]


def _provider_list(spec: channels.ChannelSpec, environ: Mapping[str, str]) -> tuple[str, ...]:
    """`SENDONCE_<NAME>_PROVIDERS` when set, else `SENDONCE_<NAME>_PROVIDER` as a list of one, else
    the channel's default; each a provider the channel allows, none twice."""
    listed = environ.get(spec.providers_setting, "").strip()
    variable = spec.providers_setting if listed else spec.provider_setting
    raw = listed or environ.get(spec.provider_setting) or spec.providers[0]
    names = tuple(name.strip() for name in raw.split(","))
    unknown = [name for name in names if name not in spec.providers]
    if unknown or not names:
        raise Unreadable(f"{variable} must name providers among {', '.join(spec.providers)}")
    if len(set(names)) != len(names):
        raise Unreadable(f"{variable} names a provider twice")
    return names
