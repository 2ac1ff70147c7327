"""The one way a message body becomes a send: `POST /v1/messages` and each batch item alike.

`SendMessageRequest` is the body both validate; the recipient is normalised for its channel by it
and only by it, and a keyed send carries the fingerprint of its parsed body, which is what the key's
record and tie compare.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Self

from msgspec.structs import replace
from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from sendonce import channels
from sendonce.api.shapes import Metadata, RecipientRequest, parse_rfc3339, send_at_within_window
from sendonce.idempotency.keys import payload_fingerprint
from sendonce.messages import sms
from sendonce.messages.model import Channel
from sendonce.messages.service import SendCommand


class SendMessageRequest(RecipientRequest):
    """POST /v1/messages. Unknown fields are rejected, so a typo never silently changes a send."""

    # Built at import, unlike the other requests: a function's first request is most often a send.
    model_config = ConfigDict(defer_build=False)

    body: str = Field(min_length=1, max_length=10_000)
    subject: str | None = Field(
        default=None, min_length=1, max_length=998, validate_default=True, description="Email only; required"
    )
    sendAt: str | None = Field(default=None, description="RFC 3339 timestamp, at most 30 days ahead")
    metadata: Metadata | None = None
    smartEncoding: bool = Field(
        default=False,
        description="sms only: replace the characters that have a GSM-7 look-alike (curly quotes, long "
        "dashes, unusual spaces, an ellipsis) and remove invisible ones, before the message is stored, "
        "deduplicated or sent",
    )

    @field_validator("subject")
    @classmethod
    def _subject_as_the_channel_says(cls, value: str | None, info: ValidationInfo) -> str | None:
        channel = info.data.get("channel")
        if channel is None:
            return value
        rule = channels.spec(channel).subject
        if rule == "required" and value is None:
            raise ValueError(f"is required for {channel}")
        if rule == "forbidden" and value is not None:
            raise ValueError(f"is not allowed for {channel}")
        return value

    @field_validator("sendAt")
    @classmethod
    def _rfc3339_within_window(cls, value: str | None) -> str | None:
        return send_at_within_window(value)

    @field_validator("smartEncoding")
    @classmethod
    def _sms_only(cls, value: bool, info: ValidationInfo) -> bool:
        channel = info.data.get("channel")
        if value and channel is not None and not channels.spec(channel).sms:
            raise ValueError(f"is not allowed for {channel}: it is for sms")
        return value

    @model_validator(mode="after")
    def _smart_encoded(self) -> Self:
        """The body as it will be stored, deduplicated and sent: with smart encoding, its look-alikes
        replaced first of all."""
        if self.smartEncoding:
            self.body = sms.smart_encoded(self.body)
            if not self.body:
                raise ValueError("body: has no character left once its invisible ones are removed")
        return self

    def send_at(self) -> datetime | None:
        return parse_rfc3339(self.sendAt) if self.sendAt is not None else None


def command_of(
    message: SendMessageRequest, workspace: str, key: str | None, payload: Any = None
) -> SendCommand:
    """The send of a validated body; with a key, `payload` is the parsed body it was sent with."""
    channel = Channel(message.channel)
    command = SendCommand(
        workspace_id=workspace,
        channel=channel,
        recipient=channels.normalise_recipient(channel, message.to),
        subject=message.subject,
        body=message.body,
        send_at=message.send_at(),
        metadata=message.metadata or {},
        idempotency_key=key,
    )
    if key is None:
        return command
    return replace(command, payload_fingerprint=payload_fingerprint(payload))
