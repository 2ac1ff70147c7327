"""The body the HTTP provider posts to /v1/webhooks/http, validated (the API's concern alone)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sendonce.messages.model import MessageFailure
from sendonce.messages.recipients import InvalidRecipient, normalise_phone_or_email
from sendonce.provider_events.model import ProviderEvent, ProviderEventType


class ProviderEventError(BaseModel):
    model_config = ConfigDict(extra="ignore")
    code: str = Field(min_length=1, max_length=200)
    message: str = Field(max_length=2000)


class HttpProviderEvent(BaseModel):
    """The body the HTTP provider posts to /v1/webhooks/http: a delivery event naming a message, or
    an opt-out (`opted_out`) naming the recipient, and the message it answered if there was one."""

    model_config = ConfigDict(extra="ignore")

    eventId: str = Field(min_length=1, max_length=200)
    messageId: str | None = Field(default=None, min_length=1, max_length=64)
    type: Literal["sent", "delivered", "failed", "opted_out"]
    occurredAt: datetime
    error: ProviderEventError | None = None
    to: str | None = Field(default=None, min_length=1, max_length=320)

    @field_validator("to")
    @classmethod
    def _normalised(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return normalise_phone_or_email(value).address
        except InvalidRecipient as error:
            raise ValueError(str(error)) from None

    @model_validator(mode="after")
    def _names_what_it_speaks_of(self) -> Self:
        if self.type == "opted_out":
            if self.to is None:
                raise ValueError("an opted_out event names its recipient: to is required")
        elif self.messageId is None:
            raise ValueError(f"a {self.type} event names its message: messageId is required")
        return self

    def to_event(self, provider: str) -> ProviderEvent:
        return ProviderEvent(
            provider=provider,
            event_id=self.eventId,
            message_id=self.messageId,
            type=ProviderEventType(self.type),
            occurred_at=self.occurredAt.isoformat(),
            error=MessageFailure(self.error.code, self.error.message) if self.error else None,
            to=self.to,
        )
