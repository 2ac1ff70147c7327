"""Messages: send one or a batch, get, list, edit and cancel.

Each route is declared here, right above its handler, which the router registers from it. A
handler validates, calls one use case of `sendonce.messages`, and answers with its response model.
A send's answer, stored for Idempotency-Key replays, is `sendonce.api.answers`'; a batch's,
`sendonce.api.batch`'s.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)
from pydantic import BaseModel, ConfigDict, Field, field_validator

from sendonce.api import dependencies
from sendonce.api.answers import DuplicateCaught, SendAccepted
from sendonce.api.batch import BatchRequest, BatchResults, answer_batch
from sendonce.api.commands import SendMessageRequest, command_of
from sendonce.api.errors import ApiError, from_domain_error, idempotency_in_progress, validation_error
from sendonce.api.exchange import answer, caller, json_body, json_text
from sendonce.api.routes import Body as RequestBodyKind
from sendonce.api.routes import DeclaredRouter, Route, json_answer
from sendonce.api.shapes import (
    MESSAGE_ID_PATTERN,
    MessageModel,
    Metadata,
    ResponseModel,
    parse_rfc3339,
    send_at_within_window,
    to_json,
)
from sendonce.errors import IdempotencyKeyReused
from sendonce.idempotency.keys import InvalidIdempotencyKey, parse_idempotency_key
from sendonce.messages.edits import MessageChanges
from sendonce.messages.model import Status
from sendonce.messages.ports import Page

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


def _key(header_value: str | None, required: bool) -> str | None:
    """The Idempotency-Key a header names; a missing one refused where the settings require it."""
    if header_value is not None:
        try:
            return parse_idempotency_key(header_value)
        except InvalidIdempotencyKey as error:
            raise ApiError(400, "invalid_idempotency_key", f"Idempotency-Key {error}.") from None
    if required:
        raise ApiError(400, "missing_idempotency_key", "This API requires an Idempotency-Key header.")
    return None


# ---------------------------------------------------------------------------- POST /v1/messages
SEND_MESSAGE = Route(
    "POST",
    "/v1/messages",
    summary="Send one message",
    description=(
        "Accepts a message for delivery. An identical message to the same recipient within the dedup "
        "window is answered 200 with duplicateOnly: true and the original. With an Idempotency-Key, "
        "a retry replays the first answer with Idempotency-Replayed: true."
    ),
    answers={
        201: json_answer(
            "Accepted: queued, scheduled, or accepted (hand-off to the queue still owed)", SendAccepted
        ),
        200: json_answer("The dedup guard caught a duplicate; nothing was sent", DuplicateCaught),
    },
    errors=(400, 409, 422, 503),
    body=RequestBodyKind.JSON,
    tags=("messages",),
)


@router.handles(SEND_MESSAGE)
def send_message(
    message: Annotated[SendMessageRequest, Body(embed=False)],
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="idempotency-key",
            description="1-255 visible ASCII characters; a retry with the same key never sends twice",
        ),
    ] = None,
) -> Response[Any]:
    workspace = caller(router.context)
    deps = dependencies.root.get()
    key = _key(idempotency_key, deps.settings.require_idempotency_key)
    if key is None:
        stored = deps.send(command_of(message, workspace, None))
    else:
        # Compared on the parsed body (the very value the model was validated from): key order and
        # white space never make two requests differ.
        payload = json_body(router.context)
        command = command_of(message, workspace, key, payload=payload)
        # An in-progress record expires with this invocation's time, should it die mid-request.
        deps.idempotency_config.register_lambda_context(router.lambda_context)
        try:
            stored = deps.send_once(
                request={"workspace": workspace, "key": key, "payload": payload}, command=command
            )
        except IdempotencyAlreadyInProgressError:
            raise idempotency_in_progress() from None
        except IdempotencyValidationError:
            raise from_domain_error(IdempotencyKeyReused()) from None
    headers = {"Idempotency-Replayed": "true"} if stored.get("replayed") else {}
    return json_text(stored["statusCode"], stored["body"], headers)


# ---------------------------------------------------------------------------- POST /v1/messages/batch
SEND_BATCH = Route(
    "POST",
    "/v1/messages/batch",
    summary="Send 1 to 500 messages, each answered as if sent alone",
    description=(
        'Body {"messages": [...]}, at most 1 MiB: each item is the body of POST /v1/messages plus an '
        "optional idempotencyKey, and gets the Result POST /v1/messages would answer it alone (its "
        "status code, duplicateOnly, replayed, message or error), in the items' order. Identical items "
        "are one message. ?validation=strict: any item that is not valid makes the whole request a 400 "
        "and nothing is written. An Idempotency-Key header covers the whole request."
    ),
    answers={200: json_answer("One Result per item, in order", BatchResults)},
    errors=(400, 409, 422, 503),
    body=RequestBodyKind.JSON,
    tags=("messages",),
    max_body_bytes=1024 * 1024,
)


@router.handles(SEND_BATCH)
def send_batch(
    batch: Annotated[BatchRequest, Body(embed=False)],
    validation: Annotated[
        Literal["permissive", "strict"],
        Query(description="strict: any item that is not valid fails the whole request, nothing written"),
    ] = "permissive",
    idempotency_key: Annotated[
        str | None,
        Header(alias="idempotency-key", description="Covers the whole request; a retry replays its 200"),
    ] = None,
) -> Response[Any]:
    workspace = caller(router.context)
    deps = dependencies.root.get()
    # An in-progress record expires with this invocation's time, should it die mid-request.
    deps.idempotency_config.register_lambda_context(router.lambda_context)
    stored = answer_batch(
        workspace=workspace,
        body=json_body(router.context),
        strict=validation == "strict",
        header_key=idempotency_key,
        key_required=deps.settings.require_idempotency_key,
        send_many=deps.send_many,
        send_once=deps.send_once,
        send_batch_once=deps.send_batch_once,
    )
    headers = {"Idempotency-Replayed": "true"} if stored.get("replayed") else {}
    return json_text(stored["statusCode"], stored["body"], headers)


# ---------------------------------------------------------------------------- reads, edits, cancels
GET_MESSAGE = Route(
    "GET",
    "/v1/messages/{id}",
    summary="Get one message",
    answers={200: json_answer("The message", MessageEnvelope)},
    errors=(404, 503),
    tags=("messages",),
)


@router.handles(GET_MESSAGE)
def get_message(id: str) -> Response[Any]:
    message = dependencies.root.get().messages.get(caller(router.context), id)
    return answer(200, MessageEnvelope(success=True, message=MessageModel.of(message)))


LIST_MESSAGES = Route(
    "GET",
    "/v1/messages",
    summary="List messages, newest first",
    answers={200: json_answer("A page of messages", MessagePage)},
    errors=(400, 503),
    tags=("messages",),
)


@router.handles(LIST_MESSAGES)
def list_messages(
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    status: Annotated[Status | None, Query(description="Only messages in this status")] = None,
    cursor: Annotated[
        str | None, Query(pattern=CURSOR_PATTERN, description="nextCursor of the page before")
    ] = None,
) -> Response[Any]:
    page = dependencies.root.get().messages.list(caller(router.context), status, limit, cursor)
    return answer(200, within_answer_size(page))


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


CANCEL_MESSAGE = Route(
    "DELETE",
    "/v1/messages/{id}",
    summary="Cancel a message that has not started its delivery",
    answers={200: json_answer("Canceled", MessageEnvelope)},
    errors=(404, 409, 503),
    tags=("messages",),
)


@router.handles(CANCEL_MESSAGE)
def cancel_message(id: str) -> Response[Any]:
    message = dependencies.root.get().messages.cancel(caller(router.context), id)
    return answer(200, MessageEnvelope(success=True, message=MessageModel.of(message)))


EDIT_MESSAGE = Route(
    "PATCH",
    "/v1/messages/{id}",
    summary="Edit a scheduled message until its delivery starts",
    description=(
        "One or more of body, subject, sendAt, metadata (metadata replaces the old one). Allowed while "
        "the message is scheduled, whether or not it was already handed to its queue, up to the moment "
        "its delivery is claimed (at its sendAt); otherwise 409 message_not_editable. What is sent is "
        "the message as it stands at that moment: an edit answered 200 before it is always sent whole, "
        "an edit after it is refused. The dedup lock follows the content: a new content another message "
        "holds in the dedup window is 409 duplicate_content with details.messageId, and nothing changes."
    ),
    answers={200: json_answer("Edited", MessageEnvelope)},
    errors=(400, 404, 409, 503),
    body=RequestBodyKind.JSON,
    tags=("messages",),
)


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
