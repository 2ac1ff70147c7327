"""The body the HTTP provider posts to /v1/webhooks/http, validated (the API's concern alone)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sendonce.messages.model import MessageError
from sendonce.provider_events.model import EventType, ProviderEvent


class ProviderEventError(BaseModel):
    model_config = ConfigDict(extra="ignore")
    code: str = Field(min_length=1, max_length=200)
    message: str = Field(max_length=2000)


class HttpProviderEvent(BaseModel):
    """The body the HTTP provider posts to /v1/webhooks/http."""

    model_config = ConfigDict(extra="ignore")

    eventId: str = Field(min_length=1, max_length=200)
    messageId: str = Field(min_length=1, max_length=64)
    type: Literal["sent", "delivered", "failed"]
    occurredAt: datetime
    error: ProviderEventError | None = None

    def to_event(self, provider: str) -> ProviderEvent:
        return ProviderEvent(
            provider=provider,
            event_id=self.eventId,
            message_id=self.messageId,
            type=EventType(self.type),
            occurred_at=self.occurredAt.isoformat(),
            error=MessageError(self.error.code, self.error.message) if self.error else None,
        )
