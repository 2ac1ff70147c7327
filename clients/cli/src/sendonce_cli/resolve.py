"""`sendonce resolve <message id> --as sent|failed`: settle an `unknown` message.

An `unknown` message's attempt may or may not have reached SES or SNS, and it is never retried
automatically. Once the operator has learned its outcome (the provider's console, its logs, the
recipient), this records it: through the delivery context's own use case, so the change happens
only while the message is still `unknown`, and `failed` releases its dedup lock.
"""

from __future__ import annotations

from typing import Any

from sendonce.adapters.dynamodb_dispatch import DynamoDbDispatchStore
from sendonce.dispatch.resolution import Resolution, Resolved, resolve_unknown
from sendonce.keyed_hash import KeyedHash
from sendonce.messages.ids import looks_like_message_id
from sendonce.messages.model import Status
from sendonce.secret_values import no_secret

OUTCOMES = ("sent", "failed")


def resolve(dynamodb: Any, table: str, message_id: str, outcome: str) -> Resolved:
    """Raises ValueError for an id that is no message id or an outcome other than sent or failed."""
    if not looks_like_message_id(message_id):
        raise ValueError(f"{message_id!r} is not a message id (msg_ and 26 characters)")
    if outcome not in OUTCOMES:
        raise ValueError(f"an unknown message is settled as sent or failed, not {outcome!r}")
    # Settling touches no suppression: the store never needs the hashing key here.
    store = DynamoDbDispatchStore(dynamodb, table, KeyedHash(no_secret))
    return resolve_unknown(store, message_id, Status(outcome))


def describe(resolved: Resolved, message_id: str, outcome: str) -> str:
    if resolved.resolution is Resolution.NOT_FOUND:
        return f"no message {message_id}: nothing to resolve"
    assert resolved.message is not None
    status = resolved.message.status.value
    if resolved.resolution is Resolution.NOT_UNKNOWN:
        return (
            f"message {message_id} is {status}, not unknown: only an unknown message can be resolved; "
            "nothing changed"
        )
    if outcome == "failed":
        return f"message {message_id} is now failed; its dedup lock is released, so it may be sent again"
    return f"message {message_id} is now sent; its dedup lock stays until the window ends"
