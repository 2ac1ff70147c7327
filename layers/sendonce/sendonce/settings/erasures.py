"""The erasure function's settings."""

from __future__ import annotations

from dataclasses import dataclass

from sendonce.settings import FunctionSettings, integer, setting, text


@dataclass(frozen=True)
class ErasureSettings(FunctionSettings):
    """The function on the ErasureQueue (an erasure's job) and its every-minute sweep."""

    messages_table: str = setting("MESSAGES_TABLE", text(min_length=1))
    # The hashing key's secret (its ARN, never its value): a cancel releases its message's lock, and
    # the recipient's suppression entry is found by its keyed hash (`sendonce.keyed_hash`).
    hashing_key_arn: str = setting("SENDONCE_HASHING_KEY_ARN", text(min_length=1))
    webhooks_table: str = setting("WEBHOOKS_TABLE", text(min_length=1))
    idempotency_table: str = setting("IDEMPOTENCY_TABLE", text(min_length=1))
    erasure_queue_url: str = setting("ERASURE_QUEUE_URL", text(min_length=1))
    message_retention_days: int = setting("SENDONCE_MESSAGE_RETENTION_DAYS", integer(minimum=1), 90)
    dedup_window_seconds: int = setting("SENDONCE_DEDUP_WINDOW_SECONDS", integer(minimum=1), 900)
