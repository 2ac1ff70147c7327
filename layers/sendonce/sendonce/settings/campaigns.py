"""The campaign fan-out function's settings."""

from __future__ import annotations

from dataclasses import dataclass

from sendonce.settings import (
    LIMITS_CACHE_MAX_SECONDS,
    FunctionSettings,
    daily_sms_segments_setting,
    integer,
    setting,
    sms_allowed_countries_setting,
    text,
)


@dataclass(frozen=True)
class CampaignSettings(FunctionSettings):
    """The function on the CampaignQueue: a campaign's plan, its pages, and a cancel's sweep."""

    messages_table: str = setting("MESSAGES_TABLE", text(min_length=1))
    # The hashing key's secret (its ARN, never its value): what every lock, tie and suppression key
    # is made with (`sendonce.keyed_hash`). Required: no key is ever made up.
    hashing_key_arn: str = setting("SENDONCE_HASHING_KEY_ARN", text(min_length=1))
    campaigns_bucket: str = setting("CAMPAIGNS_BUCKET", text(min_length=1))
    campaign_queue_url: str = setting("CAMPAIGN_QUEUE_URL", text(min_length=1))
    limits_table: str = setting("LIMITS_TABLE", text(min_length=1))
    dedup_window_seconds: int = setting("SENDONCE_DEDUP_WINDOW_SECONDS", integer(minimum=1), 900)
    message_retention_days: int = setting("SENDONCE_MESSAGE_RETENTION_DAYS", integer(minimum=1), 90)
    rate_limit_per_second: int = setting(
        "SENDONCE_RATE_LIMIT_PER_SECOND", integer(minimum=1, maximum=100_000), 50
    )
    daily_send_quota: int = setting(
        "SENDONCE_DAILY_SEND_QUOTA", integer(minimum=0, maximum=1_000_000_000), 10_000
    )
    sms_allowed_countries: str = sms_allowed_countries_setting()
    daily_sms_segments: int = daily_sms_segments_setting()
    limits_cache_seconds: int = setting(
        "SENDONCE_LIMITS_CACHE_SECONDS",
        integer(minimum=0, maximum=LIMITS_CACHE_MAX_SECONDS),
        LIMITS_CACHE_MAX_SECONDS,
    )
