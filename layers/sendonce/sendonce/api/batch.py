"""POST /v1/messages/batch: each item answered as POST /v1/messages would answer it alone.

An item is parsed and checked as the single send's body is, and gets the single send's status code
and body (its Result). An item with an `idempotencyKey` goes through the same Idempotency-Key record
as POST /v1/messages with that key and that body (the item without `idempotencyKey`), so the two
routes replay each other's answers. Items without one are written in bulk (`BatchSender`).

Order: items take effect as if sent one after another. Items meet each other only through their
dedup identity (and keyed items through their keys, which are taken one at a time, in order). So the
keyless items whose identity no earlier keyed item has are written first, in bulk, then the keyed
items one by one, then the keyless items that came after a keyed item of their identity: each item
meets exactly the messages it would have met had the batch been sent item by item.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)
from msgspec import Struct
from msgspec.structs import replace
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sendonce.api.answers import send_answer
from sendonce.api.commands import SendMessageRequest, command_of
from sendonce.api.errors import (
    ApiError,
    details_from_pydantic,
    from_domain_error,
    idempotency_in_progress,
    unavailable,
    validation_error,
)
from sendonce.api.idempotency import SendOnce, StoredAnswer, answered_once, key_of
from sendonce.api.shapes import MessageModel, ResponseModel, to_json
from sendonce.clock import utc_now
from sendonce.errors import (
    IdempotencyKeyReused,
    QuotaExceeded,
    RecipientCapped,
    RecipientSuppressed,
    SendonceError,
    SmsBudgetExceeded,
)
from sendonce.idempotency.keys import InvalidIdempotencyKey, parse_idempotency_key
from sendonce.limits.model import seconds_to_next_day
from sendonce.messages.batch import BatchOutcome, DestinationRefused, NotRendered
from sendonce.messages.ports import (
    Capped,
    GateClosed,
    MadeBefore,
    NotWritten,
    QuotaSpent,
    SmsBudgetSpent,
    Suppressed,
)
from sendonce.messages.service import SendCommand, lock_of, template_lock_of

MIN_ITEMS, MAX_ITEMS = 1, 500
ITEM_KEY = "idempotencyKey"
# An item answered so may succeed on a retry: a batch holding one is not stored under its key.
# Never stored under a batch key: a retry may get another answer (a 429 among them).
_RETRYABLE = {
    ("idempotency_in_progress", 409),
    ("unavailable", 503),
    ("quota_exceeded", 429),
    ("sms_budget_exceeded", 429),
    ("recipient_capped", 429),
    ("rate_limited", 429),
    # Never stored under a key, as the single send's: once the workspace removes the entry, a retry sends.
    ("recipient_suppressed", 422),
    # Never stored under a key, as the single send's: once the workspace allows it, a retry sends.
    ("destination_not_allowed", 422),
    # A render refused writes nothing and leaves the key unused (section 13), as the single send's.
    ("template_not_found", 422),
    ("template_data_invalid", 422),
}

SendMany = Callable[[Sequence[SendCommand]], list[BatchOutcome]]


class BatchRequest(BaseModel):
    """POST /v1/messages/batch: the envelope. Its handler checks each item on its own, as a body of
    POST /v1/messages, so that a bad item gets its own Result."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    messages: list[Any] = Field(
        min_length=MIN_ITEMS,
        max_length=MAX_ITEMS,
        description=(
            "Each: the body of POST /v1/messages, plus an optional idempotencyKey (the rules of the "
            "Idempotency-Key header). An item that is not an object gets its own 400 Result."
        ),
    )


class BatchItemError(ResponseModel):
    code: str
    message: str
    details: list[dict[str, str]] | dict[str, str] | dict[str, list[str]] | None = Field(
        default=None, exclude_if=lambda v: v is None
    )


class BatchItemResult(ResponseModel):
    index: int
    status: int = Field(description="The status code the item alone would get from POST /v1/messages")
    duplicateOnly: bool | None
    replayed: bool = Field(description="The item's idempotencyKey replayed an earlier answer")
    message: MessageModel | None
    error: BatchItemError | None


class BatchResults(ResponseModel):
    success: Literal[True]
    results: list[BatchItemResult]


class BatchItem(Struct, frozen=True):
    """One item, parsed: a command to send, or the 400 it gets instead."""

    index: int
    command: SendCommand | None = None
    payload: dict[str, Any] | None = None  # what its key is compared on: the item without the key
    error: ApiError | None = None


class Unstored(Exception):
    """A batch answer holding an item a retry may still send: answered, never replayed."""

    def __init__(self, answer: StoredAnswer) -> None:
        super().__init__("a batch answer with retryable items")
        self.answer = answer


def run_once(*, request: dict[str, Any], run: Callable[[], StoredAnswer]) -> StoredAnswer:
    """The once-only part of a batch under its own Idempotency-Key (wrapped by `make_idempotent`)."""
    answer = run()
    if not answer.get("storable", True):
        raise Unstored(answer)  # the key's record is removed, as for a failure
    return answer


def parse_request(payload: Any) -> tuple[dict[str, Any], list[Any]]:
    """The body (as the preflight decoded it) and its items; a body that is not
    `{"messages": [1..500 items]}` is a 400."""
    if not isinstance(payload, dict):
        raise validation_error([{"field": "body", "message": 'must be an object: {"messages": [...]}'}])
    unknown = sorted(set(payload) - {"messages"})
    if unknown:
        raise validation_error(
            [{"field": name, "message": "Extra inputs are not permitted"} for name in unknown]
        )
    items = payload.get("messages")
    if not isinstance(items, list):
        raise validation_error([{"field": "messages", "message": "is required: a list of messages"}])
    if not MIN_ITEMS <= len(items) <= MAX_ITEMS:
        raise validation_error(
            [
                {
                    "field": "messages",
                    "message": f"must hold {MIN_ITEMS} to {MAX_ITEMS} messages, not {len(items)}",
                }
            ]
        )
    return payload, items


def parse_item(index: int, raw: Any, workspace: str, key_required: bool) -> BatchItem:
    """What POST /v1/messages would make of this item's body, and of its key as the header."""
    if not isinstance(raw, dict):
        not_object = validation_error([{"field": "body", "message": "must be an object: a message to send"}])
        return BatchItem(index, error=not_object)
    body = {name: value for name, value in raw.items() if name != ITEM_KEY}
    key = None
    if ITEM_KEY in raw:
        try:
            if not isinstance(raw[ITEM_KEY], str):
                raise InvalidIdempotencyKey("must be a string")
            key = parse_idempotency_key(raw[ITEM_KEY])
        except InvalidIdempotencyKey as error:
            return BatchItem(
                index, error=ApiError(400, "invalid_idempotency_key", f"Idempotency-Key {error}.")
            )
    elif key_required:
        missing = ApiError(
            400, "missing_idempotency_key", "This API requires an idempotencyKey on each message."
        )
        return BatchItem(index, error=missing)
    try:
        message = SendMessageRequest.model_validate(body)
    except ValidationError as invalid:
        return BatchItem(index, error=validation_error(details_from_pydantic(list(invalid.errors()))))
    command = command_of(message, workspace, key, payload=body)
    return BatchItem(index, command=command, payload=body if key is not None else None)


def strict_details(items: Sequence[BatchItem]) -> list[dict[str, str]]:
    """Each bad item's problems, named by its index: `messages.3.to`."""
    details = []
    for item in items:
        if item.error is None:
            continue
        field = "idempotencyKey" if item.error.code.endswith("idempotency_key") else None
        found = item.error.details or [{"field": field or "body", "message": item.error.message}]
        for detail in found:
            name = detail.get("field", "body")
            where = f"messages.{item.index}" if name == "body" else f"messages.{item.index}.{name}"
            details.append({"field": where, "message": detail.get("message", item.error.message)})
    return details


def send_items(
    items: Sequence[BatchItem], workspace: str, send_many: SendMany, send_once: SendOnce
) -> StoredAnswer:
    """The batch's 200: one Result per item, in order (see the module's note on order)."""
    results: dict[int, BatchItemResult] = {}
    for item in items:
        if item.error is not None:
            results[item.index] = error_result(item.index, item.error)
    keyed_identities: set[str] = set()
    first: list[BatchItem] = []
    after_keyed: list[BatchItem] = []
    keyed: list[BatchItem] = []
    for item in items:
        if item.command is None:
            continue
        # A template's render is not made yet: its name and data to the recipient stand for it.
        identity = template_lock_of(item.command) or lock_of(item.command)
        if item.payload is not None:
            keyed_identities.add(identity)
            keyed.append(item)
        else:
            (after_keyed if identity in keyed_identities else first).append(item)

    _send_bulk(first, send_many, results)
    for item in keyed:
        results[item.index] = _send_keyed(item, workspace, send_once)
    _send_bulk(after_keyed, send_many, results)

    ordered = [results[index] for index in sorted(results)]
    body = to_json(BatchResults(success=True, results=ordered), compact=True)
    storable = not any(_retryable(result) for result in ordered)
    answer: StoredAnswer = {"statusCode": 200, "body": body}
    if not storable:
        answer["storable"] = False
    return answer


def _retryable(result: BatchItemResult) -> bool:
    return result.error is not None and (result.error.code, result.status) in _RETRYABLE


def _send_bulk(items: list[BatchItem], send_many: SendMany, results: dict[int, BatchItemResult]) -> None:
    if not items:
        return
    outcomes = send_many([item.command for item in items if item.command is not None])
    for item, outcome in zip(items, outcomes, strict=True):
        if isinstance(outcome, NotWritten | GateClosed | MadeBefore):  # a campaign's two: never a batch's
            results[item.index] = error_result(item.index, unavailable())
        elif isinstance(outcome, NotRendered | DestinationRefused):
            results[item.index] = error_result(item.index, from_domain_error(outcome.error))
        elif isinstance(outcome, Suppressed):
            refused = from_domain_error(RecipientSuppressed(outcome.reason))
            results[item.index] = error_result(item.index, refused)
        elif isinstance(outcome, QuotaSpent):
            results[item.index] = error_result(
                item.index, from_domain_error(QuotaExceeded(seconds_to_next_day(utc_now())))
            )
        elif isinstance(outcome, SmsBudgetSpent):
            results[item.index] = error_result(
                item.index, from_domain_error(SmsBudgetExceeded(seconds_to_next_day(utc_now())))
            )
        elif isinstance(outcome, Capped):
            results[item.index] = error_result(
                item.index, from_domain_error(RecipientCapped(outcome.retry_after_seconds))
            )
        else:
            results[item.index] = answer_result(item.index, send_answer(outcome))


def _send_keyed(item: BatchItem, workspace: str, send_once: SendOnce) -> BatchItemResult:
    assert item.command is not None
    assert item.command.idempotency_key is not None
    request = {"workspace": workspace, "key": item.command.idempotency_key, "payload": item.payload}
    try:
        return answer_result(item.index, send_once(request=request, command=item.command))
    except IdempotencyAlreadyInProgressError:
        return error_result(item.index, idempotency_in_progress())
    except IdempotencyValidationError:
        return error_result(item.index, from_domain_error(IdempotencyKeyReused()))
    except SendonceError as error:
        return error_result(item.index, from_domain_error(error))


def answer_result(index: int, answer: StoredAnswer) -> BatchItemResult:
    """A Result from the answer the item alone gets (or got, and replays: stored, maybe long ago)."""
    body = json.loads(answer["body"])
    return BatchItemResult(
        index=index,
        status=answer["statusCode"],
        duplicateOnly=body.get("duplicateOnly"),
        replayed=bool(answer.get("replayed")),
        message=body.get("message"),
        error=None,
    )


def error_result(index: int, error: ApiError) -> BatchItemResult:
    return BatchItemResult(
        index=index,
        status=error.status,
        duplicateOnly=None,
        replayed=False,
        message=None,
        error=BatchItemError(code=error.code, message=error.message, details=error.details),
    )


def answer_batch(
    *,
    workspace: str,
    body: Any,
    strict: bool,
    header_key: str | None,
    key_required: bool,
    send_many: SendMany,
    send_once: SendOnce,
    send_batch_once: SendOnce,
) -> StoredAnswer:
    """The whole request: its own Idempotency-Key, the items' checks (strict: any 400 stops it
    before anything is written), then the items. Raises ApiError for an answer that is not a 200.

    `body`: the request's JSON body as the preflight decoded it; its key's payload is this value."""
    key = key_of(header_key)
    payload, raw_items = parse_request(body)
    # A key on the whole request makes each item's retry safe: the items need none of their own.
    items = [parse_item(i, raw, workspace, key_required and key is None) for i, raw in enumerate(raw_items)]
    if key is not None:  # each message made or caught names the batch's key: its answer shows them
        items = [
            replace(item, command=replace(item.command, batch_key=key)) if item.command is not None else item
            for item in items
        ]
    if strict and any(item.error is not None and item.error.status == 400 for item in items):
        raise validation_error(strict_details(items), "Some messages are not valid; nothing was sent.")

    def run() -> StoredAnswer:
        return send_items(items, workspace, send_many, send_once)

    if key is None:
        return run()
    try:
        return answered_once(
            send_batch_once, {"workspace": workspace, "key": key, "payload": payload}, run=run
        )
    except Unstored as unstored:
        return unstored.answer
