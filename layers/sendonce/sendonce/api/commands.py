"""The one way a message body becomes a send: `POST /v1/messages` and each batch item alike.

`SendMessageRequest` is the body both validate; the recipient is normalised for its channel by it
and only by it, and a keyed send carries the fingerprint of its parsed body, which is what the key's
record and tie compare: for a send from a template, the request as sent (its name, version and data),
never its render, so a retry is the same request whatever versions were published since.

An email names its recipients as senders write them (`to` an address or a list, `cc`, `bcc`,
`replyTo`, an `html` part): which channel may is its registry entry's to say (`recipient_lists`,
`html`). The recipients are normalised, then de-duplicated across to, cc and bcc (each kept where
it first appears), and the limit of MAX_RECIPIENTS counts those left.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Self

from msgspec.structs import replace
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from sendonce import channels
from sendonce.api.shapes import Metadata, RecipientRequest, parse_rfc3339, send_at_within_window
from sendonce.idempotency.keys import payload_fingerprint
from sendonce.messages import sms
from sendonce.messages.model import (
    BODY_MAX_CHARACTERS,
    HTML_MAX_CHARACTERS,
    SUBJECT_MAX_CHARACTERS,
    Channel,
    Priority,
)
from sendonce.messages.ports import TemplateUse
from sendonce.messages.recipients import MAX_RECIPIENTS, InvalidRecipient, Recipient, deduplicated
from sendonce.messages.service import SendCommand

MAX_ADDRESS_LENGTH = 320
# The most a send's template data may hold, as compact JSON.
DATA_MAX_BYTES = 32 * 1024
# A send's validity (CONTRACT section 16): a minute to 30 days.
MIN_VALID_FOR_SECONDS = 60
MAX_VALID_FOR_SECONDS = 30 * 24 * 3600
# One address as a request gives it, before its channel normalises it.
Address = Annotated[str, Field(min_length=1, max_length=MAX_ADDRESS_LENGTH)]


def _normalised(channel: str, value: object, index: int | None = None) -> str:
    """One address of a list (or the one `to`), normalised as its channel reads it."""
    where = f"item {index}: " if index is not None else ""
    if not isinstance(value, str):
        raise ValueError(f"{where}must be a string")
    if not 1 <= len(value) <= MAX_ADDRESS_LENGTH:
        raise ValueError(f"{where}must be 1 to {MAX_ADDRESS_LENGTH} characters long")
    try:
        return channels.normalise_recipient(channel, value).address
    except InvalidRecipient as error:
        raise ValueError(f"{where}{error}") from None


def _lists_allowed(channel: str | None, value: object, what: str) -> None:
    if channel is not None and value is not None and not channels.spec(channel).recipient_lists:
        raise ValueError(f"is not allowed for {channel}: {what}")


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
    to: Address | Annotated[list[Address], Field(min_length=1, max_length=MAX_RECIPIENTS)] = Field(  # type: ignore[assignment]  # email may give a list
        description="Phone number with country code, or email address; email: also a list of 1 to "
        f"{MAX_RECIPIENTS} addresses (at most {MAX_RECIPIENTS} recipients in to, cc and bcc together, "
        "counted once each: an address given twice, in any ASCII case, is one recipient, kept where "
        "it first appears in the order to, cc, bcc)"
    )
    cc: list[Address] | None = Field(
        default=None, max_length=MAX_RECIPIENTS, description="Email only: addresses to copy"
    )
    bcc: list[Address] | None = Field(
        default=None, max_length=MAX_RECIPIENTS, description="Email only: addresses to copy blind"
    )
    replyTo: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_ADDRESS_LENGTH,
        description="Email only: the address replies go to",
    )
    html: str | None = Field(
        default=None,
        min_length=1,
        max_length=HTML_MAX_CHARACTERS,
        description="Email only: the html part; with it, body is the text part and may be left out "
        "(the message then shows body as an empty string, and is sent with html alone)",
    )
    body: str | None = Field(
        default=None,
        min_length=1,
        max_length=BODY_MAX_CHARACTERS,
        validate_default=True,
        description="The text; required, but for an email with html or a send that names a template",
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
    priority: Literal["normal", "critical"] = Field(
        default="normal",
        description="`critical` (one-time codes) bypasses the workspace's quiet hours and frequency cap",
    )
    timezone: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="The recipient's zone (IANA, such as Europe/Paris) for the workspace's quiet hours; "
        "default: the phone number's zone when it has exactly one, else the workspace's",
    )
    expiresAt: str | None = Field(
        default=None,
        description="RFC 3339, in the future: not handed to a provider by then, the message ends "
        "`expired` and is never sent",
    )
    validForSeconds: int | None = Field(
        default=None,
        ge=MIN_VALID_FOR_SECONDS,
        le=MAX_VALID_FOR_SECONDS,
        description="Instead of expiresAt: 60 seconds to 30 days, counted from sendAt when given, else "
        "from acceptance",
    )

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is not None:
            from sendonce.controls.quiet_hours import zone_of  # noqa: PLC0415  # only when given

            zone_of(value)
        return value

    @field_validator("expiresAt")
    @classmethod
    def _in_the_future(cls, value: str | None) -> str | None:
        if value is not None and parse_rfc3339(value) <= datetime.now(UTC):
            raise ValueError("must be in the future")
        return value

    @model_validator(mode="after")
    def _one_expiry(self) -> Self:
        if self.expiresAt is not None and self.validForSeconds is not None:
            raise ValueError("expiresAt: give expiresAt or validForSeconds, not both")
        return self

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

    @field_validator("to", mode="wrap")
    @classmethod
    def _normalise_to(  # type: ignore[override]  # a wrap validator: `to` may be a list here
        cls, value: object, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        """One address as a string, or, where the channel takes lists, 1 to MAX_RECIPIENTS of them."""
        channel = info.data.get("channel")
        if isinstance(value, list):
            _lists_allowed(channel, value, "it takes one recipient, as a string")
            if not 1 <= len(value) <= MAX_RECIPIENTS:
                raise ValueError(f"must hold 1 to {MAX_RECIPIENTS} addresses")
            if channel is None:
                return handler(value)
            return [_normalised(channel, item, index) for index, item in enumerate(value)]
        if not isinstance(value, str):
            raise ValueError("must be a string (email: or a list of addresses)")
        if channel is None:
            return handler(value)  # the channel's own error says what is wrong
        return _normalised(channel, value)

    @field_validator("cc", "bcc")
    @classmethod
    def _normalise_copies(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        channel = info.data.get("channel")
        _lists_allowed(channel, value, "it is for email")
        if value is None or channel is None:
            return value
        return [_normalised(channel, item, index) for index, item in enumerate(value)]

    @field_validator("replyTo")
    @classmethod
    def _normalise_reply_to(cls, value: str | None, info: ValidationInfo) -> str | None:
        channel = info.data.get("channel")
        _lists_allowed(channel, value, "it is for email")
        return _normalised(channel, value) if value is not None and channel is not None else value

    @field_validator("html")
    @classmethod
    def _html_where_the_channel_carries_it(cls, value: str | None, info: ValidationInfo) -> str | None:
        channel = info.data.get("channel")
        if value is not None and channel is not None and not channels.spec(channel).html:
            raise ValueError(f"is not allowed for {channel}: it is for email")
        if value is not None and info.data.get("template") is not None:
            raise ValueError("is not allowed with a template: the template renders it")
        return value

    @field_validator("body")
    @classmethod
    def _written_or_rendered(cls, value: str | None, info: ValidationInfo) -> str | None:
        """Written, unless a template renders it (then never written) or an email gives html alone."""
        if info.data.get("template") is not None:
            if value is not None:
                raise ValueError("is not allowed with a template: the template renders it")
            return value
        if value is None and info.data.get("html") is None:
            channel = info.data.get("channel")
            with_html = channel is not None and channels.spec(channel).html
            raise ValueError(
                "is required, unless html is given or the send names a template"
                if with_html
                else "is required, unless the send names a template"
            )
        return value

    @model_validator(mode="after")
    def _recipients_once_each(self) -> Self:
        """to, cc and bcc de-duplicated across each other, then counted."""
        if isinstance(self.to, str) and self.cc is None and self.bcc is None:
            return self
        to, cc, bcc = deduplicated(
            _recipients(self.channel, self.to),
            _recipients(self.channel, self.cc),
            _recipients(self.channel, self.bcc),
        )
        count = len(to) + len(cc) + len(bcc)
        if count > MAX_RECIPIENTS:
            # Named on `to`, the field the limit is about (a model's own error would name no field).
            problem = (
                f"at most {MAX_RECIPIENTS} recipients in to, cc and bcc together, once each; "
                f"these name {count}"
            )
            raise ValidationError.from_exception_data(
                type(self).__name__,
                [
                    InitErrorDetails(
                        type=PydanticCustomError(
                            "value_error", "Value error, {problem}", {"problem": problem}
                        ),
                        loc=("to",),
                        input=self.to,
                    )
                ],
            )
        if isinstance(self.to, list):
            self.to = [recipient.address for recipient in to]
        if self.cc is not None:
            self.cc = [recipient.address for recipient in cc]
        if self.bcc is not None:
            self.bcc = [recipient.address for recipient in bcc]
        return self

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
    to = _recipients(channel, message.to)
    cc = _recipients(channel, message.cc) if message.cc is not None else None
    bcc = _recipients(channel, message.bcc) if message.bcc is not None else None
    command = SendCommand(
        workspace_id=workspace,
        channel=channel,
        recipient=(*to, *(cc or ()), *(bcc or ()))[0],
        subject=message.subject,
        body=message.body or "",  # a template's (rendered at acceptance), or an email with html alone
        send_at=message.send_at(),
        metadata=message.metadata or {},
        idempotency_key=key,
        to_list=to if isinstance(message.to, list) else None,
        cc=cc,
        bcc=bcc,
        reply_to=message.replyTo,
        html=message.html,
        template=TemplateUse(choice.name, message.data or {}, choice.version) if choice is not None else None,
        smart_encoding=message.smartEncoding,
        sms=channels.spec(channel).sms,
        priority=Priority(message.priority),
        timezone=message.timezone,
        expires_at=parse_rfc3339(message.expiresAt) if message.expiresAt is not None else None,
        valid_for_seconds=message.validForSeconds,
    )
    if key is None:
        return command
    return replace(command, payload_fingerprint=payload_fingerprint(payload))


def _recipients(channel: str, addresses: str | list[str] | None) -> tuple[Recipient, ...]:
    """Validated addresses (one, a list, or none) as their channel reads them."""
    if addresses is None:
        return ()
    listed = [addresses] if isinstance(addresses, str) else addresses
    return tuple(channels.normalise_recipient(channel, address) for address in listed)
