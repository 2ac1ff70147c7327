"""Messages: get, list, edit and cancel (a send is `sending`'s, a batch `batches`').

A handler validates, calls one use case of `sendonce.messages`, and answers with its response model.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from pydantic import BaseModel, ConfigDict, Field, field_validator

from sendonce import channels
from sendonce.activity.model import TimelineEntry
from sendonce.api import dependencies
from sendonce.api.errors import unavailable, validation_error
from sendonce.api.exchange import PageSize, answer, caller
from sendonce.api.routes import DeclaredRouter
from sendonce.api.routes.messages import (
    CANCEL_MESSAGE,
    EDIT_MESSAGE,
    GET_MESSAGE,
    LIST_MESSAGES,
    MESSAGE_TIMELINE,
)
from sendonce.api.shapes import (
    MESSAGE_ID_PATTERN,
    MessageModel,
    Metadata,
    ResponseModel,
    channel_names,
    parse_rfc3339,
    send_at_within_window,
    to_json,
)
from sendonce.clock import rfc3339
from sendonce.messages.edits import MessageChanges
from sendonce.messages.model import Status
from sendonce.messages.ports import MAX_FILTERED_READS, MessageFilter, Page
from sendonce.messages.recipients import InvalidRecipient
from sendonce.suppressions.model import recipient_key, recipient_of

router = DeclaredRouter()

CURSOR_PATTERN = MESSAGE_ID_PATTERN  # nextCursor: the last message id of a page
# A page's answer stays under this, with room for its envelope, whatever its messages' size: a
# Lambda function's answer holds 6 MB.
MAX_PAGE_BYTES = 5 * 1024 * 1024 - 64 * 1024


class EditMessageRequest(BaseModel):
    """PATCH /v1/messages/{id}: one or more of these, each by the rules of POST /v1/messages; any
    other field, or an explicit null, is refused. Whether a subject is allowed is the message's
    channel's to say: the edit checks it against the stored message."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    body: str | None = Field(default=None, min_length=1, max_length=10_000)
    subject: str | None = Field(default=None, min_length=1, max_length=998, description="Email only")
    sendAt: str | None = Field(default=None, description="RFC 3339 timestamp, at most 30 days ahead")
    metadata: Metadata | None = Field(default=None, description="Replaces the message's metadata")

    @field_validator("body", "subject", "sendAt", "metadata", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        # Only a given field is validated: null would read as "leave it", which it does not say.
        if value is None:
            raise ValueError("must not be null; leave the field out to keep it")
        return value

    @field_validator("sendAt")
    @classmethod
    def _rfc3339_within_window(cls, value: str | None) -> str | None:
        return send_at_within_window(value)

    def send_at(self) -> datetime | None:
        return parse_rfc3339(self.sendAt) if self.sendAt is not None else None


class MessageEnvelope(ResponseModel):
    success: Literal[True]
    message: MessageModel


class MessagePage(ResponseModel):
    success: Literal[True]
    messages: list[MessageModel]
    nextCursor: str | None


@router.handles(GET_MESSAGE)
def get_message(id: str) -> Response[Any]:
    message = dependencies.root.get().messages.get(caller(router.context), id)
    return answer(200, MessageEnvelope(success=True, message=MessageModel.of(message)))


def _absent(value: object) -> bool:
    return value is None


class TimelineEntryModel(ResponseModel):
    """One thing that happened to the message; the fields after `kind` are those of its kind."""

    at: str = Field(description="RFC 3339")
    kind: Literal[
        "created", "status", "provider_attempt", "provider_event", "duplicate_blocked", "webhook_delivery"
    ]
    status: str | None = Field(
        default=None,
        exclude_if=_absent,
        description=(
            "created: the status it was created in; status: the status it moved to; webhook_delivery: "
            "pending, succeeded or failed"
        ),
    )
    eventId: str | None = Field(
        default=None, exclude_if=_absent, description="status, duplicate_blocked, webhook_delivery: the event"
    )
    provider: str | None = Field(
        default=None, exclude_if=_absent, description="provider_attempt, provider_event"
    )
    outcome: str | None = Field(
        default=None,
        exclude_if=_absent,
        description="provider_attempt: accepted, not_accepted, unknown or failed",
    )
    type: str | None = Field(
        default=None, exclude_if=_absent, description="provider_event: sent, delivered, failed or opted_out"
    )
    endpointId: str | None = Field(default=None, exclude_if=_absent, description="webhook_delivery")
    attempts: int | None = Field(default=None, exclude_if=_absent, description="webhook_delivery")
    responseStatus: int | None = Field(
        default=None,
        exclude_if=_absent,
        description="webhook_delivery: the last attempt's HTTP status, when it got one",
    )

    @classmethod
    def of(cls, entry: TimelineEntry) -> TimelineEntryModel:
        return cls(
            at=rfc3339(entry.at),
            kind=entry.kind.value,
            status=entry.status,
            eventId=entry.event_id,
            provider=entry.provider,
            outcome=entry.outcome,
            type=entry.type,
            endpointId=entry.endpoint_id,
            attempts=entry.attempts,
            responseStatus=entry.response_status,
        )


class TimelineEnvelope(ResponseModel):
    success: Literal[True]
    message: MessageModel
    timeline: list[TimelineEntryModel] = Field(description="Oldest first")


@router.handles(MESSAGE_TIMELINE)
def message_timeline(id: str) -> Response[Any]:
    activity = dependencies.root.get().activity
    if activity is None:
        raise unavailable()
    found = activity.timeline(caller(router.context), id)
    return answer(
        200,
        TimelineEnvelope(
            success=True,
            message=MessageModel.of(found.message),
            timeline=[TimelineEntryModel.of(entry) for entry in found.entries],
        ),
    )


@router.handles(LIST_MESSAGES)
def list_messages(  # noqa: PLR0917  (each a query parameter, by its name)
    limit: PageSize = 20,
    status: Annotated[Status | None, Query(description="Only messages in this status")] = None,
    cursor: Annotated[
        str | None, Query(pattern=CURSOR_PATTERN, description="nextCursor of the page before")
    ] = None,
    campaignId: Annotated[  # the query parameter's documented name
        str | None, Query(max_length=64, description="Only the messages of this campaign")
    ] = None,
    channel: Annotated[
        str | None,
        Query(
            max_length=32, description="Only the messages of this channel", json_schema_extra=channel_names
        ),
    ] = None,
    to: Annotated[
        str | None,
        Query(
            max_length=320,
            description=(
                "Only the messages to this recipient (any form of a phone number or an address; an email "
                "that names it among others included). With channel or to, a page holds fewer than "
                f"`limit` once {MAX_FILTERED_READS} messages were read for it; nextCursor goes on from there."
            ),
        ),
    ] = None,
) -> Response[Any]:
    which = MessageFilter(
        status=status, campaign_id=campaignId, channel=_channel(channel), recipient=_recipient(to)
    )
    page = dependencies.root.get().messages.list(caller(router.context), which, limit, cursor)
    return answer(200, within_answer_size(page))


def _channel(name: str | None) -> str | None:
    if name is not None and name not in channels.names():
        known = ", ".join(channels.names())
        raise validation_error([{"field": "channel", "message": f"must be one of {known}"}])
    return name


def _recipient(raw: str | None) -> str | None:
    """The key a listing matches recipients by, from any form of a phone number or an address."""
    if raw is None:
        return None
    try:
        return recipient_key(recipient_of(raw).address)
    except InvalidRecipient as error:
        raise validation_error([{"field": "to", "message": str(error)}]) from None


def within_answer_size(page: Page) -> MessagePage:
    """The page as shown: `limit` messages whenever that many more exist, fewer only to stay under
    MAX_PAGE_BYTES; the cursor then resumes after the last one shown."""
    shown: list[MessageModel] = []
    size = 0
    for kept, message in enumerate(page.messages):
        model = MessageModel.of(message)
        size += len(to_json(model).encode("utf-8"))
        if size > MAX_PAGE_BYTES and kept:
            return MessagePage(success=True, messages=shown, nextCursor=page.cut(kept).next_cursor)
        shown.append(model)
    return MessagePage(success=True, messages=shown, nextCursor=page.next_cursor)


@router.handles(CANCEL_MESSAGE)
def cancel_message(id: str) -> Response[Any]:
    message = dependencies.root.get().messages.cancel(caller(router.context), id)
    return answer(200, MessageEnvelope(success=True, message=MessageModel.of(message)))


@router.handles(EDIT_MESSAGE)
def edit_message(id: str, changes: Annotated[EditMessageRequest, Body(embed=False)]) -> Response[Any]:
    if not changes.model_fields_set:
        fields = "body, subject, sendAt or metadata"
        raise validation_error([{"field": "body", "message": f"must set at least one of {fields}"}])
    message = dependencies.root.get().messages.edit(
        caller(router.context),
        id,
        MessageChanges(
            body=changes.body,
            subject=changes.subject,
            send_at=changes.send_at(),
            metadata=changes.metadata,
        ),
    )
    return answer(200, MessageEnvelope(success=True, message=MessageModel.of(message)))
