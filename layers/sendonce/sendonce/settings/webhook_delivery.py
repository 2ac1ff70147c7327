"""The webhook delivery function's settings."""

from __future__ import annotations

from dataclasses import dataclass

from sendonce.settings import FunctionSettings, Unreadable, flag, setting, text


def _schedule(value: str) -> str:
    # Only the webhook delivery function reads a schedule: the other functions skip its module.
    from sendonce.status_webhooks.delivery import parse_schedule  # noqa: PLC0415

    try:
        parse_schedule(value)
    except ValueError as error:
        raise Unreadable(str(error)) from None
    return value


@dataclass(frozen=True)
class WebhookDeliverySettings(FunctionSettings):
    webhooks_table: str = setting("WEBHOOKS_TABLE", text(min_length=1))
    webhook_queue_url: str = setting("WEBHOOK_QUEUE_URL", text(min_length=1))  # the fast lane
    slow_lane_queue_url: str = setting("WEBHOOK_SLOW_LANE_QUEUE_URL", text(min_length=1))
    # Seconds between attempts, comma-separated: the first attempt at once, then one after each.
    retry_schedule: str = setting(
        "SENDONCE_WEBHOOK_RETRY_SCHEDULE", _schedule, "5,300,1800,7200,18000,36000,36000"
    )
    allow_private_targets: bool = setting("SENDONCE_WEBHOOK_ALLOW_PRIVATE_TARGETS", flag, False)
