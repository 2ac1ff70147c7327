"""The message changes function's settings."""

from __future__ import annotations

from dataclasses import dataclass

from sendonce.settings import FunctionSettings, setting, text


@dataclass(frozen=True)
class MessageChangesSettings(FunctionSettings):
    """The function on the MessagesTable's stream: changes into events and their deliveries."""

    webhooks_table: str = setting("WEBHOOKS_TABLE", text(min_length=1))
    webhook_queue_url: str = setting("WEBHOOK_QUEUE_URL", text(min_length=1))
    # Where a campaign's message's delivery counts are added, with its event.
    messages_table: str = setting("MESSAGES_TABLE", text(min_length=1))
