"""The suppression list on DynamoDB, in the messages table, with no expiry (it outlives messages).

Items (sk `SUPPRESSION`), each keyed by a hash of (workspace, recipient hash), so that one busy
workspace's checks spread over as many partitions as it has recipients. The recipient hash is keyed
(`recipient_hash`, an HMAC under the deployment's hashing key): no key, sort key or cursor holds the
address or a hash anyone could recompute from it, so an erased recipient's entry keeps refusing them
while only its displayed `to` is erased.
- a workspace's entry: `to`, `reason`, `createdAt`, `messageId`;
- the shared entry (workspace `None`): an opt-out that names no message, a STOP to the shared
  sending number, in force for every workspace; a new STOP moves its `createdAt` on;
- a workspace's removal of the shared entry: `clearedAt`, and no `reason`. The shared entry is in
  force for that workspace again only once it is newer than the removal (a new STOP).

A new send and a dispatcher's claim check a recipient inside their own transaction: a ConditionCheck
that each of its two items holds no entry in force (`SuppressionGuard`), so the check and the write
are one call and nothing slips between them. A ConditionCheck takes part in transaction conflicts:
concurrent writes to one recipient (of any workspace, through the shared item) are serialised on
these items, each conflict tried again (`with_retries`). A batch reads its recipients' items in one
strongly consistent BatchGetItem (up to 50 recipients a call) before its transactions: the claim's
check still stops whatever it let through.
Entries (not removals) are in the ByWorkspace index under `<workspace>#suppressions` (the shared
ones under `#suppressions`, a name no workspace's partition can take: a messages' partition ends in
a shard number), sorted by `id` = `<createdAt>#<key>`, so a listing merges the two newest first.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from datetime import datetime
from itertools import islice
from typing import Any

from msgspec import Struct

from sendonce.adapters.dynamodb_items import cursor_text, opaque_cursor, parse_datetime
from sendonce.adapters.dynamodb_writes import (
    Cancellation,
    ConditionFailed,
    DynamoDbTable,
    Item,
    TryAgain,
    with_retries,
)
from sendonce.clock import rfc3339
from sendonce.errors import InvalidCursor
from sendonce.keyed_hash import KeyedHash
from sendonce.suppressions.model import Reason, Suppression, shares_opt_outs
from sendonce.suppressions.ports import SuppressionPage

SUPPRESSION_SK = "SUPPRESSION"
LISTING_SUFFIX = "#suppressions"


def recipient_hash(keyed: KeyedHash, key: str) -> str:
    """What the list holds of a recipient key (`recipient_key`): its keyed hash, the same in every
    workspace, so a workspace's entry and the shared one name a recipient alike."""
    return keyed(f"suppression\x00{key}")


def suppression_key(workspace_id: str | None, hashed: str) -> Item:
    """A workspace's item for a recipient (`recipient_hash`); `None`: the shared entry every
    workspace is subject to."""
    digest = hashlib.sha256(json.dumps(["v2", workspace_id, hashed]).encode("utf-8")).hexdigest()
    return {"pk": {"S": f"SUPPRESSION#{digest}"}, "sk": {"S": SUPPRESSION_SK}}


def listing_partition(workspace_id: str | None) -> str:
    return f"{workspace_id or ''}{LISTING_SUFFIX}"


def entry_update(workspace_id: str | None, entry: Suppression, keyed: KeyedHash) -> dict[str, Any]:
    """The Update (for `update_item` or a transaction) that puts `entry` on the list. A workspace's
    existing entry is kept as it is (its reason, time and message: the first cause stands), and a
    removal is replaced. The shared entry is renewed instead: a new STOP after a workspace removed
    it is in force for that workspace again."""
    key = recipient_hash(keyed, entry.key)
    created = rfc3339(entry.created_at)
    keep = workspace_id is not None

    def first(name: str, value: str) -> str:
        return f"{name} = if_not_exists({name}, {value})" if keep else f"{name} = {value}"

    sets = [
        first("#to", ":to"),
        first("reason", ":reason"),
        first("createdAt", ":created"),
        first("messageId", ":message"),
        first("#id", ":id"),
        "recipientKey = :key",
        "workspaceId = :workspace",
        "workspaceShard = :partition",
    ]
    return {
        "Key": suppression_key(workspace_id, key),
        "UpdateExpression": "SET " + ", ".join(sets) + " REMOVE clearedAt",
        "ExpressionAttributeNames": {"#to": "to", "#id": "id"},
        "ExpressionAttributeValues": {
            ":to": {"S": entry.to},
            ":reason": {"S": entry.reason.value},
            ":created": {"S": created},
            ":message": {"S": entry.message_id} if entry.message_id else {"NULL": True},
            ":id": {"S": f"{created}#{key}"},
            ":key": {"S": key},
            ":workspace": {"S": workspace_id if workspace_id is not None else "*"},
            ":partition": {"S": listing_partition(workspace_id)},
        },
    }


def _entry(item: Item) -> Suppression:
    message = item.get("messageId", {}).get("S")
    return Suppression(
        to=item["to"]["S"],
        reason=Reason(item["reason"]["S"]),
        created_at=parse_datetime(item["createdAt"]["S"]),
        message_id=message,
    )


def _is_entry(item: Item | None) -> bool:
    return item is not None and "reason" in item


def in_force(own: Item | None, shared: Item | None) -> Item | None:
    """The item that suppresses the recipient for a workspace: its own entry, else the shared one
    unless the workspace removed it since it was last renewed."""
    if own is not None and _is_entry(own):
        return own
    if shared is None or not _is_entry(shared):
        return None
    cleared = own.get("clearedAt", {}).get("S") if own is not None else None
    return shared if cleared is None or cleared < shared["createdAt"]["S"] else None


class SuppressionGuard(Struct):
    """The ConditionChecks, for a transaction, that a message's recipients (their keys, in the
    message's order) are on no list its workspace is subject to: no entry on the workspace's own item,
    and none on the shared item (live workspaces only), or one no newer than the workspace's removal
    of it. A refusal that turns out to be a shared entry the workspace removed teaches the guard that
    removal (`cleared`): the transaction is tried again.

    At most `room` checks go in the transaction (what its other items leave of DynamoDB's 100). When a
    message's checks do not all fit (a live workspace's email to more than `room // 2` recipients),
    `read_first` reads every recipient's two items in one strongly consistent BatchGetItem before the
    transaction: an entry in force then drops its recipient at once, and the transaction checks every
    recipient's own item and as many shared items as fit (those that exist first, then in order). A
    suppression in place before the read is always seen; only a shared opt-out committed between the
    read and the write, for a recipient whose shared item is not checked, is left to the claim's
    check."""

    table: DynamoDbTable
    workspace_id: str
    keys: tuple[str, ...]
    room: int
    keyed: KeyedHash
    cleared: dict[str, str] = {}  # the workspace's removals of shared entries, once met, by key
    shared_seen: frozenset[str] = frozenset()  # keys whose shared item the read found
    was_read: bool = False
    _checked: tuple[tuple[str, bool], ...] = ()  # what each check of `items()` is: (key, shared)

    def _wanted(self) -> list[tuple[str, bool]]:
        """Every check the recipients need, the own items first; shared ones that exist before others."""
        own = [(key, False) for key in self.keys]
        if not shares_opt_outs(self.workspace_id):
            return own
        shared = sorted(self.keys, key=lambda key: key not in self.shared_seen)  # stable: in order
        return own + [(key, True) for key in shared]

    @property
    def fits(self) -> bool:
        return len(self._wanted()) <= self.room

    def read_first(self) -> dict[str, Suppression]:
        """Every recipient's items, read at once (only when the checks do not all fit): the entries in
        force, by key (their recipients are to be dropped), and what the read taught the checks."""
        wanted = {key: (self._own(key), self._shared(key)) for key in self.keys}
        shared = shares_opt_outs(self.workspace_id)
        found = self.table.batch_get(
            [item_key for own, other in wanted.values() for item_key in ((own, other) if shared else (own,))]
        )
        in_force_now: dict[str, Suppression] = {}
        cleared = dict(self.cleared)
        seen = set(self.shared_seen)
        for key, (own_key, shared_key) in wanted.items():
            own, other = found.get(own_key["pk"]["S"]), found.get(shared_key["pk"]["S"]) if shared else None
            item = in_force(own, other)
            if item is not None:
                in_force_now[key] = _entry(item)
            if own is not None and "clearedAt" in own:
                cleared[key] = own["clearedAt"]["S"]
            if other is not None:
                seen.add(key)
        self.cleared, self.shared_seen, self.was_read = cleared, frozenset(seen), True
        return in_force_now

    def drop(self, keys: Collection[str]) -> None:
        self.keys = tuple(key for key in self.keys if key not in keys)

    def items(self) -> list[dict[str, Any]]:
        self._checked = tuple(self._wanted()[: self.room])
        return [
            _absent(self._shared(key), self.cleared.get(key)) if shared else _absent(self._own(key))
            for key, shared in self._checked
        ]

    @property
    def stamp(self) -> str:
        """What tells one version of the checks from another (a transaction's token changes with it)."""
        if len(self.keys) <= 1 and not self.was_read:
            return "".join(self.cleared.values())  # one recipient: the stamp it always had
        state = [self.keys, sorted(self.cleared.items()), sorted(self.shared_seen)]
        return hashlib.sha256(json.dumps(state).encode()).hexdigest()[:16]

    def refusals(self, canceled: Cancellation, first: int) -> dict[str, Suppression]:
        """The entries that refused the transaction whose checks are its items from `first` on, by key;
        empty when no check failed. TryAgain when none refused but an item changed since, or a shared
        entry turns out to be one the workspace removed (the checks now allow for the removal)."""
        refused: dict[str, Suppression] = {}
        again = False
        for position, (key, shared) in enumerate(self._checked):
            if not canceled.failed(first + position) or key in refused:
                continue
            own_key = self._own(key)
            if not shared:
                own = canceled.item(first + position) or self.table.get(own_key)
                if own is None or not _is_entry(own):
                    again = True  # removed since
                else:
                    refused[key] = _entry(own)
                continue
            other = canceled.item(first + position) or self.table.get(self._shared(key))
            if other is None or not _is_entry(other):
                again = True
                continue
            own = self.table.get(own_key)  # the removal the check could not see: one read, only here
            in_force_now = in_force(own, other)
            if in_force_now is not None:
                refused[key] = _entry(in_force_now)
            else:
                if own is not None and "clearedAt" in own:
                    self.cleared = {**self.cleared, key: own["clearedAt"]["S"]}
                again = True
        if not refused and again:
            raise TryAgain
        return refused

    def _own(self, key: str) -> Item:
        return suppression_key(self.workspace_id, recipient_hash(self.keyed, key))

    def _shared(self, key: str) -> Item:
        return suppression_key(None, recipient_hash(self.keyed, key))


def _absent(key: Item, cleared: str | None = None) -> dict[str, Any]:
    """A ConditionCheck that the item holds no entry (a removal is no entry), or none newer than
    `cleared`: `in_force`'s rule, as a condition."""
    check: dict[str, Any] = {
        "Key": key,
        "ConditionExpression": "attribute_not_exists(reason)",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    if cleared is not None:
        check["ConditionExpression"] = "attribute_not_exists(reason) OR createdAt <= :cleared"
        check["ExpressionAttributeValues"] = {":cleared": {"S": cleared}}
    return {"ConditionCheck": check}


def encode_cursor(listing_id: str) -> str:
    return opaque_cursor(listing_id)


def decode_cursor(cursor: str) -> str:
    text = cursor_text(cursor)
    created, separator, key = text.partition("#")
    if not separator or not key:
        raise InvalidCursor(cursor)
    try:
        parse_datetime(created)
    except ValueError:
        raise InvalidCursor(cursor) from None
    return text


class DynamoDbSuppressionStore:
    def __init__(self, client: Any, table_name: str, keyed: KeyedHash) -> None:
        self._table = DynamoDbTable(client, table_name)
        self._keyed = keyed

    def _read(self, workspace_id: str, keys: Collection[str]) -> dict[str, tuple[Item | None, Item | None]]:
        """Each key's (own item, shared item), in one BatchGetItem (strongly consistent) up to 50 keys."""
        shared = shares_opt_outs(workspace_id)
        hashed = {key: recipient_hash(self._keyed, key) for key in keys}
        wanted = {
            key: (
                suppression_key(workspace_id, hashed[key]),
                suppression_key(None, hashed[key]) if shared else None,
            )
            for key in keys
        }
        found = self._table.batch_get([item_key for pair in wanted.values() for item_key in pair if item_key])
        return {
            key: (found.get(own["pk"]["S"]), found.get(other["pk"]["S"]) if other else None)
            for key, (own, other) in wanted.items()
        }

    def find_many(self, workspace_id: str, keys: Collection[str]) -> dict[str, Suppression]:
        if not keys:
            return {}
        entries = {}
        for key, (own, shared) in self._read(workspace_id, set(keys)).items():
            item = in_force(own, shared)
            if item is not None:
                entries[key] = _entry(item)
        return entries

    def add(self, workspace_id: str, suppression: Suppression) -> tuple[Suppression, bool]:
        existing = self.find_many(workspace_id, [suppression.key]).get(suppression.key)
        if existing is not None:
            return existing, False
        answer = self._table.write(
            "update_item", **entry_update(workspace_id, suppression, self._keyed), ReturnValues="ALL_OLD"
        )
        old = answer.get("Attributes") if isinstance(answer, dict) else None
        if old is not None and _is_entry(old):
            return _entry(old), False  # another source put it there meanwhile: the first stands
        return suppression, True

    def remove(self, workspace_id: str, key: str, now: datetime) -> bool:
        def attempt() -> bool:
            own, shared = self._read(workspace_id, [key])[key]
            if in_force(own, shared) is None:
                return False
            # Only the item as read: an entry a bounce put there meanwhile is not taken off unseen.
            if own is None:
                condition, values = "attribute_not_exists(pk)", {}
            elif _is_entry(own):
                condition, values = "createdAt = :seen", {":seen": own["createdAt"]}
            else:
                condition, values = "clearedAt = :seen", {":seen": own["clearedAt"]}
            hashed = recipient_hash(self._keyed, key)
            target = suppression_key(workspace_id, hashed)
            if shared is not None and _is_entry(shared):
                # The shared opt-out stays in force for every other workspace: this one removes it for itself.
                written = self._table.write(
                    "put_item",
                    Item={
                        **target,
                        "recipientKey": {"S": hashed},
                        "workspaceId": {"S": workspace_id},
                        "clearedAt": {"S": rfc3339(now)},
                    },
                    ConditionExpression=condition,
                    **({"ExpressionAttributeValues": values} if values else {}),
                )
            else:
                written = self._table.write(
                    "delete_item",
                    Key=target,
                    ConditionExpression=condition,
                    **({"ExpressionAttributeValues": values} if values else {}),
                )
            if isinstance(written, ConditionFailed):
                raise TryAgain
            return True

        return with_retries(attempt, "the suppression kept changing while it was removed")

    def list(self, workspace_id: str, limit: int, cursor: str | None) -> SuppressionPage:
        below = decode_cursor(cursor) if cursor is not None else None
        shared_partition = listing_partition(None)
        partitions = [listing_partition(workspace_id)]
        if shares_opt_outs(workspace_id):
            partitions.append(shared_partition)
        # Loaded with the first listing: a send's check never needs the merge.
        from sendonce.adapters.dynamodb_listing import newest_first, query_shard  # noqa: PLC0415

        entries = newest_first(
            partitions,
            query_shard(self._table, "ByWorkspace", "workspaceShard", below=below),
            first=limit + 1,
        )
        kept: list[Item] = []
        while len(kept) <= limit:
            batch = list(islice(entries, limit + 1 - len(kept)))
            if not batch:
                break
            keys = {entry["pk"]["S"]: {"pk": entry["pk"], "sk": entry["sk"]} for entry in batch}
            for entry in batch:
                if entry["workspaceShard"]["S"] == shared_partition:
                    own_key = suppression_key(workspace_id, _listed_key(entry))
                    keys[own_key["pk"]["S"]] = own_key  # BatchGetItem refuses a key asked twice
            found = self._table.batch_get(list(keys.values()))
            for entry in batch:
                item = found.get(entry["pk"]["S"])
                if item is None or not _is_entry(item):
                    continue  # removed since the index was read
                if entry["workspaceShard"]["S"] == shared_partition:
                    own = found.get(suppression_key(workspace_id, _listed_key(entry))["pk"]["S"])
                    # Listed under its own entry when it has one; left out once this workspace removed it.
                    if _is_entry(own) or in_force(own, item) is None:
                        continue
                kept.append(item)
        page = kept[:limit]
        more = len(kept) > limit
        return SuppressionPage(
            suppressions=[_entry(item) for item in page],
            next_cursor=encode_cursor(page[-1]["id"]["S"]) if more and page else None,
        )


def _listed_key(entry: Item) -> str:
    """The recipient hash an index entry stands for: its `id` is `<createdAt>#<recipient hash>`."""
    return str(entry["id"]["S"]).partition("#")[2]
