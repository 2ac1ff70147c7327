"""The limits on DynamoDB (LimitsTable): per-workspace overrides, rate counters and quota shards.

Overrides are read through a Powertools parameters provider (its documented custom-provider
extension), so each execution environment reads a workspace's limits at most once per cache
period. A rate lease is one atomic `ADD` of its size on one shard of its window, whose answer (the
shard's new count) tells what it was granted; the count only grows within its window. A
quota shard is an item the sending store's create transaction updates under its cap; the shards
this environment found full today are remembered, so a spent quota costs no probing twice.
Counters carry `expiresAt`, which the table's TTL removes.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from aws_lambda_powertools.utilities.parameters.base import BaseProvider

from sendonce.adapters.dynamodb_items import epoch_seconds
from sendonce.adapters.dynamodb_writes import DynamoDbTable
from sendonce.errors import DependencyUnavailable
from sendonce.limits.model import Limits, QuotaCharge, Window, check_daily_quota, check_rate

COUNTER = "count"  # the sort key of every counter item
RATE = "ratePerSecond"
DAILY_QUOTA = "dailyQuota"
# BatchGetItem reads at most 100 keys a call.
BATCH_GET_LIMIT = 100


def overrides_key(workspace_id: str) -> str:
    return f"LIMITS#{workspace_id}"


def rate_key(workspace_id: str, window: int, shard: int) -> dict[str, Any]:
    return {"pk": {"S": f"RATE#{workspace_id}#{window}#{shard}"}, "sk": {"S": COUNTER}}


def quota_key(charge: QuotaCharge, shard: int) -> dict[str, Any]:
    return {"pk": {"S": f"QUOTA#{charge.workspace_id}#{charge.day}#{shard}"}, "sk": {"S": COUNTER}}


class _Overrides(BaseProvider):
    """Powertools' cache over one Query of a workspace's override items (sort key: the limit's name)."""

    def __init__(self, table: DynamoDbTable) -> None:
        super().__init__(client=table.client)  # type: ignore[no-untyped-call]
        self._table = table

    def _get(self, name: str, **sdk_options: Any) -> str:
        raise NotImplementedError("overrides are read together, with get_multiple")

    def _get_multiple(self, path: str, **sdk_options: Any) -> dict[str, str]:
        response = self._table.query(
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": path}},
            ConsistentRead=True,
        )
        return {item["sk"]["S"]: item["value"]["N"] for item in response.get("Items", [])}


class DynamoDbLimits:
    def __init__(
        self,
        client: Any,
        table_name: str,
        defaults: Limits,
        cache_seconds: int = 60,
        shard_of: Callable[[int], int] = random.randrange,
    ) -> None:
        self._table = DynamoDbTable(client, table_name)
        self._defaults = defaults
        self._cache_seconds = cache_seconds
        self._overrides = _Overrides(self._table)
        self._shard_of = shard_of
        self._full: dict[tuple[str, str, int], set[int]] = {}  # (workspace, day, quota): full shards
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ overrides
    def limits_of(self, workspace_id: str) -> Limits:
        try:
            found = self._overrides.get_multiple(overrides_key(workspace_id), max_age=self._cache_seconds)
        except Exception as error:
            raise DependencyUnavailable(str(error)) from error
        return Limits(
            rate_per_second=int(str(found.get(RATE, self._defaults.rate_per_second))),
            daily_quota=int(str(found.get(DAILY_QUOTA, self._defaults.daily_quota))),
        )

    def set_limits(self, workspace_id: str, rate: int | None, daily_quota: int | None) -> None:
        """The operator's override (the CLI's). Every value is checked first (ValueError), so a bad
        one changes nothing."""
        if rate is None and daily_quota is None:
            raise ValueError("give a rate, a daily quota or both")
        if rate is not None:
            check_rate(rate)
        if daily_quota is not None:
            check_daily_quota(daily_quota)
        for name, value in {RATE: rate, DAILY_QUOTA: daily_quota}.items():
            if value is not None:
                self._table.write(
                    "put_item",
                    Item={
                        "pk": {"S": overrides_key(workspace_id)},
                        "sk": {"S": name},
                        "value": {"N": str(value)},
                    },
                )

    # ------------------------------------------------------------------ request rate
    def take_lease(self, workspace_id: str, window: Window, shard: int, tokens: int) -> int:
        if tokens < 1:
            raise ValueError(f"a lease takes at least one token, not {tokens}")
        response = self._table.write(
            "update_item",
            Key=rate_key(workspace_id, window.number, shard),
            UpdateExpression="ADD hits :tokens SET expiresAt = if_not_exists(expiresAt, :expires)",
            ExpressionAttributeValues={
                ":tokens": {"N": str(tokens)},
                ":expires": {"N": str(window.ends_at_epoch + 60)},
            },
            ReturnValues="UPDATED_NEW",
        )
        if not isinstance(response, dict):  # the update has no condition: it cannot be refused
            raise DependencyUnavailable("the rate window's update was refused")
        return int(response["Attributes"]["hits"]["N"])

    # ------------------------------------------------------------------ daily quota
    def used_today(self, workspace_id: str, limits: Limits, now: datetime) -> int:
        charge = QuotaCharge.of(workspace_id, limits, now)
        return 0 if charge is None else sum(self._shard_counts(charge).values())

    def _shard_counts(self, charge: QuotaCharge) -> dict[int, int]:
        """Every shard's count today (BatchGetItem, 100 keys a call); a shard never written is absent."""
        keys = [quota_key(charge, shard) for shard in range(charge.limits.quota_shards)]
        prefix = f"QUOTA#{charge.workspace_id}#{charge.day}#"
        counts: dict[int, int] = {}
        for start in range(0, len(keys), BATCH_GET_LIMIT):
            request: dict[str, Any] = {self._table.name: {"Keys": keys[start : start + BATCH_GET_LIMIT]}}
            while request:
                try:
                    response = self._table.client.batch_get_item(RequestItems=request)
                except Exception as error:
                    raise DependencyUnavailable(str(error)) from error
                for item in response["Responses"].get(self._table.name, []):
                    counts[int(item["pk"]["S"].removeprefix(prefix))] = int(item["used"]["N"])
                request = response.get("UnprocessedKeys") or {}
        return counts

    def learn_full(self, charge: QuotaCharge) -> None:
        """Read every shard's count once and remember the full ones: near the quota's end, one read
        of all shards costs less than probing them one by one."""
        for shard, used in self._shard_counts(charge).items():
            self._note_count(charge, shard, used)

    def note_refusal(self, charge: QuotaCharge, shard: int, item: dict[str, Any] | None) -> None:
        """A shard refused a charge: full for the day when its count (the refusal's ALL_OLD item)
        reached its cap; otherwise it only lacked room for that many units."""
        if item is not None:
            self._note_count(charge, shard, int(item.get("used", {}).get("N", "0")))

    def _note_count(self, charge: QuotaCharge, shard: int, used: int) -> None:
        if used >= charge.limits.quota_shard_cap(shard):
            self.mark_full(charge, shard)

    def shards_to_try(self, charge: QuotaCharge) -> list[int]:
        """The shards not known full, starting at a random one: concurrent sends spread out."""
        with self._lock:
            full = frozenset(self._full.get(_full_key(charge), ()))
        shards = charge.limits.quota_shards
        start = self._shard_of(shards)
        # Built from two ranges, not shard by shard: every send asks, and a quota has hundreds.
        in_turn = [*range(start, shards), *range(start)]
        return [shard for shard in in_turn if shard not in full] if full else in_turn

    def mark_full(self, charge: QuotaCharge, shard: int) -> None:
        with self._lock:
            self._full.setdefault(_full_key(charge), set()).add(shard)

    def charge_item(self, charge: QuotaCharge, shard: int, units: int) -> dict[str, Any]:
        """The transaction item that takes `units` of `shard`, only while they fit under its cap."""
        room = charge.limits.quota_shard_cap(shard) - units
        if room < 0:  # a shard never written would take them all: its condition could not refuse
            raise ValueError(f"{units} units do not fit under shard {shard}'s cap at all")
        return {
            "Update": {
                "TableName": self._table.name,
                "Key": quota_key(charge, shard),
                "UpdateExpression": "ADD used :units SET expiresAt = if_not_exists(expiresAt, :expires)",
                "ConditionExpression": "attribute_not_exists(used) OR used <= :room",
                "ExpressionAttributeValues": {
                    ":units": {"N": str(units)},
                    ":room": {"N": str(room)},
                    ":expires": epoch_seconds(charge.expires_at),
                },
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }


def _full_key(charge: QuotaCharge) -> tuple[str, str, int]:
    return (charge.workspace_id, charge.day, charge.limits.daily_quota)
