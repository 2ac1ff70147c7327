"""The one way a message body becomes a send: `POST /v1/messages` and each batch item alike.

`SendMessageRequest` is the body both validate; the recipient is normalised for its channel by it
and only by it, and a keyed send carries the fingerprint of its parsed body, which is what the key's
record and tie compare: for a send from a template, the request as sent (its name, version and data),
never its render, so a retry is the same request whatever versions were published since.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Self

from msgspec.structs import replace
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from sendonce import channels
from sendonce.api.shapes import Metadata, RecipientRequest, parse_rfc3339, send_at_within_window
from sendonce.idempotency.keys import payload_fingerprint
from sendonce.messages import sms
from sendonce.messages.model import BODY_MAX_CHARACTERS, SUBJECT_MAX_CHARACTERS, Channel
from sendonce.messages.ports import TemplateUse
from sendonce.messages.service import SendCommand

# The most a send's template data may hold, as compact JSON.
DATA_MAX_BYTES = 32 * 1024


class TemplateChoice(BaseModel):
    """A send's template: its name, and a version (the latest when absent)."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=False)

    name: str = Field(min_length=1, max_length=64, description="The template's name")
    version: int | None = Field(
        default=None, ge=1, description="The version to render; the latest when absent"
    )


class SendMessageRequest(RecipientRequest):
    """POST /v1/messages. Unknown fields are rejected, so a typo never silently changes a send.

    The content is written (`body`, and `subject` where the channel takes one) or rendered from a
    template (`template` and `data`), never both. The template fields come first, so the content's
    validators know which it is."""

    # Built at import, unlike the other requests: a function's first request is most often a send.
    model_config = ConfigDict(defer_build=False)

    template: TemplateChoice | None = Field(
        default=None,
        description="Send a template's render (with `data`) instead of a written body and subject",
    )
    data: dict[str, Any] | None = Field(
        default=None,
        description=f"With `template`: its variables, at most {DATA_MAX_BYTES // 1024} KiB as JSON",
    )
    body: str | None = Field(
        default=None,
        min_length=1,
        max_length=BODY_MAX_CHARACTERS,
        validate_default=True,
        description="Required, unless the send names a template",
    )
    subject: str | None = Field(
        default=None,
        min_length=1,
        max_length=SUBJECT_MAX_CHARACTERS,
        validate_default=True,
        description="Email only; required, unless the send names a template",
    )
    sendAt: str | None = Field(default=None, description="RFC 3339 timestamp, at most 30 days ahead")
    metadata: Metadata | None = None
    smartEncoding: bool = Field(
        default=False,
        description="sms only: replace the characters that have a GSM-7 look-alike (curly quotes, long "
        "dashes, unusual spaces, an ellipsis) and remove invisible ones, before the message is stored, "
        "deduplicated or sent",
    )

    @field_validator("data")
    @classmethod
    def _with_its_template(cls, value: dict[str, Any] | None, info: ValidationInfo) -> dict[str, Any] | None:
        if value is None:
            return value
        if info.data.get("template") is None:
            raise ValueError("is only for a send that names a template")
        size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        if size > DATA_MAX_BYTES:
            raise ValueError(f"is {size} bytes as JSON, over {DATA_MAX_BYTES}")
        return value

    @field_validator("body")
    @classmethod
    def _written_or_rendered(cls, value: str | None, info: ValidationInfo) -> str | None:
        templated = info.data.get("template") is not None
        if value is None and not templated:
            raise ValueError("is required, unless the send names a template")
        if value is not None and templated:
            raise ValueError("is not allowed with a template: the template renders it")
        return value

    @field_validator("subject")
    @classmethod
    def _subject_as_the_channel_says(cls, value: str | None, info: ValidationInfo) -> str | None:
        channel = info.data.get("channel")
        if value is not None and info.data.get("template") is not None:
            raise ValueError("is not allowed with a template: the template renders it")
        if channel is None:
            return value
        rule = channels.spec(channel).subject
        if rule == "required" and value is None and info.data.get("template") is None:
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
        if self.smartEncoding and self.body is not None:  # a template's render: once rendered
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
    choice = message.template
    command = SendCommand(
        workspace_id=workspace,
        channel=channel,
        recipient=channels.normalise_recipient(channel, message.to),
        subject=message.subject,
        body=message.body or "",  # a template's: rendered at acceptance
        send_at=message.send_at(),
        metadata=message.metadata or {},
        idempotency_key=key,
        template=TemplateUse(choice.name, message.data or {}, choice.version) if choice is not None else None,
        smart_encoding=message.smartEncoding,
    )
    if key is None:
        return command
    return replace(command, payload_fingerprint=payload_fingerprint(payload))
