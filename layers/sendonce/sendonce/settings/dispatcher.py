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
    queue_urls: dict[str, str] = field(default_factory=dict)
    providers: dict[str, str] = field(default_factory=dict)
    provider_timeout_seconds: float = setting(
        "SENDONCE_PROVIDER_TIMEOUT_SECONDS", seconds(above=0, maximum=60), 10.0
    )
    max_dispatch_attempts: int = setting("SENDONCE_MAX_DISPATCH_ATTEMPTS", integer(minimum=1), 5)
    http_provider_url: str = setting("SENDONCE_HTTP_PROVIDER_URL", text(), "")
    # The token's secret ARN, not its value.
    http_provider_token_arn: str = setting("SENDONCE_HTTP_PROVIDER_TOKEN_ARN", text(), "")
    ses_configuration_set: str = setting("SENDONCE_SES_CONFIGURATION_SET", text(), "")
    email_from: str = setting("SENDONCE_EMAIL_FROM", text(), "no-reply@example.com")
    # Where the simulator reports what became of a test message, as a provider's webhook would.
    events_queue_url: str = setting("EVENTS_QUEUE_URL", text(), "")

    @classmethod
    def _derived(cls, environ: Mapping[str, str]) -> dict[str, Any]:
        providers = {}
        for spec in channels.all_specs():
            choice = environ.get(spec.provider_setting) or spec.providers[0]
            if choice not in spec.providers:
                raise Unreadable(f"{spec.provider_setting} must be one of {', '.join(spec.providers)}")
            providers[spec.name] = choice
        return {"queue_urls": queue_urls(environ), "providers": providers}

    @classmethod
    def _derived_variables(cls) -> dict[str, Any]:
        return {
            **{spec.queue_url_setting: "" for spec in channels.all_specs()},
            **{spec.provider_setting: spec.providers[0] for spec in channels.all_specs()},
        }

    def queue_url(self, channel: str) -> str:
        return self.queue_urls.get(channel, "")

    def provider_for(self, channel: str) -> str:
        return self.providers[channel]
