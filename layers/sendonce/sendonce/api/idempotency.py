"""Idempotency-Key records on Powertools' idempotency utility, with its DynamoDB persistence layer.

The record is keyed by (workspace, key), so one workspace's key never meets another's; it is
compared on the canonical parsed body, and it stores the complete HTTP answer, so a replay is the
original status code and body, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord

# Stable forever: changing it would forget every stored key.
KEY_PREFIX = "sendonce.v1.messages.send"

StoredAnswer = dict[str, Any]
# `send_once(request={"workspace", "key", "payload"}, command=...)`, as POST /v1/messages runs it.
SendOnce = Callable[..., StoredAnswer]


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
    wrapped: SendOnce = idempotent_function(
        data_keyword_argument="request",
        persistence_store=persistence,
        config=config,
        key_prefix=key_prefix,
    )(send)
    return wrapped
