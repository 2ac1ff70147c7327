"""The shared ground of every DynamoDB adapter: one table, its conditional writes and transactions.

Each failure has one meaning everywhere: a failed condition is an answer (the item as it was, when
asked for), a canceled transaction is its reasons, mapped here once, and anything else means the
dependency failed and nothing was written (`DependencyUnavailable`). A transaction canceled by
contention is tried again, with jitter, a bounded number of times.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from msgspec import Struct

from sendonce.errors import DependencyUnavailable

Item = dict[str, dict[str, Any]]
T = TypeVar("T")

CONDITION_FAILED = "ConditionalCheckFailed"
# BatchGetItem reads at most 100 keys a call; BatchWriteItem writes at most 25 items.
BATCH_GET_KEYS = 100
BATCH_WRITE_ITEMS = 25
CONFLICT = "TransactionConflict"
# Two transactions on one item at once: one wins, the other is canceled with a conflict and
# tried again here, then meets the winner's write as a failed condition.
MAX_ATTEMPTS = 8


def error_code(error: Exception) -> str:
    response = getattr(error, "response", None) or {}
    code: str = response.get("Error", {}).get("Code", "")
    return code


class ConditionFailed(Struct, frozen=True):
    """A conditional write that did not happen; `item` as it was, when ALL_OLD was asked for."""

    item: Item | None


class Cancellation(Struct, frozen=True):
    """Why a transaction was canceled: one reason per item, in the order the items were given."""

    codes: tuple[str | None, ...]
    items: tuple[Item | None, ...]

    @classmethod
    def of(cls, error: Exception) -> Cancellation:
        reasons = (getattr(error, "response", None) or {}).get("CancellationReasons") or []
        return cls(
            codes=tuple(reason.get("Code") for reason in reasons),
            items=tuple(reason.get("Item") for reason in reasons),
        )

    def failed(self, index: int) -> bool:
        """The condition of item `index` failed."""
        return index < len(self.codes) and self.codes[index] == CONDITION_FAILED

    def item(self, index: int) -> Item | None:
        return self.items[index] if index < len(self.items) else None

    @property
    def contended(self) -> bool:
        """Another write got there first: reading again and trying again can succeed."""
        return any(code in (CONFLICT, CONDITION_FAILED) for code in self.codes)


class DynamoDbTable:
    """One table through a low-level client; every request goes through the methods below."""

    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self.name = name

    def get(self, key: Item) -> Item | None:
        try:
            item: Item | None = self.client.get_item(TableName=self.name, Key=key, ConsistentRead=True).get(
                "Item"
            )
        except Exception as error:
            raise DependencyUnavailable(str(error)) from error
        return item

    def query(self, **request: Any) -> dict[str, Any]:
        try:
            response: dict[str, Any] = self.client.query(TableName=self.name, **request)
        except Exception as error:
            raise DependencyUnavailable(str(error)) from error
        return response

    def batch_get(self, keys: Sequence[Item], sleep: Callable[[float], None] = time.sleep) -> dict[str, Item]:
        """The items of `keys` that exist, by their `pk`, each read strongly consistent. Keys left
        unprocessed (DynamoDB's 16 MB answer, or throttling) are asked again, a bounded number of
        times with jittered waits; still unread, DependencyUnavailable."""
        found: dict[str, Item] = {}
        for start in range(0, len(keys), BATCH_GET_KEYS):
            request = {
                self.name: {"Keys": list(keys[start : start + BATCH_GET_KEYS]), "ConsistentRead": True}
            }
            for tries in range(1, MAX_ATTEMPTS + 1):
                try:
                    response = self.client.batch_get_item(RequestItems=request)
                except Exception as error:
                    raise DependencyUnavailable(str(error)) from error
                for item in response.get("Responses", {}).get(self.name, []):
                    found[item["pk"]["S"]] = item
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
                if tries < MAX_ATTEMPTS:
                    sleep(random.uniform(0.005, 0.02) * tries)
            if request:
                raise DependencyUnavailable("DynamoDB left keys of a BatchGetItem unread")
        return found

    def batch_write(
        self,
        puts: Sequence[Item] = (),
        deletes: Sequence[Item] = (),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Unconditional puts of whole items and deletes by key, 25 a BatchWriteItem; each item is
        written on its own, not atomically with the others. Items left unprocessed (throttling) are
        sent again, a bounded number of times with jittered waits; still unwritten,
        DependencyUnavailable."""
        requests = [{"PutRequest": {"Item": item}} for item in puts]
        requests += [{"DeleteRequest": {"Key": key}} for key in deletes]
        for start in range(0, len(requests), BATCH_WRITE_ITEMS):
            left: dict[str, Any] = {self.name: requests[start : start + BATCH_WRITE_ITEMS]}
            for tries in range(1, MAX_ATTEMPTS + 1):
                try:
                    left = self.client.batch_write_item(RequestItems=left).get("UnprocessedItems") or {}
                except Exception as error:
                    raise DependencyUnavailable(str(error)) from error
                if not left:
                    break
                if tries < MAX_ATTEMPTS:
                    sleep(random.uniform(0.005, 0.02) * tries)
            if left:
                raise DependencyUnavailable("DynamoDB left items of a BatchWriteItem unwritten")

    def write(self, operation: str, **request: Any) -> dict[str, Any] | ConditionFailed:
        """`put_item`, `update_item` or `delete_item` with a condition: the response, or why not.

        A write that met a transaction under way on its item was refused and wrote nothing: it is
        tried again, as a contended transaction is (a claim meeting an edit, say, is then answered
        by the edit's outcome rather than failing its record)."""

        def attempt() -> dict[str, Any] | ConditionFailed:
            try:
                response: dict[str, Any] = getattr(self.client, operation)(TableName=self.name, **request)
            except Exception as error:
                code = error_code(error)
                if code == "ConditionalCheckFailedException":
                    return ConditionFailed((getattr(error, "response", None) or {}).get("Item"))
                if code == "TransactionConflictException":
                    raise TryAgain from error
                raise DependencyUnavailable(str(error)) from error
            return response

        return with_retries(attempt, f"{operation} kept meeting a transaction on its item")

    def transact(self, items: list[dict[str, Any]], token: str | None = None) -> Cancellation | None:
        """Write `[{"Put"|"Update"|"Delete"|"ConditionCheck": {...}}]` on this table atomically.

        None when committed. `token`: a retry of a committed transaction (the SDK's own, after a
        lost answer) is then a no-op success instead of a second write.
        """
        request: dict[str, Any] = {
            "TransactItems": [
                {operation: {"TableName": self.name, **body}}
                for entry in items
                for operation, body in entry.items()
            ]
        }
        if token is not None:
            request["ClientRequestToken"] = token
        try:
            self.client.transact_write_items(**request)
        except Exception as error:
            if error_code(error) != "TransactionCanceledException":
                raise DependencyUnavailable(str(error)) from error
            return Cancellation.of(error)
        return None


class TryAgain(Exception):
    """Raised by an attempt whose write lost to another: read again and try again."""


def with_retries(attempt: Callable[[], T], gave_up: str, sleep: Callable[[float], None] = time.sleep) -> T:
    """Run `attempt` until it answers without TryAgain, at most MAX_ATTEMPTS times, with jittered waits."""
    for tries in range(1, MAX_ATTEMPTS + 1):
        try:
            return attempt()
        except TryAgain:
            if tries < MAX_ATTEMPTS:
                sleep(random.uniform(0.005, 0.02) * tries)
    raise DependencyUnavailable(gave_up)
