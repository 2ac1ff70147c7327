"""Erasing a recipient's copies from DynamoDB: every item that holds a message of theirs, or names them.

What is erased, found from each message (never by scanning a table):
- the message (MessagesTable `MSG#<id>`, `MESSAGE`);
- its status webhook events (WebhooksTable `EVT#<id>`, through the ByMessage index): each holds the
  message as it stood (`message`, JSON); their deliveries copy no payload;
- its provider events (MessagesTable `EVENT#…`, through ProviderEventsByMessage);
- its stored answer under an Idempotency-Key (IdempotencyTable, Powertools' record: its id is the
  key prefix and the hash of (workspace, key), the message's `idempotencyKey`); the answer's body is
  JSON, whole or compressed (`bodyZ`);
- its test delivery (MessagesTable `SIMULATOR#<workspace>`, `DELIVERY#<message id>`).
And once per erasure: the shown `to` of the workspace's suppression entry, and the line errors of
the workspace's campaigns (`CMPERR#…`) that name the address.

An item is erased in place with one UpdateItem of the attributes that change, conditional on the item
still existing: never a key attribute (so no index entry moves), never a lock, a tie or a suppression
key. A field that names a recipient or holds content is erased whole (`erasures.model.ERASED_FIELDS`),
any other text only if it holds the address. An erased item erased again changes nothing, and is
not written.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import Iterable
from typing import Any

from sendonce.adapters.dynamodb_activity import PROVIDER_EVENTS_INDEX
from sendonce.adapters.dynamodb_items import MESSAGE_SK, from_item, message_key
from sendonce.adapters.dynamodb_suppressions import recipient_hash, suppression_key
from sendonce.adapters.dynamodb_writes import ConditionFailed, DynamoDbTable, Item
from sendonce.erasures.model import ERASED, ERASED_FIELDS, ErasureCounts, Redaction
from sendonce.erasures.ports import MessageTraces
from sendonce.keyed_hash import KeyedHash
from sendonce.messages.ids import looks_like_message_id
from sendonce.modes import is_test_workspace

# Keys of the table and its indexes, ids and hashes: never rewritten (an index entry would move, or
# the item would be lost to whatever finds it), and none of them holds an address.
KEPT_ATTRIBUTES = frozenset(
    {
        "pk",
        "sk",
        "id",
        "workspaceId",
        "workspaceShard",
        "workspaceStatus",
        "outboxShard",
        "outboxDueAt",
        "campaignShard",
        "campaignId",
        "eventOf",
        "recordedAt",
        "messageId",
        "status",
        "type",
        "channel",
        "dedupLockId",
        "templateLockId",
        "campaignLockId",
        "expiresAt",
        "expiration",
        "validation",
    }
)
# Attributes that hold a JSON document: erased inside it, field by field, and written back as JSON.
_JSON_ATTRIBUTES = frozenset({"message", "details"})
# Powertools' record of an Idempotency-Key: its answer (`data`), as JSON.
_ANSWER_ATTRIBUTE = "data"


# One attribute's value, as DynamoDB writes it (`{"S": ...}`, `{"L": [...]}`, `{"M": {...}}`, ...).
Value = dict[str, Any]


def _erased_value(value: Value, redaction: Redaction, whole: bool) -> Value:
    """A DynamoDB attribute value with the address taken out of each text in it, every text erased
    when `whole` (a field of ERASED_FIELDS at any depth is erased whole)."""
    if "S" in value:
        return {"S": ERASED if whole else redaction.text(value["S"])}
    if "L" in value:
        return {"L": [_erased_value(element, redaction, whole) for element in value["L"]]}
    if "M" in value:
        return {
            "M": {
                name: _erased_value(element, redaction, whole or name in ERASED_FIELDS)
                for name, element in value["M"].items()
            }
        }
    if "SS" in value:
        return {"SS": sorted({ERASED if whole else redaction.text(text) for text in value["SS"]})}
    return value


def _dumped(document: Any) -> str:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def _erased_json(text: str, redaction: Redaction) -> str:
    """A JSON text erased inside, field by field; the very text when nothing in it changes."""
    try:
        document = json.loads(text)
    except ValueError:
        return redaction.text(text)
    erased = redaction.value(document)
    return text if erased == document else _dumped(erased)


def _erased_answer(text: str, redaction: Redaction) -> str:
    """A stored answer (`{"statusCode", "headers", "body"|"bodyZ"}`): its body is JSON, whole or
    compressed; erased inside, so a replay still answers JSON. The very text when nothing changes."""
    try:
        answer = json.loads(text)
    except ValueError:
        return redaction.text(text)
    if not isinstance(answer, dict):
        return _erased_json(text, redaction)
    erased: dict[str, Any] = {}
    for name, value in answer.items():
        if name == "body" and isinstance(value, str):
            erased[name] = _erased_json(value, redaction)
        elif name == "bodyZ" and isinstance(value, str):
            body = zlib.decompress(base64.b64decode(value)).decode("utf-8")
            erased_body = _erased_json(body, redaction)
            packed = zlib.compress(erased_body.encode("utf-8"), 6)
            erased[name] = value if erased_body == body else base64.b64encode(packed).decode("ascii")
        else:
            erased[name] = redaction.value(value)
    return text if erased == answer else _dumped(erased)


def erased_attributes(item: Item, redaction: Redaction) -> Item:
    """The attributes of `item` that erasing changes, with their erased values."""
    changed: Item = {}
    for name, value in item.items():
        if name in KEPT_ATTRIBUTES:
            continue
        erased: Value
        if name in _JSON_ATTRIBUTES and "S" in value:
            erased = {"S": _erased_json(value["S"], redaction)}
        elif name == _ANSWER_ATTRIBUTE and "S" in value:
            erased = {"S": _erased_answer(value["S"], redaction)}
        else:
            erased = _erased_value(value, redaction, name in ERASED_FIELDS)
        if erased != value:
            changed[name] = erased
    return changed


def idempotency_record_id(key_prefix: str, workspace_id: str, key: str) -> str:
    """The id Powertools gives the record of (workspace, key): `sendonce.api.idempotency`'s event key
    `[workspace, key]`, hashed as Powertools hashes it (sha256 of its JSON, keys sorted)."""
    digest = hashlib.sha256(json.dumps([workspace_id, key], sort_keys=True).encode()).hexdigest()
    return f"{key_prefix}#{digest}"


class DynamoDbTraceEraser:
    def __init__(
        self,
        client: Any,
        *,
        messages_table: str,
        webhooks_table: str,
        idempotency_table: str,
        idempotency_key_prefix: str,
        batch_key_prefix: str,
        keyed_hash: KeyedHash,
    ) -> None:
        """`keyed_hash`: the deployment's, which names a recipient's suppression entry."""
        self._messages = DynamoDbTable(client, messages_table)
        self._webhooks = DynamoDbTable(client, webhooks_table)
        self._idempotency = DynamoDbTable(client, idempotency_table)
        self._key_prefix = idempotency_key_prefix
        self._batch_key_prefix = batch_key_prefix
        self._keyed_hash = keyed_hash

    # -- the port
    def erase_message(self, workspace_id: str, message_id: str, redaction: Redaction) -> MessageTraces:
        if not looks_like_message_id(message_id):
            return MessageTraces(None, ErasureCounts(), frozenset())
        item = self._messages.get(message_key(message_id))
        if item is None or item["workspaceId"]["S"] != workspace_id or item["sk"]["S"] != MESSAGE_SK:
            return MessageTraces(None, ErasureCounts(), frozenset())
        # Read before the message is erased: a key may hold the address, and is erased with it.
        key = item.get("idempotencyKey", {}).get("S")
        # And the keys of the duplicates caught against it: their stored answers show this message.
        keys = [
            (self._key_prefix, each)
            for each in [*([key] if key else []), *sorted(item.get("answeredUnder", {}).get("SS", []))]
        ]
        # And the batches it was sent or caught in under their own key: their answers show it too.
        keys += [(self._batch_key_prefix, each) for each in sorted(item.get("batchKeys", {}).get("SS", []))]
        erased_item = self._erase(self._messages, item, redaction)
        events, told = self._erase_events(workspace_id, message_id, redaction)
        counts = ErasureCounts(
            messages=int(erased_item is not item),
            events=events,
            provider_events=self._erase_provider_events(message_id, redaction),
            stored_answers=sum(
                self._erase_stored_answer(workspace_id, prefix, each, redaction) for prefix, each in keys
            ),
            test_deliveries=self._erase_test_delivery(workspace_id, message_id, redaction),
        )
        return MessageTraces(from_item(erased_item), counts, told)

    def erase_suppression(self, workspace_id: str, key: str) -> int:
        written = self._messages.write(
            "update_item",
            Key=suppression_key(workspace_id, recipient_hash(self._keyed_hash, key)),
            UpdateExpression="SET #to = :erased",
            # An entry in force, not yet erased: a removal or an erased entry is left as it is.
            ConditionExpression="attribute_exists(reason) AND #to <> :erased",
            ExpressionAttributeNames={"#to": "to"},
            ExpressionAttributeValues={":erased": {"S": ERASED}},
        )
        return 0 if isinstance(written, ConditionFailed) else 1

    def erase_campaign_errors(self, workspace_id: str, redaction: Redaction) -> int:
        erased = 0
        campaigns = self._query_all(
            self._messages,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :cmp)",
            ExpressionAttributeValues={":pk": {"S": f"CAMPAIGNS#{workspace_id}"}, ":cmp": {"S": "CMP#"}},
            ProjectionExpression="id",
        )
        for campaign in campaigns:
            errors = self._query_all(
                self._messages,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": f"CMPERR#{workspace_id}#{campaign['id']['S']}"}},
            )
            erased += sum(self._erase(self._messages, item, redaction) is not item for item in errors)
        return erased

    # -- each kind of copy
    def _erase_events(
        self, workspace_id: str, message_id: str, redaction: Redaction
    ) -> tuple[int, frozenset[str]]:
        events = [
            item
            for item in self._query_all(
                self._webhooks,
                IndexName="ByMessage",
                KeyConditionExpression="messageId = :message",
                ExpressionAttributeValues={":message": {"S": message_id}},
            )
            if item.get("workspaceId", {}).get("S") == workspace_id
        ]
        erased = sum(self._erase(self._webhooks, item, redaction) is not item for item in events)
        return erased, frozenset(item["type"]["S"] for item in events if "type" in item)

    def _erase_provider_events(self, message_id: str, redaction: Redaction) -> int:
        keys = [
            {"pk": entry["pk"], "sk": entry["sk"]}
            for entry in self._query_all(
                self._messages,
                IndexName=PROVIDER_EVENTS_INDEX,
                KeyConditionExpression="eventOf = :message",
                ExpressionAttributeValues={":message": {"S": message_id}},
            )
        ]
        found = self._messages.batch_get(keys).values() if keys else []
        return sum(self._erase(self._messages, item, redaction) is not item for item in found)

    def _erase_stored_answer(self, workspace_id: str, prefix: str, key: str, redaction: Redaction) -> int:
        record = self._idempotency.get({"id": {"S": idempotency_record_id(prefix, workspace_id, key)}})
        if record is None:
            return 0
        return int(self._erase(self._idempotency, record, redaction, key_names=("id",)) is not record)

    def _erase_test_delivery(self, workspace_id: str, message_id: str, redaction: Redaction) -> int:
        if not is_test_workspace(workspace_id):
            return 0
        item = self._messages.get(
            {"pk": {"S": f"SIMULATOR#{workspace_id}"}, "sk": {"S": f"DELIVERY#{message_id}"}}
        )
        if item is None:
            return 0
        return int(self._erase(self._messages, item, redaction) is not item)

    # -- the one write
    def _erase(
        self, table: DynamoDbTable, item: Item, redaction: Redaction, key_names: Iterable[str] = ("pk", "sk")
    ) -> Item:
        """The item erased (the same object when nothing in it changes, and then nothing is written)."""
        changed = erased_attributes(item, redaction)
        if not changed:
            return item
        names = {f"#a{index}": name for index, name in enumerate(changed)}
        values = {f":a{index}": value for index, value in enumerate(changed.values())}
        key = {name: item[name] for name in key_names}
        table.write(
            "update_item",
            Key=key,
            UpdateExpression="SET " + ", ".join(f"#a{index} = :a{index}" for index in range(len(changed))),
            ConditionExpression=f"attribute_exists({next(iter(key))})",  # gone meanwhile: nothing to erase
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
        return {**item, **changed}

    @staticmethod
    def _query_all(table: DynamoDbTable, **request: Any) -> list[Item]:
        items: list[Item] = []
        while True:
            answer = table.query(**request)
            items.extend(answer.get("Items", []))
            if "LastEvaluatedKey" not in answer:
                return items
            request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
