"""Idempotency-Key records on Powertools' idempotency utility, with its DynamoDB persistence layer.

The record is keyed by (workspace, key), so one workspace's key never meets another's; it is
compared on the canonical parsed body, and it stores the complete HTTP answer, so a replay is the
original status code and body, byte for byte.

A record is one DynamoDB item (400 KB at most), and Powertools writes the answer into it as JSON
once more: an answer whose body is large (an email's html part, a batch's results) is stored with
its body compressed (`bodyZ`, zlib and base64), and given back to its callers whole, so any answer
the request limits allow fits its record.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Callable
from functools import wraps
from typing import Any

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord

from sendonce.api.errors import ApiError, from_domain_error, idempotency_in_progress
from sendonce.errors import IdempotencyKeyReused
from sendonce.idempotency.keys import InvalidIdempotencyKey, parse_idempotency_key

# Stable forever: changing it would forget every stored key.
KEY_PREFIX = "sendonce.v1.messages.send"
# Stable forever too, and apart from the single send's: a batch's key covers the whole request.
BATCH_KEY_PREFIX = "sendonce.v1.messages.batch"

StoredAnswer = dict[str, Any]
# `send_once(request={"workspace", "key", "payload"}, command=...)`, as POST /v1/messages runs it.
SendOnce = Callable[..., StoredAnswer]


# Bodies longer than this are stored compressed; shorter ones as they are (every record before).
COMPRESS_OVER_CHARS = 32_768


def _packed(answer: StoredAnswer) -> StoredAnswer:
    body = answer.get("body")
    if not isinstance(body, str) or len(body) <= COMPRESS_OVER_CHARS:
        return answer
    packed = {name: value for name, value in answer.items() if name != "body"}
    packed["bodyZ"] = base64.b64encode(zlib.compress(body.encode("utf-8"), 6)).decode("ascii")
    return packed


def _unpacked(answer: StoredAnswer) -> StoredAnswer:
    if "bodyZ" not in answer:
        return answer
    body = zlib.decompress(base64.b64decode(answer["bodyZ"])).decode("utf-8")
    return {**{name: value for name, value in answer.items() if name != "bodyZ"}, "body": body}


def _mark_replayed(response: Any, idempotent_data: DataRecord) -> Any:
    return {**response, "replayed": True}


def idempotency_config(ttl_seconds: int) -> IdempotencyConfig:
    return IdempotencyConfig(
        event_key_jmespath="[workspace, key]",
        payload_validation_jmespath="payload",
        raise_on_no_idempotency_key=True,
        expires_after_seconds=ttl_seconds,
        response_hook=_mark_replayed,
        hash_function="sha256",
    )


def make_idempotent(
    send: SendOnce, table_name: str, client: Any, config: IdempotencyConfig, key_prefix: str = KEY_PREFIX
) -> SendOnce:
    """`send(request={"workspace", "key", "payload"}, ...)`, run at most once per key and window.

    `key_prefix`: the keys' namespace (a route's own, such as the batch route's)."""
    persistence = DynamoDBPersistenceLayer(table_name=table_name, boto3_client=client)

    @wraps(send)
    def packing(*args: Any, **kwargs: Any) -> StoredAnswer:
        return _packed(send(*args, **kwargs))

    wrapped: SendOnce = idempotent_function(
        data_keyword_argument="request",
        persistence_store=persistence,
        config=config,
        key_prefix=key_prefix,
    )(packing)

    @wraps(send)
    def unpacking(*args: Any, **kwargs: Any) -> StoredAnswer:
        return _unpacked(wrapped(*args, **kwargs))

    return unpacking


def key_of(header_value: str | None, *, required: bool = False) -> str | None:
    """The Idempotency-Key a header names (400 when it is not one); a missing one refused where the
    settings require it."""
    if header_value is not None:
        try:
            return parse_idempotency_key(header_value)
        except InvalidIdempotencyKey as error:
            raise ApiError(400, "invalid_idempotency_key", f"Idempotency-Key {error}.") from None
    if required:
        raise ApiError(400, "missing_idempotency_key", "This API requires an Idempotency-Key header.")
    return None


def answered_once(once: SendOnce, request: dict[str, Any], **arguments: Any) -> StoredAnswer:
    """`once` run under the request's key: its answer, stored or replayed; the key in flight is a
    409 (`Retry-After: 1`), used before with another request a 422."""
    try:
        return once(request=request, **arguments)
    except IdempotencyAlreadyInProgressError:
        raise idempotency_in_progress() from None
    except IdempotencyValidationError:
        raise from_domain_error(IdempotencyKeyReused()) from None
