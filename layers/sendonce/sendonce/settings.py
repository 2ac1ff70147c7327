"""Typed settings, one model per function, validated at cold start and read through a cached getter.

This module is the only place that reads the environment.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from sendonce.messages.model import Channel


class _Settings(BaseModel):
    # Built on first validation: each function pays only for its own model.
    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)


class AuthorizerSettings(_Settings):
    api_keys_table: str = Field(alias="API_KEYS_TABLE", min_length=1)


class ApiSettings(_Settings):
    messages_table: str = Field(alias="MESSAGES_TABLE", min_length=1)
    idempotency_table: str = Field(alias="IDEMPOTENCY_TABLE", min_length=1)
    sms_queue_url: str = Field(alias="SMS_QUEUE_URL", min_length=1)
    imessage_queue_url: str = Field(alias="IMESSAGE_QUEUE_URL", min_length=1)
    email_queue_url: str = Field(alias="EMAIL_QUEUE_URL", min_length=1)
    dedup_window_seconds: PositiveInt = Field(900, alias="SENDONCE_DEDUP_WINDOW_SECONDS")
    idempotency_ttl_seconds: PositiveInt = Field(86_400, alias="SENDONCE_IDEMPOTENCY_TTL_SECONDS")
    require_idempotency_key: bool = Field(False, alias="SENDONCE_REQUIRE_IDEMPOTENCY_KEY")
    events_queue_url: str = Field("", alias="EVENTS_QUEUE_URL")
    webhook_secret: str = Field("", alias="SENDONCE_WEBHOOK_SECRET", repr=False)

    def queue_urls(self) -> dict[Channel, str]:
        return {
            Channel.SMS: self.sms_queue_url,
            Channel.IMESSAGE: self.imessage_queue_url,
            Channel.EMAIL: self.email_queue_url,
        }


ProviderName = Literal["sns", "ses", "http"]


class DispatcherSettings(_Settings):
    messages_table: str = Field(alias="MESSAGES_TABLE", min_length=1)
    sms_provider: Literal["sns", "http"] = Field("sns", alias="SENDONCE_SMS_PROVIDER")
    imessage_provider: Literal["http"] = Field("http", alias="SENDONCE_IMESSAGE_PROVIDER")
    email_provider: Literal["ses", "http"] = Field("ses", alias="SENDONCE_EMAIL_PROVIDER")
    provider_timeout_seconds: float = Field(10, alias="SENDONCE_PROVIDER_TIMEOUT_SECONDS", gt=0, le=60)
    max_delivery_attempts: PositiveInt = Field(5, alias="SENDONCE_MAX_DELIVERY_ATTEMPTS")
    http_provider_url: str = Field("", alias="SENDONCE_HTTP_PROVIDER_URL")
    http_provider_token: str = Field("", alias="SENDONCE_HTTP_PROVIDER_TOKEN", repr=False)
    ses_configuration_set: str = Field("", alias="SENDONCE_SES_CONFIGURATION_SET")
    email_from: str = Field("no-reply@example.com", alias="SENDONCE_EMAIL_FROM")
    sms_queue_url: str = Field("", alias="SMS_QUEUE_URL")
    imessage_queue_url: str = Field("", alias="IMESSAGE_QUEUE_URL")
    email_queue_url: str = Field("", alias="EMAIL_QUEUE_URL")

    def queue_url(self, channel: Channel) -> str:
        return {
            Channel.SMS: self.sms_queue_url,
            Channel.IMESSAGE: self.imessage_queue_url,
            Channel.EMAIL: self.email_queue_url,
        }[channel]

    def provider_for(self, channel: Channel) -> ProviderName:
        choice: ProviderName = {
            Channel.SMS: self.sms_provider,
            Channel.IMESSAGE: self.imessage_provider,
            Channel.EMAIL: self.email_provider,
        }[channel]
        return choice


class EventsSettings(_Settings):
    messages_table: str = Field(alias="MESSAGES_TABLE", min_length=1)


@cache
def events_settings() -> EventsSettings:
    return EventsSettings.model_validate(os.environ)


@cache
def authorizer_settings() -> AuthorizerSettings:
    return AuthorizerSettings.model_validate(os.environ)


@cache
def api_settings() -> ApiSettings:
    return ApiSettings.model_validate(os.environ)


@cache
def dispatcher_settings() -> DispatcherSettings:
    return DispatcherSettings.model_validate(os.environ)
