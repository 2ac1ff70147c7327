"""Messages: send one or a batch, get, list, edit and cancel.

The declarations of these routes (`sendonce.api.routes`); their handlers are `sendonce.api.routers`'.
"""

from __future__ import annotations

from sendonce.api.routes import Body, Route, json_answer

SEND_MESSAGE = Route(
    "POST",
    "/v1/messages",
    summary="Send one message",
    description=(
        "Accepts a message for delivery. An identical message to the same recipient within the dedup "
        "window is answered 200 with duplicateOnly: true and the original. With an Idempotency-Key, "
        "a retry replays the first answer with Idempotency-Replayed: true. The content is written "
        "(body, and subject for email) or a template's render (template and data), rendered at "
        "acceptance: an unknown template is 422 template_not_found, a render refused 422 "
        "template_data_invalid, and a send of the same template and data to the same recipient "
        "within the window is a duplicate, whatever version each rendered."
    ),
    answers={
        201: json_answer(
            "Accepted: queued, scheduled, or accepted (hand-off to the queue still owed)", "SendAccepted"
        ),
        200: json_answer("The dedup guard caught a duplicate; nothing was sent", "DuplicateCaught"),
    },
    errors=(400, 409, 422, 503),
    body=Body.JSON,
    tags=("messages",),
)


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
    answers={200: json_answer("One Result per item, in order", "BatchResults")},
    errors=(400, 409, 422, 503),
    body=Body.JSON,
    tags=("messages",),
    max_body_bytes=1024 * 1024,
)


GET_MESSAGE = Route(
    "GET",
    "/v1/messages/{id}",
    summary="Get one message",
    answers={200: json_answer("The message", "MessageEnvelope")},
    errors=(404, 503),
    tags=("messages",),
)


MESSAGE_TIMELINE = Route(
    "GET",
    "/v1/messages/{id}/timeline",
    summary="One message's timeline",
    description=(
        "Everything that happened to the message, oldest first, each with its time: its creation, every "
        "status change told as an event, every provider attempt, every provider event, every duplicate "
        "the dedup guard blocked against it, and each status-webhook delivery of its events."
    ),
    answers={200: json_answer("The message and its timeline", "TimelineEnvelope")},
    errors=(404, 503),
    tags=("messages",),
)


LIST_MESSAGES = Route(
    "GET",
    "/v1/messages",
    summary="List messages, newest first",
    answers={200: json_answer("A page of messages", "MessagePage")},
    errors=(400, 503),
    tags=("messages",),
)


CANCEL_MESSAGE = Route(
    "DELETE",
    "/v1/messages/{id}",
    summary="Cancel a message that has not started its delivery",
    answers={200: json_answer("Canceled", "MessageEnvelope")},
    errors=(404, 409, 503),
    tags=("messages",),
)


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
    answers={200: json_answer("Edited", "MessageEnvelope")},
    errors=(400, 404, 409, 503),
    body=Body.JSON,
    tags=("messages",),
)
