"""Webhook endpoints and events on DynamoDB (the WebhooksTable), every read and write scoped by workspace.

A workspace's endpoints are kept whole in each of ENDPOINT_COPIES partitions of its own
(`WHEP#<workspace>#<copy>`), every copy written and deleted in one transaction, so a consistent read
of any copy sees every change, and the reads of a busy workspace's deliveries spread over them.
Every copy carries the endpoint's `version`; a replacement is conditional on every copy holding the
version it was made from and writes the next one, so of two made from one version exactly one is
written, and the other is answered with the endpoint as the first left it. Another workspace's
endpoint id is simply not found. Events are keyed by their own id
(`EVT#<event id>`), so however many events one workspace makes, no partition is hot; each names its
workspace, checked on every read and write, and the `ByWorkspace` index lists them: a workspace's
events spread over EVENT_SHARDS partitions of it (`<workspace>#<n>`), merged newest first when
listed (`dynamodb_listing`). An event and its message's `Applied` (`MSG#<id>`, `APPLIED`) are
written in one transaction, conditional on `Applied` as it was read, so a change is told once. The
endpoint count (`WS#<workspace>`) is moved in the same transaction as each add or delete, so
concurrent adds never pass the limit. A transaction canceled by another one on the same item is
tried again, and then meets that one's write as a failed condition: of the copies of one change
recorded at once, exactly one is told it wrote the event.

An endpoint in the slow lane (`webhooks.delivery`) has a flag, kept like the endpoint in
ENDPOINT_COPIES partitions of its workspace's (`WHEPLANE#<workspace>#<copy>`, `WHEPLANE#<endpoint
id>`), each copy read with the endpoint's copy of the same number in one BatchGetItem: a delivery
makes no more round trips for it, and a busy endpoint's reads of it spread as the endpoint's do.
The copies are written one by one (BatchWriteItem), not in a transaction: a copy left behind only
costs a delivery the fast lane's patience, and the flag carries its own end (`until`; TTL
`expiresAt` removes it later), so one that was never cleared runs out.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from msgspec.structs import replace

from sendonce.activity.counts import PromiseCount
from sendonce.adapters.dynamodb_activity import promise_update
from sendonce.adapters.dynamodb_items import epoch_seconds, parse_datetime, shard_of, workspace_shard
from sendonce.adapters.dynamodb_listing import fetch_page, first_read, newest_first, query_shard
from sendonce.adapters.dynamodb_writes import (
    CONFLICT,
    Cancellation,
    ConditionFailed,
    DynamoDbTable,
    Item,
    TryAgain,
    with_retries,
)
from sendonce.clock import rfc3339
from sendonce.errors import DependencyUnavailable, InvalidCursor
from sendonce.messages.ids import looks_like_ulid
from sendonce.modes import retention_for
from sendonce.status_webhooks.model import (
    EVENT_PREFIX,
    EVENT_RETENTION,
    CampaignTally,
    Delivery,
    DeliveryStatus,
    Endpoint,
    Event,
    SigningSecret,
)
from sendonce.status_webhooks.ports import (
    Applied,
    Attempt,
    Changed,
    EventPage,
    Gone,
    Replaced,
    Replacement,
    TooManyEndpoints,
)
from sendonce.status_webhooks.rules import (
    EventType,
)

COUNT_SK = "WHEPCOUNT"
LANE_PREFIX = "WHEPLANE#"
APPLIED_SK = "APPLIED"
EVENT_SK = "EVENT"
# A workspace's events are listed through this many partitions of the ByWorkspace index. Each
# message makes three events (queued, sent, delivered), each an entry written in and, at expiry,
# out, of 1 WCU (the index holds keys and the type only): one workspace at 10,000 sends a second is
# about 470 WCU a second a shard, under half of DynamoDB's 1,000 (docs/scaling.md).
EVENT_SHARDS = 128
# Every delivery reads its endpoint, and the stream's consumer a workspace's endpoints once a batch:
# in one partition, one workspace at 10,000 sends a second (three events, one endpoint) would read
# 30,000 RCU a second of it. Each endpoint is kept whole in this many partitions, all written in one
# transaction, and each read takes one at random: about 950 RCU a second each (docs/scaling.md).
ENDPOINT_COPIES = 32
# A type filter drops what it reads: read at least this many events at a time while filling a page.
FILTERED_READ = 100


def _workspace(workspace_id: str) -> dict[str, str]:
    return {"S": f"WS#{workspace_id}"}


def _endpoint_key(workspace_id: str, endpoint_id: str, copy: int) -> Item:
    """One copy of an endpoint: a workspace's endpoints are kept whole in each of ENDPOINT_COPIES
    partitions (`WHEP#<workspace>#<copy>`)."""
    return {"pk": {"S": f"WHEP#{workspace_id}#{copy}"}, "sk": {"S": f"WHEP#{endpoint_id}"}}


def _lane_key(workspace_id: str, endpoint_id: str, copy: int) -> Item:
    """One copy of an endpoint's slow-lane flag, in the copy's partition of the workspace's flags."""
    return {"pk": {"S": f"{LANE_PREFIX}{workspace_id}#{copy}"}, "sk": {"S": f"{LANE_PREFIX}{endpoint_id}"}}


def _event_key(event_id: str) -> Item:
    return {"pk": {"S": f"EVT#{event_id}"}, "sk": {"S": EVENT_SK}}


def _applied_key(message_id: str) -> Item:
    return {"pk": {"S": f"MSG#{message_id}"}, "sk": {"S": APPLIED_SK}}


def looks_like_event_id(candidate: str) -> bool:
    return candidate.startswith(EVENT_PREFIX) and looks_like_ulid(candidate.removeprefix(EVENT_PREFIX))


def _conflicted(canceled: Cancellation) -> bool:
    """Another transaction held an item meanwhile: trying again meets its write as a condition."""
    return CONFLICT in canceled.codes


# ---------------------------------------------------------------------------- items
def _endpoint_item(endpoint: Endpoint, copy: int) -> Item:
    item: Item = {
        **_endpoint_key(endpoint.workspace_id, endpoint.id, copy),
        "id": {"S": endpoint.id},
        "workspaceId": {"S": endpoint.workspace_id},
        "url": {"S": endpoint.url},
        "createdAt": {"S": rfc3339(endpoint.created_at)},
        "version": {"N": str(endpoint.version)},
        "secrets": {
            "L": [
                {
                    "M": {
                        "value": {"S": s.value},
                        **({"expiresAt": {"S": rfc3339(s.expires_at)}} if s.expires_at else {}),
                    }
                }
                for s in endpoint.secrets
            ]
        },
    }
    if endpoint.event_types is not None:
        item["eventTypes"] = {"L": [{"S": t.value} for t in endpoint.event_types]}
    if endpoint.description is not None:
        item["description"] = {"S": endpoint.description}
    return item


def _endpoint(item: Item) -> Endpoint:
    return Endpoint(
        id=item["id"]["S"],
        workspace_id=item["workspaceId"]["S"],
        url=item["url"]["S"],
        event_types=tuple(EventType(t["S"]) for t in item["eventTypes"]["L"])
        if "eventTypes" in item
        else None,
        description=item["description"]["S"] if "description" in item else None,
        created_at=parse_datetime(item["createdAt"]["S"]),
        secrets=tuple(
            SigningSecret(
                s["M"]["value"]["S"],
                parse_datetime(s["M"]["expiresAt"]["S"]) if "expiresAt" in s["M"] else None,
            )
            for s in item["secrets"]["L"]
        ),
        version=int(item["version"]["N"]) if "version" in item else 0,  # stored before versions: 0
    )


def _delivery_value(delivery: Delivery) -> Item:
    value: Item = {"status": {"S": delivery.status.value}, "attempts": {"N": str(delivery.attempts)}}
    if delivery.last_attempt_at is not None:
        value["lastAttemptAt"] = {"S": rfc3339(delivery.last_attempt_at)}
    if delivery.last_response_status is not None:
        value["lastResponseStatus"] = {"N": str(delivery.last_response_status)}
    return {"M": value}


def _delivery(endpoint_id: str, value: Item) -> Delivery:
    fields = value["M"]
    return Delivery(
        endpoint_id=endpoint_id,
        status=DeliveryStatus(fields["status"]["S"]),
        attempts=int(fields["attempts"]["N"]),
        last_attempt_at=parse_datetime(fields["lastAttemptAt"]["S"]) if "lastAttemptAt" in fields else None,
        last_response_status=int(fields["lastResponseStatus"]["N"])
        if "lastResponseStatus" in fields
        else None,
    )


def event_item(event: Event) -> Item:
    return {
        **_event_key(event.id),
        "id": {"S": event.id},
        "workspaceId": {"S": event.workspace_id},
        "workspaceShard": {"S": workspace_shard(event.workspace_id, shard_of(event.id, EVENT_SHARDS))},
        "messageId": {"S": event.message_id},
        "type": {"S": event.type.value},
        "timestamp": {"S": rfc3339(event.timestamp)},
        # Stored as sent: every attempt signs the same bytes.
        "message": {"S": json.dumps(dict(event.message), separators=(",", ":"), ensure_ascii=False)},
        "sequence": {"N": str(event.sequence)} if event.sequence is not None else {"NULL": True},
        "deliveries": {"M": {d.endpoint_id: _delivery_value(d) for d in event.deliveries}},
        "expiresAt": _expires_at(event),
    }


def _expires_at(event: Event) -> dict[str, str]:
    """An event's expiry, and its message's `Applied`: 30 days, a test twin's 7."""
    return epoch_seconds(event.timestamp + retention_for(event.workspace_id, EVENT_RETENTION))


def _event(item: Item) -> Event:
    deliveries = sorted(item.get("deliveries", {}).get("M", {}).items())
    return Event(
        id=item["id"]["S"],
        workspace_id=item["workspaceId"]["S"],
        message_id=item["messageId"]["S"],
        type=EventType(item["type"]["S"]),
        timestamp=parse_datetime(item["timestamp"]["S"]),
        message=json.loads(item["message"]["S"]),
        sequence=int(item["sequence"]["N"]) if "N" in item.get("sequence", {}) else None,
        deliveries=tuple(_delivery(endpoint_id, value) for endpoint_id, value in deliveries),
    )


# ---------------------------------------------------------------------------- the store
class DynamoDbWebhookStore:
    def __init__(
        self,
        client: Any,
        table_name: str,
        copy_of: Callable[[int], int] = random.randrange,
        campaigns_table: str = "",
    ) -> None:
        """`copy_of(n)`: which of an endpoint's n copies a read takes. `campaigns_table`: where a
        campaign's message's change is counted on its campaign (the MessagesTable)."""
        self._table = DynamoDbTable(client, table_name)
        self._copy_of = copy_of
        self._campaigns_table = campaigns_table

    # -- endpoints
    def add_endpoint(self, endpoint: Endpoint, limit: int) -> None:
        with_retries(lambda: self._add_endpoint(endpoint, limit), "the endpoint count stayed contended")

    def _add_endpoint(self, endpoint: Endpoint, limit: int) -> None:
        canceled = self._table.transact(
            [
                {
                    "Update": {
                        "Key": {"pk": _workspace(endpoint.workspace_id), "sk": {"S": COUNT_SK}},
                        "UpdateExpression": "ADD #count :one",
                        "ConditionExpression": "attribute_not_exists(#count) OR #count < :limit",
                        "ExpressionAttributeNames": {"#count": "count"},
                        "ExpressionAttributeValues": {":one": {"N": "1"}, ":limit": {"N": str(limit)}},
                    }
                },
                *(
                    {
                        "Put": {
                            "Item": _endpoint_item(endpoint, copy),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    }
                    for copy in range(ENDPOINT_COPIES)
                ),
            ]
        )
        if canceled is not None:
            if canceled.failed(0):
                raise TooManyEndpoints(f"a workspace has at most {limit} endpoints")
            if _conflicted(canceled):
                raise TryAgain
            raise DependencyUnavailable(f"the endpoint could not be added: {canceled.codes}")

    def endpoints(self, workspace_id: str) -> list[Endpoint]:
        partition = _endpoint_key(workspace_id, "", self._copy_of(ENDPOINT_COPIES))["pk"]
        query: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": partition, ":prefix": {"S": "WHEP#"}},
            "ConsistentRead": True,
        }
        items: list[Item] = []
        while True:
            answer = self._table.query(**query)
            items.extend(answer.get("Items", []))
            if "LastEvaluatedKey" not in answer:
                return [_endpoint(item) for item in items]
            query["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def endpoint(self, workspace_id: str, endpoint_id: str) -> Endpoint | None:
        item = self._table.get(_endpoint_key(workspace_id, endpoint_id, self._copy_of(ENDPOINT_COPIES)))
        return _endpoint(item) if item else None

    def endpoint_and_lane(
        self, workspace_id: str, endpoint_id: str
    ) -> tuple[Endpoint | None, datetime | None]:
        """One copy of the endpoint and the same copy of its slow-lane flag, in one BatchGetItem."""
        copy = self._copy_of(ENDPOINT_COPIES)
        endpoint_key = _endpoint_key(workspace_id, endpoint_id, copy)
        found = self._table.batch_get([endpoint_key, _lane_key(workspace_id, endpoint_id, copy)])
        endpoint = found.get(endpoint_key["pk"]["S"])
        lane = found.get(f"{LANE_PREFIX}{workspace_id}#{copy}")
        until = datetime.fromtimestamp(int(lane["until"]["N"]), UTC) if lane else None
        return (_endpoint(endpoint) if endpoint else None), until

    def put_in_slow_lane(self, workspace_id: str, endpoint_id: str, until: datetime) -> None:
        self._table.batch_write(
            puts=[
                {
                    **_lane_key(workspace_id, endpoint_id, copy),
                    "workspaceId": {"S": workspace_id},
                    "endpointId": {"S": endpoint_id},
                    "until": epoch_seconds(until),
                    "expiresAt": epoch_seconds(until),
                }
                for copy in range(ENDPOINT_COPIES)
            ]
        )

    def take_out_of_slow_lane(self, workspace_id: str, endpoint_id: str) -> None:
        self._table.batch_write(
            deletes=[_lane_key(workspace_id, endpoint_id, copy) for copy in range(ENDPOINT_COPIES)]
        )

    def delete_endpoint(self, workspace_id: str, endpoint_id: str) -> bool:
        return with_retries(
            lambda: self._delete_endpoint(workspace_id, endpoint_id), "the endpoint count stayed contended"
        )

    def _delete_endpoint(self, workspace_id: str, endpoint_id: str) -> bool:
        canceled = self._table.transact(
            [
                *(
                    {
                        "Delete": {
                            "Key": _endpoint_key(workspace_id, endpoint_id, copy),
                            "ConditionExpression": "attribute_exists(pk)",
                        }
                    }
                    for copy in range(ENDPOINT_COPIES)
                ),
                {
                    "Update": {
                        "Key": {"pk": _workspace(workspace_id), "sk": {"S": COUNT_SK}},
                        "UpdateExpression": "ADD #count :minus_one",
                        "ExpressionAttributeNames": {"#count": "count"},
                        "ExpressionAttributeValues": {":minus_one": {"N": "-1"}},
                    }
                },
            ]
        )
        if canceled is None:
            return True
        if any(canceled.failed(copy) for copy in range(ENDPOINT_COPIES)):
            return False  # no such endpoint: its copies are written and deleted together
        if _conflicted(canceled):
            raise TryAgain
        raise DependencyUnavailable(f"the endpoint could not be deleted: {canceled.codes}")

    def replace_endpoint(self, endpoint: Endpoint) -> Replacement:
        """Every copy, or none, and only over `endpoint.version`: not one of a deleted endpoint
        brought back, nor another replacement written over. A transaction is serializable with
        every single-item read, so once it commits, a consistent read of any copy sees it; the
        endpoint a refusal answers is the one the condition saw (copy 0's, ALL_OLD)."""
        stored = replace(endpoint, version=endpoint.version + 1)
        if endpoint.version == 0:  # stored before versions: it has none yet
            condition: dict[str, Any] = {
                "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(#version)",
                "ExpressionAttributeNames": {"#version": "version"},
            }
        else:  # and so, it exists
            condition = {
                "ConditionExpression": "#version = :version",
                "ExpressionAttributeNames": {"#version": "version"},
                "ExpressionAttributeValues": {":version": {"N": str(endpoint.version)}},
            }
        items = [
            {
                "Put": {
                    "Item": _endpoint_item(stored, copy),
                    **condition,
                    **({"ReturnValuesOnConditionCheckFailure": "ALL_OLD"} if copy == 0 else {}),
                }
            }
            for copy in range(ENDPOINT_COPIES)
        ]

        def attempt() -> Replacement:
            canceled = self._table.transact(items)
            if canceled is None:
                return Replaced(stored)
            if canceled.failed(0):
                current = canceled.item(0)
                return Changed(_endpoint(current)) if current is not None else Gone()
            if any(canceled.failed(copy) for copy in range(ENDPOINT_COPIES)):
                # Copies are only ever written together: this is an item changed by hand.
                raise DependencyUnavailable(f"the copies of endpoint {endpoint.id} disagree")
            if _conflicted(canceled):
                raise TryAgain
            raise DependencyUnavailable(f"the endpoint could not be replaced: {canceled.codes}")

        return with_retries(attempt, "the endpoint stayed contended")

    # -- events
    def applied(self, message_id: str) -> Applied | None:
        item = self._table.get(_applied_key(message_id))
        if item is None:
            return None
        return Applied(sequence=int(item["sequence"]["N"]), position=item["position"]["S"])

    def record(
        self,
        event: Event,
        position: str,
        previous: Applied | None,
        tally: CampaignTally | None = None,
        promise: PromiseCount | None = None,
    ) -> bool:
        items: list[dict[str, Any]] = [
            {"Put": {"Item": event_item(event), "ConditionExpression": "attribute_not_exists(pk)"}}
        ]
        if promise is not None:  # counted once: with the event, which is written once
            items.append({"Update": promise_update(self._table.name, promise)})
        if tally is not None:
            if not self._campaigns_table:
                raise DependencyUnavailable("a campaign's message's change, and no campaigns table")
            from sendonce.adapters.dynamodb_campaigns import tally_update  # noqa: PLC0415  # campaigns only

            items.append(tally_update(self._campaigns_table, tally))
        if event.sequence is not None:
            condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
            if previous is not None:
                # `Applied` exactly as it was read: the message's changes have not moved on since.
                condition = {
                    "ConditionExpression": "#position = :position AND #sequence = :sequence",
                    "ExpressionAttributeNames": {"#position": "position", "#sequence": "sequence"},
                    "ExpressionAttributeValues": {
                        ":position": {"S": previous.position},
                        ":sequence": {"N": str(previous.sequence)},
                    },
                }
            moved_on: Item = {
                **_applied_key(event.message_id),
                "sequence": {"N": str(event.sequence)},
                "position": {"S": position},
                "expiresAt": _expires_at(event),
            }
            items.append({"Put": {"Item": moved_on, **condition}})

        def attempt() -> bool:
            # No request token of our own: DynamoDB answers a repeat of a token's request with the
            # first one's success, so every copy of a change would be told it wrote the event.
            # (The SDK sends a token of its own per call, which covers its own retries.)
            canceled = self._table.transact(items)
            if canceled is None:
                return True
            if any(canceled.failed(index) for index in range(len(items))):
                return False  # the event exists already, or the message's changes moved on
            if _conflicted(canceled):
                raise TryAgain
            raise DependencyUnavailable(f"the event could not be recorded: {canceled.codes}")

        return with_retries(attempt, "the message's events stayed contended")

    def event(self, workspace_id: str, event_id: str) -> Event | None:
        if not looks_like_event_id(event_id):
            return None
        item = self._table.get(_event_key(event_id))
        if item is None or item["workspaceId"]["S"] != workspace_id:
            return None  # another workspace's event does not exist for this one
        return _event(item)

    def events(
        self,
        workspace_id: str,
        *,
        message_id: str | None,
        event_type: EventType | None,
        limit: int,
        cursor: str | None,
    ) -> EventPage:
        """Newest first; a page resumes below its cursor, the last id of the page before."""
        if cursor is not None and not looks_like_event_id(cursor):
            raise InvalidCursor(cursor)
        if message_id is not None:
            return self._events_of_message(workspace_id, message_id, event_type, limit, cursor)
        extra: dict[str, Any] = {}
        if event_type is not None:  # the index holds each event's type: filtered as it is read
            extra = {
                "FilterExpression": "#type = :type",
                "ExpressionAttributeNames": {"#type": "type"},
                "ExpressionAttributeValues": {":type": {"S": event_type.value}},
            }
        entries = newest_first(
            [workspace_shard(workspace_id, shard) for shard in range(EVENT_SHARDS)],
            query_shard(self._table, "ByWorkspace", "workspaceShard", below=cursor, extra=extra),
            first=first_read(limit + 1, EVENT_SHARDS),  # one more tells whether another page exists
        )
        fetched = fetch_page(
            self._table, entries, limit, lambda item: item["workspaceId"]["S"] == workspace_id
        )
        events = [_event(item) for item in fetched.items]
        return EventPage(events, events[-1].id if fetched.more and events else None)

    def _events_of_message(
        self, workspace_id: str, message_id: str, event_type: EventType | None, limit: int, cursor: str | None
    ) -> EventPage:
        """One message's events: one partition of the ByMessage index, whose entries are whole events."""
        names = {"#ws": "workspaceId"}
        values: dict[str, Any] = {":message": {"S": message_id}, ":ws": {"S": workspace_id}}
        condition = "messageId = :message"
        if cursor is not None:
            condition += " AND #id < :below"
            names["#id"] = "id"
            values[":below"] = {"S": cursor}
        filters = ["#ws = :ws"]  # another workspace's message has no events here
        if event_type is not None:
            names["#type"] = "type"
            values[":type"] = {"S": event_type.value}
            filters.append("#type = :type")
        # One more than the page tells whether another page exists.
        least = FILTERED_READ if event_type is not None else 0
        query: dict[str, Any] = {
            "IndexName": "ByMessage",
            "KeyConditionExpression": condition,
            "FilterExpression": " AND ".join(filters),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": False,
            "Limit": max(limit + 1, least),
        }
        items: list[Item] = []
        while True:
            # A filter and DynamoDB's 1 MB both end a page early: read on until it is full.
            answer = self._table.query(**query)
            items.extend(answer.get("Items", []))
            if len(items) > limit or "LastEvaluatedKey" not in answer:
                break
            query["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
            query["Limit"] = max(limit + 1 - len(items), least)
        events = [_event(item) for item in items[:limit]]
        return EventPage(events, events[-1].id if len(items) > limit and events else None)

    def record_attempt(self, workspace_id: str, event_id: str, endpoint_id: str, attempt: Attempt) -> None:
        if attempt.succeeded:
            status = DeliveryStatus.SUCCEEDED
        else:
            status = DeliveryStatus.FAILED if attempt.final else DeliveryStatus.PENDING
        sets = ["#d.#e.#status = :status"]
        values: dict[str, Any] = {
            ":status": {"S": status.value},
            ":succeeded": {"S": DeliveryStatus.SUCCEEDED.value},
        }
        if attempt.made:
            sets += ["#d.#e.attempts = #d.#e.attempts + :one", "#d.#e.lastAttemptAt = :at"]
            values.update({":one": {"N": "1"}, ":at": {"S": rfc3339(attempt.at)}})
        if attempt.response_status is not None:
            sets.append("#d.#e.lastResponseStatus = :code")
            values[":code"] = {"N": str(attempt.response_status)}
        # A failure never overrides a success of a concurrent copy of the same delivery.
        condition = "workspaceId = :ws AND attribute_exists(#d.#e)" + (
            "" if attempt.succeeded else " AND #d.#e.#status <> :succeeded"
        )
        if attempt.succeeded:
            values.pop(":succeeded")
        values[":ws"] = {"S": workspace_id}
        self._table.write(
            "update_item",
            Key=_event_key(event_id),
            UpdateExpression="SET " + ", ".join(sets),
            ConditionExpression=condition,
            ExpressionAttributeNames={"#d": "deliveries", "#e": endpoint_id, "#status": "status"},
            ExpressionAttributeValues=values,
        )

    def reopen(self, workspace_id: str, event_id: str, endpoint_ids: Sequence[str]) -> Event | None:
        if not looks_like_event_id(event_id) or not endpoint_ids:
            return self.event(workspace_id, event_id)
        names = {"#d": "deliveries", "#status": "status"}
        values: dict[str, Any] = {":pending": {"S": DeliveryStatus.PENDING.value}}
        sets = []
        for index, endpoint_id in enumerate(endpoint_ids):
            names[f"#e{index}"] = endpoint_id
            # A delivery the event never had starts at zero attempts; one it had keeps its count.
            sets.append(f"#d.#e{index} = if_not_exists(#d.#e{index}, :fresh)")
        values[":fresh"] = {"M": {"status": {"S": DeliveryStatus.PENDING.value}, "attempts": {"N": "0"}}}
        workspace = {":ws": {"S": workspace_id}}  # and so, the event exists
        first = self._table.write(
            "update_item",
            Key=_event_key(event_id),
            UpdateExpression="SET " + ", ".join(sets),
            ConditionExpression="workspaceId = :ws",
            ExpressionAttributeNames={k: v for k, v in names.items() if k != "#status"},
            ExpressionAttributeValues={":fresh": values[":fresh"], **workspace},
        )
        if isinstance(first, ConditionFailed):
            return None
        answer = self._table.write(
            "update_item",
            Key=_event_key(event_id),
            UpdateExpression="SET "
            + ", ".join(f"#d.#e{i}.#status = :pending" for i in range(len(endpoint_ids))),
            ConditionExpression="workspaceId = :ws",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues={":pending": values[":pending"], **workspace},
            ReturnValues="ALL_NEW",
        )
        if isinstance(answer, ConditionFailed):
            return None
        return _event(answer["Attributes"])
