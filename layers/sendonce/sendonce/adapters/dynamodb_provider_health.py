"""Each provider's run of failures to accept, and its cool-off, in the messages table: one item per
provider (`PROVIDER#<name>`), shared by every execution environment.

A failure is counted with an atomic ADD; the one that brings the run to `after` starts the cool-off,
in a write conditioned on the run still being that long, so of two environments counting at once
exactly one starts it (and reports it). An acceptance ends the run, with a write only when this
environment last saw a run under way: a plain delivery costs no call here. What an environment
reads is kept for `cache_seconds`, so a list of providers costs one read per provider every few
seconds, not one a message; a run another environment ended within that time may be counted on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from datetime import datetime, timedelta
from typing import Any

from msgspec import Struct

from sendonce.adapters.dynamodb_items import parse_datetime
from sendonce.adapters.dynamodb_writes import ConditionFailed, DynamoDbTable
from sendonce.clock import rfc3339
from sendonce.observability import logger, metrics

HEALTH_SK = "HEALTH"
CACHE_SECONDS = 5.0


def health_key(provider: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": f"PROVIDER#{provider}"}, "sk": {"S": HEALTH_SK}}


class _HealthSeen(Struct):
    failures: int
    cool_until: datetime | None
    read_at: float


class DynamoDbProviderHealth:
    def __init__(
        self,
        client: Any,
        table_name: str,
        *,
        after: int,
        cooloff_seconds: float,
        cache_seconds: float = CACHE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._table = DynamoDbTable(client, table_name)
        self._after = after
        self._cooloff = timedelta(seconds=cooloff_seconds)
        self._cache_seconds = cache_seconds
        self._monotonic = monotonic
        self._seen: dict[str, _HealthSeen] = {}

    def cooling(self, providers: Collection[str], now: datetime) -> frozenset[str]:
        cooling = set()
        for provider in providers:
            seen = self._read(provider)
            if seen.cool_until is not None and seen.cool_until > now:
                cooling.add(provider)
        return frozenset(cooling)

    def not_accepted(self, provider: str, now: datetime) -> bool:
        response = self._table.write(
            "update_item",
            Key=health_key(provider),
            UpdateExpression="ADD failures :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
            ReturnValues="ALL_NEW",
        )
        attributes = response["Attributes"] if not isinstance(response, ConditionFailed) else {}
        failures = int(attributes.get("failures", {}).get("N", "1"))
        self._remember(provider, attributes)
        if failures < self._after:
            return False
        cool_until = now + self._cooloff
        started = self._table.write(
            "update_item",
            Key=health_key(provider),
            UpdateExpression="SET coolUntil = :until, failures = :zero",
            # The run is still this long: no other environment started this cool-off already.
            ConditionExpression="failures >= :after",
            ExpressionAttributeValues={
                ":until": {"S": rfc3339(cool_until)},
                ":zero": {"N": "0"},
                ":after": {"N": str(self._after)},
            },
        )
        if isinstance(started, ConditionFailed):
            return False
        self._seen[provider] = _HealthSeen(0, cool_until, self._monotonic())
        metrics.add_metric(name="ProviderCooledOff", unit="Count", value=1)
        logger.warning(
            "provider.cooloff.started",
            extra={
                "event": "provider.cooloff.started",
                "provider": provider,
                "failures_in_a_row": failures,
                "until": rfc3339(cool_until),
            },
        )
        return True

    def accepted(self, provider: str, now: datetime) -> None:
        seen = self._seen.get(provider)
        if seen is None or seen.failures == 0:
            return  # no run under way as far as this environment knows: nothing to write
        self._table.write(
            "update_item",
            Key=health_key(provider),
            UpdateExpression="SET failures = :zero",
            ConditionExpression="failures > :zero",
            ExpressionAttributeValues={":zero": {"N": "0"}},
        )
        self._seen[provider] = _HealthSeen(0, seen.cool_until, self._monotonic())

    def _read(self, provider: str) -> _HealthSeen:
        seen = self._seen.get(provider)
        if seen is not None and self._monotonic() - seen.read_at < self._cache_seconds:
            return seen
        return self._remember(provider, self._table.get(health_key(provider)) or {})

    def _remember(self, provider: str, item: dict[str, Any]) -> _HealthSeen:
        until = item.get("coolUntil")
        seen = _HealthSeen(
            int(item.get("failures", {}).get("N", "0")),
            parse_datetime(until["S"]) if until else None,
            self._monotonic(),
        )
        self._seen[provider] = seen
        return seen
