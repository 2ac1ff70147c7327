"""Typed settings, one model per function, validated when its composition root is built.

This module is the only place that reads the environment. Per-channel settings are named after
the channels of `sendonce.channels` (`<NAME>_QUEUE_URL`, `SENDONCE_<NAME>_PROVIDER`), so a
channel added there has its settings here with no new field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from sendonce import channels


class _Settings(BaseModel):
    # Built on first validation: each function pays only for its own model.
    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Self:
        return cls.model_validate(dict(os.environ if environ is None else environ))


def _queue_urls(data: Any) -> Any:
    """Every registered channel's queue URL that the environment names."""
    if not isinstance(data, dict):
        return data
    urls = {
        spec.name: data[spec.queue_url_setting]
        for spec in channels.all_specs()
        if data.get(spec.queue_url_setting)
    }
    return {**data, "queue_urls": urls}


def _check_every_channel_has_a_queue(queue_urls: Mapping[str, str]) -> None:
    missing = [spec.queue_url_setting for spec in channels.all_specs() if spec.name not in queue_urls]
    if missing:
        raise ValueError(f"missing queue URLs: {', '.join(missing)}")


class ApiSettings(_Settings):
    messages_table: str = Field(alias="MESSAGES_TABLE", min_length=1)
    idempotency_table: str = Field(alias="IDEMPOTENCY_TABLE", min_length=1)
    # The hashed API keys, read on a request whose key this environment has not found good lately.
    api_keys_table: str = Field(alias="API_KEYS_TABLE", min_length=1)
    # How long an execution environment keeps a found key's workspace before reading it again:
    # a revoked key keeps working that long where it was found good (0: read on every request).
    api_key_cache_seconds: int = Field(60, alias="SENDONCE_API_KEY_CACHE_SECONDS", ge=0, le=300)
    queue_urls: dict[str, str]
    dedup_window_seconds: PositiveInt = Field(900, alias="SENDONCE_DEDUP_WINDOW_SECONDS")
    idempotency_ttl_seconds: PositiveInt = Field(86_400, alias="SENDONCE_IDEMPOTENCY_TTL_SECONDS")
    require_idempotency_key: bool = Field(False, alias="SENDONCE_REQUIRE_IDEMPOTENCY_KEY")
    message_retention_days: PositiveInt = Field(90, alias="SENDONCE_MESSAGE_RETENTION_DAYS")
    events_queue_url: str = Field("", alias="EVENTS_QUEUE_URL")
    # The secret's ARN (or name), never its value: the value is read at run time (secret_values).
    webhook_secret_arn: str = Field("", alias="SENDONCE_WEBHOOK_SECRET_ARN")
    # Status webhooks: the customers' endpoints and events, and the queue a redelivery goes on.
    webhooks_table: str = Field("", alias="WEBHOOKS_TABLE")
    webhook_queue_url: str = Field("", alias="WEBHOOK_QUEUE_URL")
    webhook_allow_private_targets: bool = Field(False, alias="SENDONCE_WEBHOOK_ALLOW_PRIVATE_TARGETS")
    # Per-workspace limits: the defaults, overridden per workspace in the limits table ("": none).
    limits_table: str = Field("", alias="LIMITS_TABLE")
    rate_limit_per_second: int = Field(50, alias="SENDONCE_RATE_LIMIT_PER_SECOND", ge=1, le=100_000)
    daily_send_quota: int = Field(10_000, alias="SENDONCE_DAILY_SEND_QUOTA", ge=0, le=1_000_000_000)
    # How long an execution environment keeps a workspace's limits before reading them again.
    limits_cache_seconds: int = Field(60, alias="SENDONCE_LIMITS_CACHE_SECONDS", ge=0, le=3600)

    _collect_queue_urls = model_validator(mode="before")(_queue_urls)

    @model_validator(mode="after")
    def _every_channel_has_a_queue(self) -> ApiSettings:
        _check_every_channel_has_a_queue(self.queue_urls)
        return self


class DispatcherSettings(_Settings):
    """A dispatcher's, and the outbox's: providers and queues for the channels they serve."""

    messages_table: str = Field(alias="MESSAGES_TABLE", min_length=1)
    queue_urls: dict[str, str]
    providers: dict[str, str]
    provider_timeout_seconds: float = Field(10, alias="SENDONCE_PROVIDER_TIMEOUT_SECONDS", gt=0, le=60)
    max_delivery_attempts: PositiveInt = Field(5, alias="SENDONCE_MAX_DELIVERY_ATTEMPTS")
    http_provider_url: str = Field("", alias="SENDONCE_HTTP_PROVIDER_URL")
    http_provider_token_arn: str = Field("", alias="SENDONCE_HTTP_PROVIDER_TOKEN_ARN")  # not its value
    ses_configuration_set: str = Field("", alias="SENDONCE_SES_CONFIGURATION_SET")
    email_from: str = Field("no-reply@example.com", alias="SENDONCE_EMAIL_FROM")

    @model_validator(mode="before")
    @classmethod
    def _per_channel(cls, data: Any) -> Any:
        data = _queue_urls(data)
        if not isinstance(data, dict):
            return data
        providers = {}
        for spec in channels.all_specs():
            choice = data.get(spec.provider_setting) or spec.providers[0]
            if choice not in spec.providers:
                raise ValueError(f"{spec.provider_setting} must be one of {', '.join(spec.providers)}")
            providers[spec.name] = choice
        return {**data, "providers": providers}

    def queue_url(self, channel: str) -> str:
        return self.queue_urls.get(channel, "")

    def provider_for(self, channel: str) -> str:
        return self.providers[channel]


class HandoffSettings(_Settings):
    """The function on the MessagesTable's stream that hands each new message to its queue."""

    queue_urls: dict[str, str]

    _collect_queue_urls = model_validator(mode="before")(_queue_urls)

    @model_validator(mode="after")
    def _every_channel_has_a_queue(self) -> HandoffSettings:
        _check_every_channel_has_a_queue(self.queue_urls)
        return self


class EventsSettings(_Settings):
    messages_table: str = Field(alias="MESSAGES_TABLE", min_length=1)


class MessageChangesSettings(_Settings):
    """The function on the MessagesTable's stream: changes into events and their deliveries."""

    webhooks_table: str = Field(alias="WEBHOOKS_TABLE", min_length=1)
    webhook_queue_url: str = Field(alias="WEBHOOK_QUEUE_URL", min_length=1)


class WebhookDeliverySettings(_Settings):
    webhooks_table: str = Field(alias="WEBHOOKS_TABLE", min_length=1)
    webhook_queue_url: str = Field(alias="WEBHOOK_QUEUE_URL", min_length=1)
    # Seconds between attempts, comma-separated: the first attempt at once, then one after each.
    retry_schedule: str = Field("5,300,1800,7200,18000,36000,36000", alias="SENDONCE_WEBHOOK_RETRY_SCHEDULE")
    allow_private_targets: bool = Field(False, alias="SENDONCE_WEBHOOK_ALLOW_PRIVATE_TARGETS")
    # The contract: a 2xx within 15 seconds is a success.
    timeout_seconds: float = Field(15, alias="SENDONCE_WEBHOOK_TIMEOUT_SECONDS", gt=0, le=15)

    @model_validator(mode="after")
    def _schedule_reads(self) -> WebhookDeliverySettings:
        from sendonce.webhooks.delivery import parse_schedule  # noqa: PLC0415

        parse_schedule(self.retry_schedule)
        return self
