"""DynamoDB capacity units of each call, computed by DynamoDB's billing rules from the real item images.

moto answers `ReturnConsumedCapacity` with fixed figures (1.0 for any write, nothing for a
transaction), so the probe reads each touched item just before and just after the call (with a
client of its own, which is neither hooked nor counted) and applies the rules:

- item size: attribute names plus values (UTF-8 strings, numbers ~1 byte per 2 digits + 1,
  3 bytes of overhead per map or list), as in the DynamoDB developer guide;
- a write: 1 WRU per started 1 KB of the larger of the old and new item; a failed condition and a
  canceled transaction are charged as if written (conservative); in a transaction, 2x;
- each GSI: an item entering or leaving it is 1 write of its projected size; a change of the
  index's key is 2 (delete + put); a change of a projected attribute is 1;
- a read: 1 RRU per started 4 KB (strongly consistent), half of that eventually consistent
  (GSI queries always are), 2x in a transaction.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import botocore.session

Item = dict[str, Any]
WRITE_UNIT = 1024
READ_UNIT = 4096
WRITES = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems")
READS = ("GetItem", "Query")


def value_size(value: dict[str, Any]) -> int:
    kind, data = next(iter(value.items()))
    if kind == "S":
        return len(data.encode("utf-8"))
    if kind == "N":
        digits = str(Decimal(data)).lstrip("-").replace(".", "").lstrip("0") or "0"
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":
        return len(data)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(part.encode("utf-8")) for part in data)
    if kind == "NS":
        return sum(value_size({"N": part}) for part in data)
    if kind == "L":
        return 3 + sum(1 + value_size(part) for part in data)
    if kind == "M":
        return 3 + sum(1 + len(name.encode("utf-8")) + value_size(part) for name, part in data.items())
    return len(str(data))


def item_size(item: Item | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())


@dataclass(frozen=True)
class Index:
    name: str
    keys: tuple[str, ...]
    projection: str  # ALL, KEYS_ONLY or INCLUDE
    included: tuple[str, ...]


@dataclass(frozen=True)
class TableShape:
    keys: tuple[str, ...]
    indexes: tuple[Index, ...]


@dataclass
class Units:
    wru: float = 0.0
    rru: float = 0.0
    detail: list[str] = field(default_factory=list)

    def add(self, other: Units) -> None:
        self.wru += other.wru
        self.rru += other.rru
        self.detail.extend(other.detail)


def _projected(index: Index, table: TableShape, item: Item | None) -> Item | None:
    if item is None or any(key not in item for key in index.keys):
        return None
    if index.projection == "ALL":
        return item
    names = set(index.keys) | set(table.keys) | set(index.included)
    return {name: value for name, value in item.items() if name in names}


def index_writes(index: Index, table: TableShape, old: Item | None, new: Item | None) -> float:
    before, after = _projected(index, table, old), _projected(index, table, new)
    if before is None and after is None:
        return 0
    if before is None or after is None:
        return math.ceil(item_size(before or after) / WRITE_UNIT)
    if any(old[key] != new[key] for key in index.keys):  # type: ignore[index]
        return math.ceil(item_size(before) / WRITE_UNIT) + math.ceil(item_size(after) / WRITE_UNIT)
    if before != after:
        return math.ceil(max(item_size(before), item_size(after)) / WRITE_UNIT)
    return 0


class CapacityProbe:
    """Hooks DynamoDB clients; while `active`, prices every call into `units`."""

    def __init__(self, endpoint: str) -> None:
        session = botocore.session.get_session()
        self._client = session.create_client(
            "dynamodb",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # the emulator's dummy credentials
        )
        self._shapes: dict[str, TableShape] = {}
        self._local = threading.local()
        self.active = False
        self.units = Units()

    # ------------------------------------------------------------------ hooks
    def hook(self, client: Any) -> None:
        if client.meta.service_model.service_name != "dynamodb":
            return
        client.meta.events.register("before-parameter-build.dynamodb", self._remember_params)
        client.meta.events.register("before-call.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)

    def _remember_params(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        context["bench_params"] = dict(params)

    def _before(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        # A Query is priced from what it returned (after the call): no item is read before it.
        if not self.active or model.name not in WRITES + READS or model.name == "Query":
            return
        params = context.get("bench_params") or {}
        context["bench_old"] = [
            (table, key, self._get(table, key)) for table, key, _, _ in self._targets(model.name, params)
        ]

    def _after(self, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if not self.active or model.name not in WRITES + READS:
            return
        params = context.get("bench_params") or {}
        failed = "Error" in parsed or "CancellationReasons" in parsed
        if model.name == "Query":
            self.units.add(self._query(params, parsed))
            return
        targets = self._targets(model.name, params)
        transactional = model.name.startswith("Transact")
        for (table, key, old), (_, _, action, attempted) in zip(
            context.get("bench_old") or [], targets, strict=False
        ):
            if model.name == "GetItem":
                self.units.add(self._read(table, old, bool(params.get("ConsistentRead"))))
                continue
            new = old if failed else self._get(table, key)
            self.units.add(self._write(table, action, old, new, attempted, failed, transactional))

    # ------------------------------------------------------------------ rules
    def _write(
        self,
        table: str,
        action: str,
        old: Item | None,
        new: Item | None,
        attempted: Item | None,
        failed: bool,
        transactional: bool,
    ) -> Units:
        shape = self._shape(table)
        size = max(item_size(old), item_size(new), item_size(attempted) if failed else 0, 1)
        base = math.ceil(size / WRITE_UNIT) * (2 if transactional else 1)
        gsi = 0.0 if failed else sum(index_writes(index, shape, old, new) for index in shape.indexes)
        outcome = "failed" if failed else "ok"
        return Units(wru=base + gsi, detail=[f"{table} {action} {outcome} {size}B: {base} WRU + {gsi:g} GSI"])

    def _read(self, table: str, item: Item | None, consistent: bool) -> Units:
        units = math.ceil(max(item_size(item), 1) / READ_UNIT) * (1 if consistent else 0.5)
        return Units(rru=units, detail=[f"{table} GetItem {item_size(item)}B: {units:g} RRU"])

    def _query(self, params: dict[str, Any], parsed: dict[str, Any]) -> Units:
        size = sum(item_size(item) for item in parsed.get("Items") or [])
        consistent = bool(params.get("ConsistentRead")) and not params.get("IndexName")
        units = math.ceil(max(size, 1) / READ_UNIT) * (1 if consistent else 0.5)
        return Units(rru=units, detail=[f"{params.get('TableName')} Query {size}B: {units:g} RRU"])

    # ------------------------------------------------------------------ items
    def _targets(self, operation: str, params: dict[str, Any]) -> list[tuple[str, Item, str, Item | None]]:
        """(table, key, action, the item a Put writes) of each item the call touches."""
        if operation == "TransactWriteItems":
            out = []
            for entry in params.get("TransactItems") or []:
                action, body = next(iter(entry.items()))
                out.append((body["TableName"], self._key(body["TableName"], body), action, body.get("Item")))
            return out
        action = {"PutItem": "Put", "UpdateItem": "Update", "DeleteItem": "Delete", "GetItem": "Get"}[
            operation
        ]
        return [(params["TableName"], self._key(params["TableName"], params), action, params.get("Item"))]

    def _key(self, table: str, body: dict[str, Any]) -> Item:
        if "Key" in body:
            key: Item = body["Key"]
            return key
        return {name: body["Item"][name] for name in self._shape(table).keys}

    def _get(self, table: str, key: Item) -> Item | None:
        item: Item | None = self._client.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        return item

    def _shape(self, table: str) -> TableShape:
        if table not in self._shapes:
            described = self._client.describe_table(TableName=table)["Table"]
            indexes = tuple(
                Index(
                    name=index["IndexName"],
                    keys=tuple(key["AttributeName"] for key in index["KeySchema"]),
                    projection=index["Projection"]["ProjectionType"],
                    included=tuple(index["Projection"].get("NonKeyAttributes") or ()),
                )
                for index in described.get("GlobalSecondaryIndexes") or []
            )
            keys = tuple(key["AttributeName"] for key in described["KeySchema"])
            self._shapes[table] = TableShape(keys=keys, indexes=indexes)
        return self._shapes[table]

    def measure(self, run: Any) -> Units:
        """Price the DynamoDB calls made while `run()` runs."""
        self.units = Units()
        self.active = True
        try:
            run()
        finally:
            self.active = False
        return self.units
