"""The API function's settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from sendonce.settings import (
    LIMITS_CACHE_MAX_SECONDS,
    EveryChannelsQueue,
    FunctionSettings,
    daily_sms_segments_setting,
    flag,
    integer,
    setting,
    sms_allowed_countries_setting,
    text,
)


@dataclass(frozen=True)
class ApiSettings(EveryChannelsQueue, FunctionSettings):
    messages_table: str = setting("MESSAGES_TABLE", text(min_length=1))
    # The hashing key's secret (its ARN, never its value): what every lock, tie and suppression key
    # is made with (`sendonce.keyed_hash`). Required: no key is ever made up.
    hashing_key_arn: str = setting("SENDONCE_HASHING_KEY_ARN", text(min_length=1))
    idempotency_table: str = setting("IDEMPOTENCY_TABLE", text(min_length=1))
    # The hashed API keys, read on a request whose key this environment has not found good lately.
    api_keys_table: str = setting("API_KEYS_TABLE", text(min_length=1))
    # How long an execution environment keeps a found key's workspace before reading it again:
    # a revoked key keeps working that long where it was found good (0: read on every request).
    api_key_cache_seconds: int = setting(
        "SENDONCE_API_KEY_CACHE_SECONDS", integer(minimum=0, maximum=300), 60
    )
    queue_urls: dict[str, str] = field(default_factory=dict)
    dedup_window_seconds: int = setting("SENDONCE_DEDUP_WINDOW_SECONDS", integer(minimum=1), 900)
    idempotency_ttl_seconds: int = setting("SENDONCE_IDEMPOTENCY_TTL_SECONDS", integer(minimum=1), 86_400)
    require_idempotency_key: bool = setting("SENDONCE_REQUIRE_IDEMPOTENCY_KEY", flag, False)
    message_retention_days: int = setting("SENDONCE_MESSAGE_RETENTION_DAYS", integer(minimum=1), 90)
    events_queue_url: str = setting("EVENTS_QUEUE_URL", text(), "")
    # The secret's ARN (or name), never its value: the value is read at run time (secret_values).
    provider_events_secret_arn: str = setting("SENDONCE_PROVIDER_EVENTS_SECRET_ARN", text(), "")
    # Twilio's credentials secret ({"accountSid", "authToken"}): its auth token signs Twilio's status
    # callbacks. "": Twilio is not used, and its callbacks are answered 404.
    twilio_credentials_arn: str = setting("SENDONCE_TWILIO_CREDENTIALS_ARN", text(), "")
    # Status webhooks: the customers' endpoints and events, and the queue a redelivery goes on.
    webhooks_table: str = setting("WEBHOOKS_TABLE", text(), "")
    webhook_queue_url: str = setting("WEBHOOK_QUEUE_URL", text(), "")
    webhook_allow_private_targets: bool = setting("SENDONCE_WEBHOOK_ALLOW_PRIVATE_TARGETS", flag, False)
    # Campaigns: where their recipient lists are kept, and the queue of their fan-out ("": none).
    campaigns_bucket: str = setting("CAMPAIGNS_BUCKET", text(), "")
    campaign_queue_url: str = setting("CAMPAIGN_QUEUE_URL", text(), "")
    # Erasures: the queue of their jobs ("": none, and the erasure routes answer 503).
    erasure_queue_url: str = setting("ERASURE_QUEUE_URL", text(), "")
    # Per-workspace limits: the defaults, overridden per workspace in the limits table ("": none).
    limits_table: str = setting("LIMITS_TABLE", text(), "")
    rate_limit_per_second: int = setting(
        "SENDONCE_RATE_LIMIT_PER_SECOND", integer(minimum=1, maximum=100_000), 50
    )
    daily_send_quota: int = setting(
        "SENDONCE_DAILY_SEND_QUOTA", integer(minimum=0, maximum=1_000_000_000), 10_000
    )
    sms_allowed_countries: str = sms_allowed_countries_setting()
    daily_sms_segments: int = daily_sms_segments_setting()
    # How long an execution environment keeps a workspace's limits before reading them again: at most
    # what a change of the limits waits out before it takes effect.
    limits_cache_seconds: int = setting(
        "SENDONCE_LIMITS_CACHE_SECONDS",
        integer(minimum=0, maximum=LIMITS_CACHE_MAX_SECONDS),
        LIMITS_CACHE_MAX_SECONDS,
    )
