"""DynamoDB capacity units of each call, computed by DynamoDB's billing rules from the real item images.

moto answers `ReturnConsumedCapacity` with fixed figures (1.0 for any write, nothing for a
transaction), so the probe reads each touched item just before and just after the call (with a
client of its own, which is neither hooked nor counted) and applies the rules:

- item size: attribute names plus values (UTF-8 strings, numbers ~1 byte per 2 digits + 1,
  3 bytes of overhead per map or list), as in the DynamoDB developer guide;
- a write: 1 WRU per started 1 KB of the larger of the old and new item; a failed condition and a
  canceled transaction are charged as if written (conservative); in a transaction, 2x. Every item
  of a `TransactWriteItems` is such a write, a `ConditionCheck` included (2 WRU for an absent item,
  as a suppression check mostly finds), on the partition of its key;
- each GSI: an item entering or leaving it is 1 write of its projected size; a change of the
  index's key is 2 (delete + put); a change of a projected attribute is 1;
- a read: 1 RRU per started 4 KB (strongly consistent), half of that eventually consistent
  (GSI queries always are), 2x in a transaction; a BatchGetItem prices each item on its own;
- an item deleted by TTL costs its table nothing, and each GSI an item leaves (as any delete).

Each figure is also kept per partition (`PartitionUse`: the table or index and the value of its
partition key), so `busiest_partitions` can tell, from the real item images of one message's life
(`message_life`), what the busiest partition of each table and index takes when one workspace
sends at a given rate, against DynamoDB's per-partition limits (1,000 WCU and 3,000 RCU a second).
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest.mock import patch

import boto3
import botocore.session
from moto import mock_aws
from sendonce.adapters.dynamodb_activity import PROMISE_SHARDS
from sendonce.adapters.dynamodb_api_keys import DynamoDbApiKeyStore
from sendonce.adapters.dynamodb_dispatch import DynamoDbDispatchStore
from sendonce.adapters.dynamodb_items import LISTING_SHARDS, OUTBOX_SHARDS
from sendonce.adapters.dynamodb_limits import DynamoDbLimits
from sendonce.adapters.dynamodb_provider_events import DynamoDbProviderEventStore
from sendonce.adapters.dynamodb_sending import DynamoDbSendingStore
from sendonce.adapters.dynamodb_webhooks import ENDPOINT_COPIES, EVENT_SHARDS, DynamoDbWebhookStore
from sendonce.api.idempotency import idempotency_config, make_idempotent
from sendonce.api.shapes import message_shape
from sendonce.auth.api_keys import hash_api_key
from sendonce.dedup.identity import dedup_identity
from sendonce.dispatch.ports import ClaimedMessage
from sendonce.idempotency.keys import tie_identity
from sendonce.keyed_hash import KeyedHash
from sendonce.limits.model import MAX_DAILY_QUOTA, Limits, QuotaCharge, QuotaPlan, Window
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Channel, Message, Status
from sendonce.messages.ports import Created, DedupClaim, KeyTie
from sendonce.messages.service import handoff_due_at
from sendonce.provider_events.model import ProviderEvent, ProviderEventType
from sendonce.status_webhooks.model import (
    Change,
    Delivery,
    Endpoint,
    Event,
    SigningSecret,
    new_endpoint_id,
    new_secret,
)
from sendonce.status_webhooks.ports import Attempt
from sendonce.status_webhooks.rules import (
    EventType,
)

from sendonce_local.emulator import create_tables
from sendonce_local.template import load_template

Item = dict[str, Any]
WRITE_UNIT = 1024
READ_UNIT = 4096
WRITES = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems")
READS = ("GetItem", "Query", "BatchGetItem")


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


@dataclass(frozen=True)
class PartitionUse:
    """Capacity taken on one partition: of `table`, or of its index `index`, by partition key value."""

    table: str
    index: str | None
    partition: str
    wcu: float = 0.0
    rcu: float = 0.0


@dataclass
class Units:
    wru: float = 0.0
    rru: float = 0.0
    detail: list[str] = field(default_factory=list)
    uses: list[PartitionUse] = field(default_factory=list)

    def add(self, other: Units) -> None:
        self.wru += other.wru
        self.rru += other.rru
        self.detail.extend(other.detail)
        self.uses.extend(other.uses)


def _projected(index: Index, table: TableShape, item: Item | None) -> Item | None:
    if item is None or any(key not in item for key in index.keys):
        return None
    if index.projection == "ALL":
        return item
    names = set(index.keys) | set(table.keys) | set(index.included)
    return {name: value for name, value in item.items() if name in names}


def _key_of(keys: tuple[str, ...], item: Item) -> tuple[str, ...]:
    """An item's primary key values, to match a BatchGetItem's answer with the keys it asked for."""
    return tuple(json.dumps(item[name], sort_keys=True) for name in keys)


def _partition(keys: tuple[str, ...], item: Item) -> str:
    return str(next(iter(item[keys[0]].values())))


def index_uses(
    index: Index, table: TableShape, old: Item | None, new: Item | None
) -> list[tuple[str, float]]:
    """The writes a change of an item makes to `index`: (partition key value, WCU) of each."""
    before, after = _projected(index, table, old), _projected(index, table, new)
    if before is None and after is None:
        return []
    if before is None or after is None:
        entry = before or after
        return [(_partition(index.keys, entry), math.ceil(item_size(entry) / WRITE_UNIT))]  # type: ignore[arg-type]
    if any(old[key] != new[key] for key in index.keys):  # type: ignore[index]
        return [  # out of its old place, into its new one
            (_partition(index.keys, before), math.ceil(item_size(before) / WRITE_UNIT)),
            (_partition(index.keys, after), math.ceil(item_size(after) / WRITE_UNIT)),
        ]
    if before != after:
        return [
            (_partition(index.keys, after), math.ceil(max(item_size(before), item_size(after)) / WRITE_UNIT))
        ]
    return []


def index_writes(index: Index, table: TableShape, old: Item | None, new: Item | None) -> float:
    return sum(units for _, units in index_uses(index, table, old, new))


class CapacityProbe:
    """Hooks DynamoDB clients; while `active`, prices every call into `units`."""

    def __init__(self, endpoint: str | None, shapes: dict[str, TableShape] | None = None) -> None:
        """`endpoint`: the engine's (None: AWS's own, or moto's in process); `shapes`: tables' key
        schemas and indexes known already (the others are described on first use)."""
        session = botocore.session.get_session()
        self._client = session.create_client(
            "dynamodb",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # the emulator's dummy credentials
        )
        self._shapes: dict[str, TableShape] = dict(shapes or {})
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
        if not self.active or model.name not in WRITES + READS or model.name in ("Query", "BatchGetItem"):
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
        if model.name == "BatchGetItem":
            self.units.add(self._batch_get(params, parsed))
            return
        targets = self._targets(model.name, params)
        transactional = model.name.startswith("Transact")
        for (table, key, old), (_, _, action, attempted) in zip(
            context.get("bench_old") or [], targets, strict=False
        ):
            if model.name == "GetItem":
                self.units.add(self._read(table, old, bool(params.get("ConsistentRead")), key))
                continue
            new = old if failed else self._get(table, key)
            self.units.add(self._write(table, action, old, new, attempted, failed, transactional, key))

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
        key: Item | None = None,
    ) -> Units:
        shape = self._shape(table)
        size = max(item_size(old), item_size(new), item_size(attempted) if failed else 0, 1)
        base = math.ceil(size / WRITE_UNIT) * (2 if transactional else 1)
        # An item that is not there before or after (a ConditionCheck that it is absent) still
        # takes its capacity on the partition of its key.
        where = new or old or attempted or key or {}
        uses = [PartitionUse(table, None, _partition(shape.keys, where) if where else "?", wcu=base)]
        if not failed:
            uses += [
                PartitionUse(table, index.name, partition, wcu=units)
                for index in shape.indexes
                for partition, units in index_uses(index, shape, old, new)
            ]
        gsi = sum(use.wcu for use in uses[1:])
        outcome = "failed" if failed else "ok"
        return Units(
            wru=base + gsi,
            detail=[f"{table} {action} {outcome} {size}B: {base} WRU + {gsi:g} GSI"],
            uses=uses,
        )

    def _read(self, table: str, item: Item | None, consistent: bool, key: Item | None = None) -> Units:
        units = math.ceil(max(item_size(item), 1) / READ_UNIT) * (1 if consistent else 0.5)
        partition = _partition(self._shape(table).keys, key or item or {"?": {"S": "?"}})
        return Units(
            rru=units,
            detail=[f"{table} GetItem {item_size(item)}B: {units:g} RRU"],
            uses=[PartitionUse(table, None, partition, rcu=units)],
        )

    def _query(self, params: dict[str, Any], parsed: dict[str, Any]) -> Units:
        size = sum(item_size(item) for item in parsed.get("Items") or [])
        consistent = bool(params.get("ConsistentRead")) and not params.get("IndexName")
        units = math.ceil(max(size, 1) / READ_UNIT) * (1 if consistent else 0.5)
        table = str(params.get("TableName"))
        use = PartitionUse(table, params.get("IndexName"), self._queried_partition(params), rcu=units)
        return Units(rru=units, detail=[f"{table} Query {size}B: {units:g} RRU"], uses=[use])

    def _batch_get(self, params: dict[str, Any], parsed: dict[str, Any]) -> Units:
        """Every key asked for is priced, found or not: a key with no item still reads the minimum
        (1 RRU strongly consistent), as a GetItem of it would. Keys left unprocessed are not read."""
        out = Units()
        responses = parsed.get("Responses") or {}
        unprocessed = parsed.get("UnprocessedKeys") or {}
        for table, request in (params.get("RequestItems") or {}).items():
            names = self._shape(table).keys
            found = {_key_of(names, item): item for item in responses.get(table) or []}
            skipped = {_key_of(names, key) for key in (unprocessed.get(table) or {}).get("Keys") or []}
            consistent = bool(request.get("ConsistentRead"))
            for key in request.get("Keys") or []:
                identity = _key_of(names, key)
                if identity not in skipped:
                    out.add(self._read(table, found.get(identity), consistent, key))
        out.detail = [f"BatchGetItem {len(out.uses)} items: {out.rru:g} RRU"]
        return out

    def _queried_partition(self, params: dict[str, Any]) -> str:
        """The partition key value in a Query's key condition (`name = :value`)."""
        shape = self._shape(str(params.get("TableName")))
        index = next((i for i in shape.indexes if i.name == params.get("IndexName")), None)
        hash_key = (index.keys if index else shape.keys)[0]
        names = params.get("ExpressionAttributeNames") or {}
        values = params.get("ExpressionAttributeValues") or {}
        for name, value in re.findall(r"([#\w]+)\s*=\s*(:\w+)", params.get("KeyConditionExpression", "")):
            if names.get(name, name) == hash_key and value in values:
                return str(next(iter(values[value].values())))
        return "?"

    def expired(self, table: str, item: Item) -> Units:
        """An item deleted by TTL: nothing on its table, each index it leaves as a delete."""
        shape = self._shape(table)
        uses = [
            PartitionUse(table, index.name, partition, wcu=units)
            for index in shape.indexes
            for partition, units in index_uses(index, shape, item, None)
        ]
        wcu = sum(use.wcu for use in uses)
        return Units(wru=wcu, detail=[f"{table} TTL delete: 0 WRU + {wcu:g} GSI"], uses=uses)

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


# ---------------------------------------------------------------------------- one workspace, hot partitions
PARTITION_WCU = 1000  # DynamoDB's per-partition limits, a second
PARTITION_RCU = 3000
WORKSPACE = "ws_busy"
API_KEY = "sk_busy"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
TEMPLATE = Path(__file__).resolve().parents[1] / "template.yaml"
# The attribute each table's TTL reads (template.yaml); the idempotency table's is Powertools'.
TTL_ATTRIBUTES = ("expiresAt", "expiration")
EACH_ITS_OWN = "each message its own"


def scaled(units: Units, weight: float) -> Units:
    """`units` taken `weight` times (a call made once per batch of 100 is 0.01 of a message's)."""
    return Units(
        wru=units.wru * weight,
        rru=units.rru * weight,
        detail=[f"x{weight:g} {line}" for line in units.detail],
        uses=[
            PartitionUse(use.table, use.index, use.partition, use.wcu * weight, use.rcu * weight)
            for use in units.uses
        ],
    )


# The API function keeps a key it found good for SENDONCE_API_KEY_CACHE_SECONDS (60) per execution
# environment; at ~50 ms a request, `sends_per_second * 0.05` environments each read it once a
# minute: 0.05 / 60 reads a send, whatever the rate.
API_SECONDS_PER_REQUEST = 0.05
API_KEY_CACHE_SECONDS = 60
CACHED_KEY_READS_PER_SEND = API_SECONDS_PER_REQUEST / API_KEY_CACHE_SECONDS
# Likewise the workspace's limits, kept SENDONCE_LIMITS_CACHE_SECONDS (5, what a change waits out).
LIMITS_CACHE_SECONDS = 5
CACHED_LIMITS_READS_PER_SEND = API_SECONDS_PER_REQUEST / LIMITS_CACHE_SECONDS


def message_life(
    *,
    sends_per_second: int = 10_000,
    endpoints: int = 1,
    keyed: bool = True,
    key_reads_per_send: float = CACHED_KEY_READS_PER_SEND,
    changes_per_endpoints_read: int = 100,
    body: str = "Your code is 123456. It expires in 10 minutes.",
) -> Units:
    """The DynamoDB capacity of one message's life, priced call by call on the real adapters against the
    template's own tables (moto, in process), each call weighted by how often a message makes it: the
    API key's read (`key_reads_per_send`: once a cache period per API execution environment,
    CACHED_KEY_READS_PER_SEND; 1 without the cache); the workspace's limits' read (likewise,
    CACHED_LIMITS_READS_PER_SEND); the rate check's lease (one in `lease_ceiling`
    requests of a busy environment); the Idempotency-Key record (`keyed`); the create transaction with
    its lock, key tie and quota unit; the dispatcher's claim and finish (`sent`); the provider's
    `delivered`; the three status events (`queued`, `sent`, `delivered`), each with its `Applied` read
    and written, the endpoints read once per `changes_per_endpoints_read` changes (once per workspace
    per stream batch) and one delivery to each of `endpoints` endpoints (the event and the endpoint
    read, the attempt recorded); and the expiry of every item (TTL). The workspace's limits allow
    `sends_per_second`, all day; the message is an SMS of `body`."""
    limits = _limits_at(sends_per_second)
    life = Units()
    # Every client here talks to moto's mock, none to an endpoint the environment names (the bench's
    # emulator, stopped by now).
    clean = {name: value for name, value in os.environ.items() if not name.startswith("AWS_ENDPOINT_URL")}
    with patch.dict(os.environ, clean, clear=True), mock_aws():
        # DynamoDB's own address, which moto's mock answers: never an endpoint the environment names
        # (the bench's emulator, stopped by now).
        client = boto3.session.Session().client(
            "dynamodb",
            region_name="us-east-1",
            endpoint_url="https://dynamodb.us-east-1.amazonaws.com",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        create_tables(client, load_template(TEMPLATE))
        probe = CapacityProbe(None)
        probe.hook(client)

        def step(weight: float, run: Callable[[], object]) -> None:
            life.add(scaled(probe.measure(run), weight))

        keys = DynamoDbApiKeyStore(client, "ApiKeysTable")
        keys.save(hash_api_key(API_KEY), WORKSPACE)
        step(key_reads_per_send, lambda: keys.workspace_for(hash_api_key(API_KEY)))
        counters = DynamoDbLimits(client, "LimitsTable", limits)
        step(CACHED_LIMITS_READS_PER_SEND, lambda: counters.timeline(WORKSPACE))
        lease = limits.lease_ceiling
        step(1 / lease, lambda: counters.take_lease(WORKSPACE, Window.at(NOW), 0, lease))
        message = _send(client, counters, limits, keyed, body, step)
        delivery = DynamoDbDispatchStore(client, "MessagesTable", KEYED_HASH)
        claimed: list[ClaimedMessage] = []

        def claim() -> None:
            # From its record's copy, as the dispatcher claims it: one transaction, no read.
            answer = delivery.claim(WORKSPACE, message.id, NOW, 25, seen=message)
            if not isinstance(answer, ClaimedMessage):
                raise RuntimeError(f"the life's message was not claimed: {answer}")
            claimed.append(answer)

        step(1, claim)
        step(1, lambda: delivery.finish_attempt(claimed[0], Status.SENT, NOW, provider_message_id="p-1"))
        provider = DynamoDbProviderEventStore(client, "MessagesTable", KEYED_HASH)
        delivered = ProviderEvent("http", "provider-event-1", message.id, ProviderEventType.DELIVERED, "now")
        step(1, lambda: provider.apply_provider_event(delivered, NOW))
        _tell(client, message, endpoints, changes_per_endpoints_read, step)
        for table in client.list_tables()["TableNames"]:
            for item in client.scan(TableName=table, ConsistentRead=True).get("Items", []):
                if any(name in item for name in TTL_ATTRIBUTES):
                    life.add(probe.expired(table, item))
    return life


Step = Callable[[float, Callable[[], object]], None]
# A deployment's keyed hash stands for its identities: as long as a plain one, so it sizes alike.
KEYED_HASH = KeyedHash(lambda: "the capacity model's hashing key")
# The line `CapacityProbe.expired` writes for an item's expiry.
EXPIRY_LINE = re.compile(r"^(?P<table>\S+) TTL delete: 0 WRU \+ (?P<gsi>[\d.]+) GSI$")


def expiry_of(life: Units) -> Units:
    """What the expiry (TTL) of a `message_life`'s items takes: a write of each index they leave."""
    lines = [line for line in life.detail if EXPIRY_LINE.match(line)]
    wru = sum(float(match["gsi"]) for line in lines if (match := EXPIRY_LINE.match(line)))
    return Units(wru=wru, detail=lines)


def _limits_at(sends_per_second: int) -> Limits:
    """Limits that allow `sends_per_second`, all day."""
    return Limits(sends_per_second, min(MAX_DAILY_QUOTA, sends_per_second * 86_400))


def _send(
    client: Any, counters: DynamoDbLimits, limits: Limits, keyed: bool, body: str, step: Step
) -> Message:
    """The create transaction (under its Idempotency-Key record when `keyed`), as the API makes it."""
    sending = DynamoDbSendingStore(
        client, "MessagesTable", retention=timedelta(days=90), quota=counters, keyed_hash=KEYED_HASH
    )
    message = Message(
        id=new_message_id(int(NOW.timestamp() * 1000)),
        workspace_id=WORKSPACE,
        channel=Channel("sms"),
        to="+15550100000",
        body=body,
        status=Status.QUEUED,
        created_at=NOW,
        updated_at=NOW,
        idempotency_key="order-1" if keyed else None,
        metadata={"order": "1"},
    )
    claim = DedupClaim(
        KEYED_HASH(dedup_identity(WORKSPACE, message.to, None, message.body)), NOW + timedelta(minutes=15)
    )
    tie = KeyTie(KEYED_HASH(tie_identity(WORKSPACE, "order-1", message.to)), "fingerprint") if keyed else None

    def create(request: dict[str, Any] | None = None) -> dict[str, Any]:
        charge = QuotaCharge.of(WORKSPACE, limits, NOW)
        outcome = sending.create(message, claim, tie, handoff_due_at(NOW, None), NOW, quota=charge)
        if not isinstance(outcome, Created):
            raise RuntimeError(f"the life's message was not created: {outcome}")
        return {"status": 201}

    if keyed:
        send_once = make_idempotent(create, "IdempotencyTable", client, idempotency_config(86_400))
        request = {"workspace": WORKSPACE, "key": "order-1", "payload": {"body": message.body}}
        with warnings.catch_warnings():  # no Lambda context here to tell the time left
            warnings.filterwarnings("ignore", message="Couldn't determine the remaining time left")
            step(1, lambda: send_once(request=request))
    else:
        step(1, create)
    return message


def _tell(client: Any, message: Message, endpoints: int, changes_per_endpoints_read: int, step: Step) -> None:
    """The message's three status events, recorded and delivered to each endpoint, as
    MessageChangesFunction and WebhookDeliveryFunction do."""
    webhooks = DynamoDbWebhookStore(client, "WebhooksTable")
    endpoint_ids = []
    for _ in range(endpoints):
        endpoint = Endpoint(
            id=new_endpoint_id(NOW),
            workspace_id=WORKSPACE,
            url="https://hooks.example.com/sendonce",
            event_types=None,
            description=None,
            created_at=NOW,
            secrets=(SigningSecret(new_secret()),),
        )
        webhooks.add_endpoint(endpoint, endpoints)
        endpoint_ids.append(endpoint.id)
    told = [
        (Status.QUEUED, EventType.QUEUED),
        (Status.SENT, EventType.SENT),
        (Status.DELIVERED, EventType.DELIVERED),
    ]
    for sequence, (status, kind) in enumerate(told, start=1):
        change = Change(message.with_status(status, NOW), kind, NOW, f"{sequence:040d}")
        deliveries = tuple(Delivery(endpoint_id) for endpoint_id in endpoint_ids)
        event = Event(
            change.event_id,
            WORKSPACE,
            message.id,
            kind,
            NOW,
            message_shape(change.message),
            sequence,
            deliveries,
        )
        previous = webhooks.applied(message.id)
        step(1, lambda: webhooks.applied(message.id))
        step(1 / changes_per_endpoints_read, lambda: webhooks.endpoints(WORKSPACE))
        step(
            1,
            lambda event=event, change=change, previous=previous: webhooks.record(
                event, change.position, previous
            ),
        )
        for endpoint_id in endpoint_ids:
            attempt = Attempt(NOW, 204, succeeded=True, final=True)
            step(1, lambda event=event: webhooks.event(WORKSPACE, event.id))
            # The endpoint and its slow-lane flag, one BatchGetItem (webhooks.delivery).
            step(1, lambda endpoint_id=endpoint_id: webhooks.endpoint_and_lane(WORKSPACE, endpoint_id))
            step(
                1,
                lambda event=event, endpoint_id=endpoint_id, attempt=attempt: webhooks.record_attempt(
                    WORKSPACE, event.id, endpoint_id, attempt
                ),
            )


@dataclass(frozen=True)
class Family:
    """The partitions one workspace's writes of one kind spread over: `label` names them, `spread`
    is how many there are (None: each message, or key, has its own)."""

    table: str
    index: str | None
    label: str
    spread: int | None


# The partitions of these (table, index) that one workspace's entries spread over: `<...>#<n>`.
SHARDED = {
    ("MessagesTable", "ByWorkspace"): LISTING_SHARDS,
    ("MessagesTable", "ByWorkspaceStatus"): LISTING_SHARDS,
    ("MessagesTable", "Outbox"): OUTBOX_SHARDS,  # shared by every workspace, spread all the same
    ("WebhooksTable", "ByWorkspace"): EVENT_SHARDS,
}


def family_of(use: PartitionUse, rate_shards: int, quota_shards: int) -> Family:
    """Which partitions a use belongs with, by the adapters' key formats: a workspace's shards of
    one kind, a partition of its own (an API key), or one of each message's (or key's) own."""
    table, index, partition = use.table, use.index, use.partition
    if (table, index) in SHARDED:  # <workspace>[#<status>]#<n>, or the outbox's <n>
        label = partition.rsplit("#", 1)[0] + "#<n>" if "#" in partition else "<n>"
        return Family(table, index, label, SHARDED[(table, index)])
    kind, _, rest = partition.partition("#")
    if table == "LimitsTable" and kind in ("RATE", "QUOTA"):  # <kind>#<workspace>#<window or day>#<n>
        when = "<window>" if kind == "RATE" else "<day>"
        spread = rate_shards if kind == "RATE" else quota_shards
        return Family(table, index, f"{kind}#{rest.rsplit('#', 2)[0]}#{when}#<n>", spread)
    if table == "WebhooksTable" and kind in ("WHEP", "WHEPLANE"):  # WHEP[LANE]#<workspace>#<copy>
        return Family(table, index, partition.rsplit("#", 1)[0] + "#<copy>", ENDPOINT_COPIES)
    if table == "ApiKeysTable":
        return Family(table, index, "<the workspace's API key>", 1)
    if table == "MessagesTable" and kind == "SUPPRESSION":  # a hash of (workspace or none, recipient)
        return Family(table, index, "SUPPRESSION#<recipient>", None)
    if table == "IdempotencyTable":
        return Family(table, index, "<key>", None)
    if index in ("ByMessage", "ProviderEventsByMessage"):
        return Family(table, index, "<message id>", None)
    if table == "WebhooksTable" and kind == "PROMISE":  # PROMISE#<workspace>#<n>
        return Family(table, index, partition.rsplit("#", 1)[0] + "#<n>", PROMISE_SHARDS)
    if table in ("MessagesTable", "WebhooksTable") and kind in ("MSG", "DEDUP", "KEYTIE", "EVENT", "EVT"):
        return Family(table, index, f"{kind}#<id>", None)
    return Family(table, index, partition, 1)  # anything else: one partition, to be safe


def busiest_partitions(
    life: Units,
    sends_per_second: int = 10_000,
    rate_shards: int | None = None,
    quota_shards: int | None = None,
) -> dict[str, Any]:
    """Per table and index, what its busiest partition takes a second when one workspace sends
    `sends_per_second` messages, each living `life` (`message_life`), against 1,000 WCU and 3,000 RCU.

    A kind of partition the workspace's messages spread over evenly (`spread` of them: listing and
    outbox shards, rate and quota shards) takes `sends_per_second * per message / spread`. A partition
    of one message or key alone takes at most what that message's life puts on it, counted as if
    within one second. The rate and quota shard counts default to those of limits allowing
    `sends_per_second` and a day of it."""
    limits = _limits_at(sends_per_second)
    rate = limits.rate_shards if rate_shards is None else rate_shards
    quota = QuotaPlan(limits.daily_quota, 0).shards if quota_shards is None else quota_shards
    per_family: dict[Family, dict[str, list[float]]] = {}
    for use in life.uses:
        family = family_of(use, rate, quota)
        totals = per_family.setdefault(family, {}).setdefault(use.partition, [0.0, 0.0])
        totals[0] += use.wcu
        totals[1] += use.rcu
    rows = []
    for family, partitions in sorted(
        per_family.items(), key=lambda kv: (kv[0].table, kv[0].index or "", kv[0].label)
    ):
        if family.spread is None:
            wcu_each, rcu_each = (
                max(p[0] for p in partitions.values()),
                max(p[1] for p in partitions.values()),
            )
            wcu, rcu = wcu_each, rcu_each
        else:
            wcu_each = sum(p[0] for p in partitions.values())
            rcu_each = sum(p[1] for p in partitions.values())
            wcu = sends_per_second * wcu_each / family.spread
            rcu = sends_per_second * rcu_each / family.spread
        rows.append(
            {
                "table": family.table,
                "index": family.index,
                "partition": family.label,
                "spread": EACH_ITS_OWN if family.spread is None else family.spread,
                "wcu_per_message": round(wcu_each, 3),
                "rcu_per_message": round(rcu_each, 3),
                "wcu_per_second": round(wcu, 1),
                "rcu_per_second": round(rcu, 1),
                "under": wcu <= PARTITION_WCU and rcu <= PARTITION_RCU,
            }
        )
    over = [
        f"{row['table']}{'/' + row['index'] if row['index'] else ''} {row['partition']}"
        for row in rows
        if not row["under"]
    ]
    return {
        "sends_per_second": sends_per_second,
        "partition_limits": {"wcu": PARTITION_WCU, "rcu": PARTITION_RCU},
        "partitions": rows,
        "over": over,
        "all_under": not over,
    }


def one_workspace(sends_per_second: int = 10_000, **life: Any) -> dict[str, Any]:
    """`busiest_partitions` of one workspace at `sends_per_second`, its messages living as
    `message_life(**life)` says, with the options of that life: what `make bench` records."""
    figures = busiest_partitions(message_life(sends_per_second=sends_per_second, **life), sends_per_second)
    defaults = {
        "endpoints": 1,
        "keyed": True,
        "key_reads_per_send": CACHED_KEY_READS_PER_SEND,
        "changes_per_endpoints_read": 100,
    }
    return {"life": {**defaults, **{k: v for k, v in life.items() if k != "body"}}, **figures}
