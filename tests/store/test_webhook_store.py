"""The webhook store's contract, on every engine (its copies, items, TTL, index shards and injected
conflicts on moto and DynamoDB Local).

Endpoints and events belong to one workspace: another workspace's id is not found. Of 30 endpoints
added at once exactly 10 are kept, and the count beside them agrees; every copy of an endpoint reads
the same. A replacement is written only over the version it was made from: of two made from one,
the second writes nothing and is told the first; rotations asked at once through the service all
apply, one after another, up to the cap, and every secret they answered signs. An event and its
message's `Applied` are written together or not at all, once, whoever else records the same
change; a record that read `Applied` before it moved on writes nothing. Listing gives every event
once, newest first, over every shard of the events' index, whatever a filter or DynamoDB's 1 MB
leaves out of one read and whatever is recorded between two pages. Attempts add up, and a failure
never undoes a success. Events and `Applied` expire 30 days after the change. An endpoint's
slow-lane flag is read with the endpoint in one call from every copy, in its workspace only, and
carries its own end.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from msgspec.structs import replace
from sendonce.activity.counts import PromiseCount, PromiseKind
from sendonce.activity.ports import PromiseCounts
from sendonce.adapters import dynamodb_webhooks
from sendonce.adapters.dynamodb_activity import PROMISE_SHARDS, DynamoDbPromiseCounts, promise_key
from sendonce.adapters.dynamodb_items import shard_of
from sendonce.adapters.dynamodb_webhooks import (
    COUNT_SK,
    ENDPOINT_COPIES,
    EVENT_SHARDS,
    DynamoDbWebhookStore,
    event_item,
)
from sendonce.adapters.dynamodb_writes import MAX_ATTEMPTS
from sendonce.errors import DependencyUnavailable, InvalidCursor, TooManyRotations
from sendonce.messages.ids import new_message_id, ulid
from sendonce.status_webhooks.model import (
    EVENT_PREFIX,
    Delivery,
    DeliveryStatus,
    Endpoint,
    Event,
    SigningSecret,
    new_endpoint_id,
    new_secret,
)
from sendonce.status_webhooks.ports import (
    Applied,
    Attempt,
    Changed,
    DeliveryTask,
    Gone,
    Replaced,
    TooManyEndpoints,
)
from sendonce.status_webhooks.rules import (
    MAX_REPLACED_SECRETS,
    ROTATION_OVERLAP,
    EventType,
)
from sendonce.status_webhooks.service import WebhookService

from sendonce_local.emulator import create_tables
from sendonce_local.template import Template, load_template
from tests.store.conftest import NOW, ROOT, DynamoDbEngine, Engine, conflicts, only, race
from tests.unit.unit_fakes import InMemoryWebhookStore

TABLE = "WebhooksTable"
LIMIT = 10
CONTENDERS = 30
RETENTION_SECONDS = 30 * 24 * 3600


# ---------------------------------------------------------------------------- the table
_TEMPLATE: Template | None = None


def _template() -> Template:
    """template.yaml with its WebhooksTable only (the `engine` fixture has made the others)."""
    global _TEMPLATE  # noqa: PLW0603  (parsed once per session)
    if _TEMPLATE is None:
        whole = load_template(ROOT / "template.yaml")
        _TEMPLATE = dataclasses.replace(
            whole, tables=[table for table in whole.tables if table.logical_id == TABLE]
        )
        assert _TEMPLATE.tables, f"template.yaml has no {TABLE}"
    return _TEMPLATE


class Webhooks:
    """The webhook store of one engine, and what a test observes of it beside the port: the
    endpoints counted in a workspace (the adapter keeps a count beside them), the endpoint as each
    of its copies reads it, and everything at once (`snapshot`)."""

    store: DynamoDbWebhookStore | InMemoryWebhookStore

    def count(self, workspace_id: str) -> int:
        raise NotImplementedError

    def every_copy(self, workspace_id: str, endpoint_id: str) -> set[Endpoint | None]:
        raise NotImplementedError

    def snapshot(self) -> object:
        raise NotImplementedError

    def counts(self) -> PromiseCounts:
        """The promise's daily counts, as the API reads them."""
        raise NotImplementedError


@dataclass
class WebhooksTable(Webhooks):
    """The WebhooksTable on moto or DynamoDB Local, and its items."""

    engine: DynamoDbEngine
    store: DynamoDbWebhookStore

    def item(self, pk: str, sk: str) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self.engine.client.get_item(
            TableName=TABLE, Key={"pk": {"S": pk}, "sk": {"S": sk}}, ConsistentRead=True
        ).get("Item")
        return item

    def items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        request: dict[str, Any] = {"TableName": TABLE, "ConsistentRead": True}
        while True:
            page = self.engine.client.scan(**request)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return items
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def count(self, workspace_id: str) -> int:
        item = self.item(f"WS#{workspace_id}", COUNT_SK)
        return int(item["count"]["N"]) if item else 0

    def every_copy(self, workspace_id: str, endpoint_id: str) -> set[Endpoint | None]:
        """Strongly consistent reads of each copy."""
        return {store.endpoint(workspace_id, endpoint_id) for store in self.copies()}

    def copies(self) -> list[DynamoDbWebhookStore]:
        """A store reading each copy of the endpoints."""
        return [
            DynamoDbWebhookStore(self.engine.client, TABLE, copy_of=lambda _, copy=copy: copy)
            for copy in range(ENDPOINT_COPIES)
        ]

    def snapshot(self) -> object:
        return sorted(map(str, self.items()))

    def store_of(self, client: Any) -> DynamoDbWebhookStore:
        return DynamoDbWebhookStore(client, TABLE)

    def counts(self) -> PromiseCounts:
        return DynamoDbPromiseCounts(self.engine.client, TABLE)


@dataclass
class FakeWebhooks(Webhooks):
    """The unit tier's fake: one copy of each endpoint, and no count beside them."""

    store: InMemoryWebhookStore

    def count(self, workspace_id: str) -> int:
        return len(self.store.endpoints(workspace_id))

    def every_copy(self, workspace_id: str, endpoint_id: str) -> set[Endpoint | None]:
        return {self.store.endpoint(workspace_id, endpoint_id)}

    def counts(self) -> PromiseCounts:
        return self.store.promise_counts

    def snapshot(self) -> object:
        with self.store.guard:
            store = self.store
            return repr((store.endpoint_items, store.event_items, store.applied_items, store.lane_items))


@pytest.fixture
def webhooks(engine: Engine) -> Webhooks:
    if not isinstance(engine, DynamoDbEngine):
        return FakeWebhooks(InMemoryWebhookStore())
    create_tables(engine.client, _template())
    return WebhooksTable(engine, DynamoDbWebhookStore(engine.client, TABLE))


@pytest.fixture
def webhooks_table(dynamodb_engine: DynamoDbEngine, webhooks: Webhooks) -> WebhooksTable:
    """The webhook store of a test about the DynamoDB adapter itself: moto or DynamoDB Local."""
    assert isinstance(webhooks, WebhooksTable), webhooks
    return webhooks


# ---------------------------------------------------------------------------- builders
def _endpoint(workspace: str = "ws_a", **changes: Any) -> Endpoint:
    endpoint = Endpoint(
        id=new_endpoint_id(NOW),
        workspace_id=workspace,
        url="https://hooks.example.com/sendonce",
        event_types=None,
        description=None,
        created_at=NOW,
        secrets=(SigningSecret(new_secret()),),
    )
    return replace(endpoint, **changes)


def _event_id(at: datetime) -> str:
    return EVENT_PREFIX + ulid(int(at.timestamp() * 1000))


def _event(
    *,
    workspace: str = "ws_a",
    message_id: str | None = None,
    at: datetime = NOW,
    kind: EventType = EventType.SENT,
    sequence: int | None = 1,
    endpoints: Sequence[str] = ("whep_one",),
    body: str = "hello",
) -> Event:
    message_id = message_id or new_message_id()
    return Event(
        id=_event_id(at),
        workspace_id=workspace,
        message_id=message_id,
        type=kind,
        timestamp=at,
        message={"id": message_id, "status": "sent", "body": body, "metadata": {"order": "42"}},
        sequence=sequence,
        deliveries=tuple(Delivery(endpoint_id) for endpoint_id in endpoints),
    )


def _position(n: int) -> str:
    return f"{n:040d}"


def _recorded(webhooks: Webhooks, event: Event, position: str, previous: Applied | None = None) -> Event:
    assert webhooks.store.record(event, position, previous)
    return event


def _failed(at: datetime, final: bool = False, status: int | None = 500) -> Attempt:
    return Attempt(at=at, response_status=status, succeeded=False, final=final)


def _succeeded(at: datetime) -> Attempt:
    return Attempt(at=at, response_status=204, succeeded=True, final=True)


def _delivery(webhooks: Webhooks, event: Event, endpoint_id: str) -> Delivery:
    stored = webhooks.store.event(event.workspace_id, event.id)
    assert stored is not None
    delivery = stored.delivery(endpoint_id)
    assert delivery is not None
    return delivery


# ---------------------------------------------------------------------------- endpoints
def test_given_an_endpoint_then_it_reads_back_whole_in_its_workspace_only(webhooks: Webhooks) -> None:
    store = webhooks.store
    endpoint = _endpoint(
        event_types=(EventType.DELIVERED, EventType.FAILED),
        description="orders",
        secrets=(SigningSecret(new_secret()), SigningSecret(new_secret(), NOW + timedelta(hours=24))),
    )
    plain = _endpoint()
    other = _endpoint("ws_b")
    for added in (endpoint, plain, other):
        store.add_endpoint(added, LIMIT)

    assert store.endpoint("ws_a", endpoint.id) == endpoint
    assert store.endpoint("ws_a", plain.id) == plain
    assert sorted(store.endpoints("ws_a"), key=lambda e: e.id) == sorted(
        [endpoint, plain], key=lambda e: e.id
    )
    assert store.endpoints("ws_b") == [other]
    assert store.endpoints("ws_c") == []
    assert store.endpoint("ws_b", endpoint.id) is None
    assert store.endpoint("ws_a", other.id) is None
    assert (webhooks.count("ws_a"), webhooks.count("ws_b")) == (2, 1)


def test_given_another_workspaces_endpoint_then_delete_and_replace_find_nothing_and_change_nothing(
    webhooks: Webhooks,
) -> None:
    store = webhooks.store
    endpoint = _endpoint()
    store.add_endpoint(endpoint, LIMIT)
    before = webhooks.snapshot()

    assert store.delete_endpoint("ws_b", endpoint.id) is False
    assert (
        store.replace_endpoint(replace(endpoint, workspace_id="ws_b", url="https://evil.example")) == Gone()
    )

    assert webhooks.snapshot() == before
    assert store.endpoint("ws_a", endpoint.id) == endpoint
    assert store.endpoints("ws_b") == []


def test_given_a_rotated_endpoint_then_replace_stores_it_and_after_delete_finds_nothing(
    webhooks: Webhooks,
) -> None:
    store = webhooks.store
    endpoint = _endpoint()
    store.add_endpoint(endpoint, LIMIT)
    rotated = endpoint.rotated(new_secret(), NOW + timedelta(minutes=1))

    assert store.replace_endpoint(rotated) == Replaced(replace(rotated, version=2))
    assert store.endpoint("ws_a", endpoint.id) == replace(rotated, version=2)
    assert store.delete_endpoint("ws_a", endpoint.id) is True
    assert store.delete_endpoint("ws_a", endpoint.id) is False

    assert store.replace_endpoint(rotated) == Gone()  # deleted meanwhile: not brought back
    assert store.endpoint("ws_a", endpoint.id) is None
    assert webhooks.count("ws_a") == 0


def test_every_copy_of_an_endpoint_reads_the_same_after_an_add_a_rotation_and_a_delete(
    webhooks_table: WebhooksTable,
) -> None:
    copies = webhooks_table.copies()
    endpoint = _endpoint()
    rotated = endpoint.rotated(new_secret(), NOW + timedelta(minutes=1))

    copies[0].add_endpoint(endpoint, LIMIT)
    assert {store.endpoint("ws_a", endpoint.id) for store in copies} == {endpoint}
    assert all(store.endpoints("ws_a") == [endpoint] for store in copies)
    assert copies[5].replace_endpoint(rotated) == Replaced(replace(rotated, version=2))
    assert {store.endpoint("ws_a", endpoint.id) for store in copies} == {replace(rotated, version=2)}
    assert copies[9].delete_endpoint("ws_a", endpoint.id) is True
    assert {store.endpoint("ws_a", endpoint.id) for store in copies} == {None}
    assert all(store.endpoints("ws_a") == [] for store in copies)
    assert webhooks_table.items() == [{"pk": {"S": "WS#ws_a"}, "sk": {"S": COUNT_SK}, "count": {"N": "0"}}]


def test_given_two_replacements_made_from_one_version_then_the_second_writes_nothing_and_is_told_the_first(
    webhooks: Webhooks,
) -> None:
    store = webhooks.store
    endpoint = _endpoint()
    store.add_endpoint(endpoint, LIMIT)
    at = NOW + timedelta(minutes=1)
    first, second = endpoint.rotated(new_secret(), at), endpoint.rotated(new_secret(), at)

    assert store.replace_endpoint(first) == Replaced(replace(first, version=2))
    assert store.replace_endpoint(second) == Changed(replace(first, version=2))

    assert webhooks.every_copy("ws_a", endpoint.id) == {replace(first, version=2)}
    # Made again from what it was told, it is written after the first, which it replaces.
    again = replace(first, version=2).rotated(second.secrets[0].value, at)
    assert store.replace_endpoint(again) == Replaced(replace(again, version=3))
    stored = store.endpoint("ws_a", endpoint.id)
    assert stored is not None
    assert stored.signing_secrets(at) == (
        second.secrets[0].value,
        first.secrets[0].value,
        endpoint.secrets[0].value,
    )
    assert webhooks.every_copy("ws_a", endpoint.id) == {stored}


def test_given_an_endpoint_stored_before_versions_then_it_reads_as_version_0_and_is_replaced_once(
    webhooks_table: WebhooksTable,
) -> None:
    store = webhooks_table.store
    endpoint = _endpoint(version=0)
    store.add_endpoint(endpoint, LIMIT)
    for copy in range(ENDPOINT_COPIES):  # as the store wrote them before: no version at all
        webhooks_table.engine.client.update_item(
            TableName=TABLE,
            Key={"pk": {"S": f"WHEP#ws_a#{copy}"}, "sk": {"S": f"WHEP#{endpoint.id}"}},
            UpdateExpression="REMOVE version",
        )
    assert store.endpoint("ws_a", endpoint.id) == endpoint
    first, second = endpoint.rotated(new_secret(), NOW), endpoint.rotated(new_secret(), NOW)

    assert store.replace_endpoint(first) == Replaced(replace(first, version=1))
    assert store.replace_endpoint(second) == Changed(replace(first, version=1))
    assert webhooks_table.every_copy("ws_a", endpoint.id) == {replace(first, version=1)}


def _rotations(webhooks: Webhooks) -> WebhookService:
    """The customer's rotations, as the API makes them, over this store."""

    class NoQueue:
        def enqueue(self, tasks: Sequence[DeliveryTask]) -> None:
            raise AssertionError("a rotation queues nothing")

    return WebhookService(
        endpoints=webhooks.store,
        events=webhooks.store,
        queue=NoQueue(),
        check_target=lambda url: url,
        clock=lambda: NOW,
    )


@pytest.mark.parametrize("count", [10, CONTENDERS])
def test_given_rotations_at_once_then_each_applies_after_the_others_up_to_the_cap_and_every_answer_signs(
    webhooks: Webhooks, count: int
) -> None:
    service = _rotations(webhooks)
    endpoint = service.add_endpoint("ws_a", "https://hooks.example.com/sendonce", None, None)

    answers = race(count, lambda _: service.rotate_secret("ws_a", endpoint.id))

    rotated = only(answers, Endpoint)
    refused = only(answers, TooManyRotations)
    assert len(rotated) == min(count, MAX_REPLACED_SECRETS), answers
    assert len(rotated) + len(refused) == count, answers  # no 409, no 503: none lost
    [stored] = webhooks.every_copy("ws_a", endpoint.id)
    assert stored is not None
    assert stored.version == 1 + len(rotated)
    assert sorted(r.version for r in rotated) == list(range(2, 2 + len(rotated)))  # one after another
    signing = stored.signing_secrets(NOW)
    assert set(signing) == {r.secrets[0].value for r in rotated} | {endpoint.secrets[0].value}
    assert len(signing) == len(rotated) + 1
    assert signing[0] == max(rotated, key=lambda r: r.version).secrets[0].value
    assert all(s.expires_at == NOW + ROTATION_OVERLAP for s in stored.secrets[1:])


# ---------------------------------------------------------------------------- the slow lane's flag
@contextmanager
def _calls(client: Any) -> Iterator[list[str]]:
    """The DynamoDB operations `client` makes within the block, by name."""
    made: list[str] = []

    def count(model: Any, **_: Any) -> None:
        made.append(model.name)

    client.meta.events.register("before-call.dynamodb", count)
    try:
        yield made
    finally:
        client.meta.events.unregister("before-call.dynamodb", count)


def test_given_a_flag_then_every_copy_reads_it_with_the_endpoint_in_one_call(
    webhooks_table: WebhooksTable,
) -> None:
    copies = webhooks_table.copies()
    endpoint = _endpoint()
    webhooks_table.store.add_endpoint(endpoint, LIMIT)
    until = NOW + timedelta(minutes=5)

    assert {store.endpoint_and_lane("ws_a", endpoint.id) for store in copies} == {(endpoint, None)}
    webhooks_table.store.put_in_slow_lane("ws_a", endpoint.id, until)
    with _calls(webhooks_table.engine.client) as made:
        assert {store.endpoint_and_lane("ws_a", endpoint.id) for store in copies} == {(endpoint, until)}
    assert made == ["BatchGetItem"] * ENDPOINT_COPIES  # one round trip a read, as the GetItem was
    webhooks_table.store.take_out_of_slow_lane("ws_a", endpoint.id)
    assert {store.endpoint_and_lane("ws_a", endpoint.id) for store in copies} == {(endpoint, None)}


def test_given_a_flag_then_its_copies_carry_their_end_and_expire_then(webhooks_table: WebhooksTable) -> None:
    endpoint = _endpoint()
    webhooks_table.store.add_endpoint(endpoint, LIMIT)
    until = NOW + timedelta(minutes=5)

    webhooks_table.store.put_in_slow_lane("ws_a", endpoint.id, until)

    flags = [
        item for item in webhooks_table.items() if item["pk"]["S"].startswith(dynamodb_webhooks.LANE_PREFIX)
    ]
    assert len(flags) == ENDPOINT_COPIES
    assert {(item["until"]["N"], item["expiresAt"]["N"]) for item in flags} == {
        (str(int(until.timestamp())), str(int(until.timestamp())))
    }
    assert {item["pk"]["S"] for item in flags} == {f"WHEPLANE#ws_a#{copy}" for copy in range(ENDPOINT_COPIES)}
    assert webhooks_table.store.endpoints("ws_a") == [endpoint]  # a flag is no endpoint


def test_given_a_flag_then_another_workspace_reads_neither_it_nor_the_endpoint(webhooks: Webhooks) -> None:
    endpoint = _endpoint()
    webhooks.store.add_endpoint(endpoint, LIMIT)
    webhooks.store.put_in_slow_lane("ws_a", endpoint.id, NOW + timedelta(minutes=5))

    assert webhooks.store.endpoint_and_lane("ws_b", endpoint.id) == (None, None)


def test_given_a_deleted_endpoint_then_its_flag_is_read_without_it_and_runs_out(webhooks: Webhooks) -> None:
    endpoint = _endpoint()
    webhooks.store.add_endpoint(endpoint, LIMIT)
    until = NOW + timedelta(minutes=5)
    webhooks.store.put_in_slow_lane("ws_a", endpoint.id, until)

    assert webhooks.store.delete_endpoint("ws_a", endpoint.id) is True

    assert webhooks.store.endpoint_and_lane("ws_a", endpoint.id) == (None, until)


def test_given_30_endpoints_added_at_once_then_exactly_10_are_kept_and_counted(webhooks: Webhooks) -> None:
    store = webhooks.store
    endpoints = [_endpoint() for _ in range(CONTENDERS)]

    answers = race(CONTENDERS, lambda i: store.add_endpoint(endpoints[i], LIMIT))

    assert answers.count(None) == LIMIT, answers
    assert len(only(answers, TooManyEndpoints)) == CONTENDERS - LIMIT, answers
    kept = store.endpoints("ws_a")
    added = {endpoints[i].id for i, answer in enumerate(answers) if answer is None}
    assert {e.id for e in kept} == added
    assert webhooks.count("ws_a") == LIMIT
    # The limit is per workspace.
    store.add_endpoint(_endpoint("ws_b"), LIMIT)


def test_given_a_full_workspace_then_a_delete_makes_room_for_one_more(webhooks: Webhooks) -> None:
    store = webhooks.store
    endpoints = [_endpoint() for _ in range(LIMIT)]
    for endpoint in endpoints:
        store.add_endpoint(endpoint, LIMIT)
    with pytest.raises(TooManyEndpoints):
        store.add_endpoint(_endpoint(), LIMIT)

    assert store.delete_endpoint("ws_a", endpoints[0].id)
    assert webhooks.count("ws_a") == LIMIT - 1
    store.add_endpoint(_endpoint(), LIMIT)
    with pytest.raises(TooManyEndpoints):
        store.add_endpoint(_endpoint(), LIMIT)

    assert len(store.endpoints("ws_a")) == LIMIT
    assert webhooks.count("ws_a") == LIMIT


def test_given_30_deletes_of_one_endpoint_at_once_then_one_deletes_and_the_count_moves_once(
    webhooks: Webhooks,
) -> None:
    store = webhooks.store
    endpoint, kept = _endpoint(), _endpoint()
    store.add_endpoint(endpoint, LIMIT)
    store.add_endpoint(kept, LIMIT)

    answers = race(CONTENDERS, lambda _: store.delete_endpoint("ws_a", endpoint.id))

    assert answers.count(True) == 1, answers
    assert answers.count(False) == CONTENDERS - 1, answers
    assert store.endpoints("ws_a") == [kept]
    assert webhooks.count("ws_a") == 1


def test_given_conflicts_on_the_first_tries_then_an_endpoint_is_added_and_deleted_once(
    webhooks_table: WebhooksTable,
) -> None:
    client = webhooks_table.engine.new_client()
    calls = conflicts(client, 2)
    store = webhooks_table.store_of(client)
    endpoint = _endpoint()

    store.add_endpoint(endpoint, LIMIT)
    assert len(calls) == 3
    again = conflicts(client, 2)  # the first injector has run out: this one answers next
    assert store.delete_endpoint("ws_a", endpoint.id) is True

    assert len(again) == 3
    assert store.endpoints("ws_a") == []
    assert webhooks_table.count("ws_a") == 0


def test_given_conflicts_on_every_try_then_dependency_unavailable_and_nothing_added(
    webhooks_table: WebhooksTable,
) -> None:
    client = webhooks_table.engine.new_client()
    calls = conflicts(client, 1000)

    with pytest.raises(DependencyUnavailable):
        webhooks_table.store_of(client).add_endpoint(_endpoint(), LIMIT)

    assert len(calls) == MAX_ATTEMPTS
    assert webhooks_table.items() == []


# ---------------------------------------------------------------------------- record
def test_given_a_change_then_its_event_and_applied_are_written_together(webhooks: Webhooks) -> None:
    store = webhooks.store
    event = _event(endpoints=("whep_one", "whep_two"))

    assert store.applied(event.message_id) is None
    assert store.record(event, _position(100), None) is True

    assert store.event("ws_a", event.id) == event
    assert store.applied(event.message_id) == Applied(sequence=1, position=_position(100))


def test_given_a_recorded_event_then_recording_it_again_is_false_and_changes_nothing(
    webhooks: Webhooks,
) -> None:
    store = webhooks.store
    event = _recorded(webhooks, _event(), _position(100))
    before = webhooks.snapshot()

    assert store.record(event, _position(100), None) is False
    # Read again after `Applied` moved: the same event, with what was read now.
    assert store.record(event, _position(100), store.applied(event.message_id)) is False

    assert webhooks.snapshot() == before


def test_given_a_stale_previous_then_nothing_is_written(webhooks: Webhooks) -> None:
    store = webhooks.store
    message_id = new_message_id()
    first = _recorded(webhooks, _event(message_id=message_id), _position(100))
    later = NOW + timedelta(seconds=1)
    second = _event(message_id=message_id, at=later, kind=EventType.DELIVERED, sequence=2)

    assert store.record(second, _position(200), None) is False  # read before the first was told
    assert store.record(second, _position(200), Applied(1, _position(50))) is False
    assert store.record(second, _position(200), Applied(7, _position(100))) is False

    assert store.event("ws_a", second.id) is None
    assert store.applied(message_id) == Applied(1, _position(100))
    assert store.record(second, _position(200), Applied(1, _position(100))) is True
    assert store.applied(message_id) == Applied(2, _position(200))
    assert [
        e.id for e in store.events("ws_a", message_id=None, event_type=None, limit=10, cursor=None).events
    ] == [
        second.id,
        first.id,
    ]


def test_given_a_duplicate_blocked_event_then_applied_is_untouched(webhooks_table: WebhooksTable) -> None:
    store = webhooks_table.store
    message_id = new_message_id()
    _recorded(webhooks_table, _event(message_id=message_id), _position(100))
    blocked = _event(
        message_id=message_id, at=NOW + timedelta(seconds=1), kind=EventType.DUPLICATE_BLOCKED, sequence=None
    )
    fresh = _event(at=NOW + timedelta(seconds=2), kind=EventType.DUPLICATE_BLOCKED, sequence=None)

    assert store.record(blocked, _position(150), None) is True
    assert store.record(fresh, _position(10), None) is True
    assert store.record(blocked, _position(150), None) is False

    assert store.event("ws_a", blocked.id) == blocked
    assert store.applied(message_id) == Applied(1, _position(100))
    assert store.applied(fresh.message_id) is None
    assert webhooks_table.item(f"MSG#{fresh.message_id}", "APPLIED") is None


def test_given_30_records_of_one_change_at_once_then_exactly_one_is_true(webhooks: Webhooks) -> None:
    store = webhooks.store
    message_id = new_message_id()
    _recorded(webhooks, _event(message_id=message_id), _position(100))
    previous = store.applied(message_id)
    event = _event(message_id=message_id, at=NOW + timedelta(seconds=1), sequence=2)

    answers = race(CONTENDERS, lambda _: store.record(event, _position(200), previous))

    assert answers.count(True) == 1, answers
    assert answers.count(False) == CONTENDERS - 1, answers
    assert store.event("ws_a", event.id) == event
    assert store.applied(message_id) == Applied(2, _position(200))


def test_given_30_records_of_one_change_with_its_count_at_once_then_it_is_counted_once(
    webhooks: Webhooks,
) -> None:
    """The promise's count rides with its event: a change told 30 times at once is counted once."""
    store = webhooks.store
    event = _event(kind=EventType.QUEUED)
    count = PromiseCount("ws_a", "2036-12-01", PromiseKind.NEW_MESSAGES, event.message_id)

    answers = race(CONTENDERS, lambda _: store.record(event, _position(100), None, None, count))

    assert answers.count(True) == 1, answers
    (day,) = webhooks.counts().days("ws_a", ["2036-12-01"])
    assert day.counts == {PromiseKind.NEW_MESSAGES: 1}


def test_given_counts_spread_over_every_shard_then_a_day_sums_them_apart_from_other_days_and_workspaces(
    webhooks: Webhooks,
) -> None:
    counts = webhooks.counts()
    for n in range(PROMISE_SHARDS * 4):
        counts.add(PromiseCount("ws_a", "2036-12-01", PromiseKind.REPLAYS, f"spread-{n}"))
    counts.add(PromiseCount("ws_a", "2036-12-01", PromiseKind.REFUSED_SUPPRESSED, "x", count=3))
    counts.add(PromiseCount("ws_a", "2036-11-30", PromiseKind.DUPLICATES_BLOCKED, "y"))
    counts.add(PromiseCount("ws_a#1", "2036-12-01", PromiseKind.REPLAYS, "z"))  # a lookalike workspace
    counts.add(PromiseCount("ws_b", "2036-12-01", PromiseKind.REPLAYS, "z"))

    days = counts.days("ws_a", ["2036-12-02", "2036-12-01", "2036-11-30"])

    assert [(day.day, day.counts) for day in days] == [
        ("2036-12-02", {}),
        ("2036-12-01", {PromiseKind.REPLAYS: PROMISE_SHARDS * 4, PromiseKind.REFUSED_SUPPRESSED: 3}),
        ("2036-11-30", {PromiseKind.DUPLICATES_BLOCKED: 1}),
    ]


def test_given_a_count_then_its_counter_is_one_of_the_shards_and_expires_35_days_after_its_day(
    webhooks_table: WebhooksTable,
) -> None:
    webhooks_table.counts().add(PromiseCount("ws_a", "2036-12-01", PromiseKind.REPLAYS, "spread"))

    (item,) = [i for i in webhooks_table.items() if i["pk"]["S"].startswith("PROMISE#")]
    keys = [promise_key("ws_a", shard, "2036-12-01") for shard in range(PROMISE_SHARDS)]
    assert {"pk": item["pk"], "sk": item["sk"]} in keys
    assert item["replays"] == {"N": "1"}
    assert int(item["expiresAt"]["N"]) == int(datetime(2037, 1, 5, tzinfo=UTC).timestamp())


def test_given_two_changes_recorded_at_once_from_one_previous_then_one_is_told(webhooks: Webhooks) -> None:
    store = webhooks.store
    message_id = new_message_id()
    events = [
        _event(message_id=message_id, at=NOW + timedelta(seconds=i), kind=EventType.QUEUED) for i in range(2)
    ]

    answers = race(2, lambda i: store.record(events[i], _position(100 + i), None))

    assert sorted(answers, key=str) == [False, True], answers
    told = events[answers.index(True)]
    assert store.event("ws_a", told.id) == told
    assert store.event("ws_a", events[answers.index(False)].id) is None
    assert store.applied(message_id) == Applied(1, _position(100 + answers.index(True)))


def test_given_conflicts_on_the_first_tries_then_record_writes_once(webhooks_table: WebhooksTable) -> None:
    client = webhooks_table.engine.new_client()
    calls = conflicts(client, 2)
    event = _event()

    assert webhooks_table.store_of(client).record(event, _position(100), None) is True

    assert len(calls) == 3
    assert webhooks_table.store.event("ws_a", event.id) == event


def test_given_an_event_then_it_and_applied_expire_30_days_after_the_change(
    webhooks_table: WebhooksTable,
) -> None:
    event = _recorded(webhooks_table, _event(at=NOW + timedelta(minutes=5)), _position(100))
    blocked = _recorded(webhooks_table, _event(kind=EventType.DUPLICATE_BLOCKED, sequence=None), _position(7))
    expected = int((NOW + timedelta(minutes=5)).timestamp()) + RETENTION_SECONDS

    stored = webhooks_table.item(f"EVT#{event.id}", "EVENT")
    applied = webhooks_table.item(f"MSG#{event.message_id}", "APPLIED")
    stored_blocked = webhooks_table.item(f"EVT#{blocked.id}", "EVENT")
    assert stored is not None
    assert applied is not None
    assert stored_blocked is not None
    assert int(stored["expiresAt"]["N"]) == expected
    assert int(applied["expiresAt"]["N"]) == expected
    assert int(stored_blocked["expiresAt"]["N"]) == int(NOW.timestamp()) + RETENTION_SECONDS
    ttl = webhooks_table.engine.client.describe_time_to_live(TableName=TABLE)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == "expiresAt"


# ---------------------------------------------------------------------------- events
def _page_through(
    webhooks: Webhooks,
    workspace: str,
    limit: int,
    message_id: str | None = None,
    event_type: EventType | None = None,
) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = webhooks.store.events(
            workspace, message_id=message_id, event_type=event_type, limit=limit, cursor=cursor
        )
        pages.append([event.id for event in page.events])
        assert len(pages) < 100, pages
        if page.next_cursor is None:
            return pages
        assert page.next_cursor == page.events[-1].id
        cursor = page.next_cursor


def test_given_events_then_pages_give_each_once_newest_first(webhooks: Webhooks) -> None:
    events = [
        _recorded(webhooks, _event(at=NOW + timedelta(seconds=i), sequence=None), _position(i))
        for i in range(7)
    ]
    _recorded(webhooks, _event(workspace="ws_b", at=NOW + timedelta(hours=1), sequence=None), _position(9))
    newest_first = [e.id for e in reversed(events)]

    assert _page_through(webhooks, "ws_a", 3) == [newest_first[0:3], newest_first[3:6], newest_first[6:]]
    assert _page_through(webhooks, "ws_a", 7) == [newest_first]
    assert _page_through(webhooks, "ws_a", 100) == [newest_first]
    assert _page_through(webhooks, "ws_c", 3) == [[]]
    whole = webhooks.store.events("ws_a", message_id=None, event_type=None, limit=2, cursor=None)
    assert whole.events == list(reversed(events))[:2]


@pytest.mark.parametrize("read", [dynamodb_webhooks.FILTERED_READ, 5])
def test_given_a_type_filter_then_pages_are_full_across_many_events_of_other_types(
    webhooks: Webhooks, monkeypatch: pytest.MonkeyPatch, read: int
) -> None:
    monkeypatch.setattr(dynamodb_webhooks, "FILTERED_READ", read)  # 5: many reads to one page
    wanted: list[str] = []
    for i in range(60):
        kind = EventType.DELIVERED if i % 12 == 0 else EventType.SENT
        event = _recorded(
            webhooks, _event(at=NOW + timedelta(seconds=i), kind=kind, sequence=None), _position(i)
        )
        if kind is EventType.DELIVERED:
            wanted.append(event.id)
    wanted.reverse()

    pages = _page_through(webhooks, "ws_a", 2, event_type=EventType.DELIVERED)

    assert pages == [wanted[0:2], wanted[2:4], wanted[4:]]
    assert _page_through(webhooks, "ws_a", 5, event_type=EventType.FAILED) == [[]]


def test_given_a_message_id_then_its_events_page_through_the_index_in_its_workspace_only(
    webhooks: Webhooks,
) -> None:
    message_id = new_message_id()
    ours: list[str] = []
    for i in range(5):
        event = _event(message_id=message_id, at=NOW + timedelta(seconds=i), sequence=i + 1)
        previous = webhooks.store.applied(message_id)
        ours.append(_recorded(webhooks, event, _position(i), previous).id)
        # Others' events in between, in this workspace and in another one under the same message id.
        _recorded(webhooks, _event(at=NOW + timedelta(seconds=i), sequence=None), _position(i))
        theirs = _event(workspace="ws_b", message_id=message_id, at=NOW + timedelta(seconds=i), sequence=None)
        _recorded(webhooks, theirs, _position(i))
    ours.reverse()

    assert _page_through(webhooks, "ws_a", 2, message_id=message_id) == [ours[0:2], ours[2:4], ours[4:]]
    assert _page_through(webhooks, "ws_a", 2, message_id=message_id, event_type=EventType.SENT) == [
        ours[0:2],
        ours[2:4],
        ours[4:],
    ]
    assert _page_through(webhooks, "ws_c", 2, message_id=message_id) == [[]]
    assert _page_through(webhooks, "ws_a", 2, message_id=new_message_id()) == [[]]
    assert len(_page_through(webhooks, "ws_b", 10, message_id=message_id)[0]) == 5


@pytest.mark.parametrize("cursor", ["nonsense", "msg_01KB0000000000000000000000", "evt_", "evt_" + "u" * 26])
def test_given_a_bad_cursor_then_invalid_cursor(webhooks: Webhooks, cursor: str) -> None:
    with pytest.raises(InvalidCursor):
        webhooks.store.events("ws_a", message_id=None, event_type=None, limit=5, cursor=cursor)
    with pytest.raises(InvalidCursor):
        webhooks.store.events("ws_a", message_id=new_message_id(), event_type=None, limit=5, cursor=cursor)


def test_given_events_larger_than_a_1_mb_read_then_pages_are_still_full(webhooks: Webhooks) -> None:
    body = "x" * 300_000  # about three events to a read of 1 MB
    events = [
        _recorded(webhooks, _event(at=NOW + timedelta(seconds=i), sequence=None, body=body), _position(i))
        for i in range(9)
    ]
    newest_first = [e.id for e in reversed(events)]

    pages = _page_through(webhooks, "ws_a", 5)

    assert pages == [newest_first[0:5], newest_first[5:]]
    first = webhooks.store.events("ws_a", message_id=None, event_type=None, limit=5, cursor=None)
    assert all(event.message["body"] == body for event in first.events)


def _events_on_every_shard(kinds: Sequence[EventType] = (EventType.SENT,)) -> list[Event]:
    """Events a millisecond apart, oldest first, one on each shard of the ByWorkspace index, their
    types taken in turn from `kinds`."""
    events: list[Event] = []
    taken: set[int] = set()
    moment = int(NOW.timestamp() * 1000)
    while len(taken) < EVENT_SHARDS:
        moment += 1
        candidate = _event(sequence=None, kind=kinds[len(events) % len(kinds)])
        candidate = replace(candidate, id=EVENT_PREFIX + ulid(moment))
        if shard_of(candidate.id, EVENT_SHARDS) not in taken:
            taken.add(shard_of(candidate.id, EVENT_SHARDS))
            events.append(candidate)
    return events


def _seed(webhooks: WebhooksTable, events: Sequence[Event]) -> None:
    """Events as the store writes them (its own item images), 25 a request: many at once."""
    for start in range(0, len(events), 25):
        puts = [{"PutRequest": {"Item": event_item(event)}} for event in events[start : start + 25]]
        webhooks.engine.client.batch_write_item(RequestItems={TABLE: puts})


def test_given_events_on_every_shard_then_pages_are_newest_first_and_reach_each_once(
    webhooks_table: WebhooksTable,
) -> None:
    events = _events_on_every_shard((EventType.SENT, EventType.SENT, EventType.DELIVERED))
    _seed(webhooks_table, events)
    newest_first = [event.id for event in reversed(events)]
    delivered = [event.id for event in reversed(events) if event.type is EventType.DELIVERED]

    pages = _page_through(webhooks_table, "ws_a", 50)
    filtered = _page_through(webhooks_table, "ws_a", 20, event_type=EventType.DELIVERED)

    assert [len(page) for page in pages] == [50, 50, EVENT_SHARDS - 100]
    assert [event_id for page in pages for event_id in page] == newest_first
    assert [len(page) for page in filtered[:-1]] == [20] * (len(filtered) - 1)
    assert [event_id for page in filtered for event_id in page] == delivered
    assert _page_through(webhooks_table, "ws_b", 50) == [[]]


def test_given_events_recorded_between_pages_then_none_repeats_and_none_that_existed_is_missed(
    webhooks_table: WebhooksTable,
) -> None:
    existing = _events_on_every_shard()
    _seed(webhooks_table, existing)
    seen: list[str] = []
    later: list[str] = []
    cursor: str | None = None
    for page_number in range(100):
        page = webhooks_table.store.events("ws_a", message_id=None, event_type=None, limit=30, cursor=cursor)
        seen.extend(event.id for event in page.events)
        cursor = page.next_cursor
        if cursor is None:
            break
        for at in (NOW + timedelta(days=1), NOW - timedelta(days=1)):  # clocks ahead and behind
            fresh = _recorded(
                webhooks_table, _event(at=at + timedelta(seconds=page_number), sequence=None), "0"
            )
            later.append(fresh.id)

    assert len(seen) == len(set(seen)), "an event was listed twice"
    assert {event.id for event in existing} <= set(seen), "an event that existed was missed"
    assert seen == sorted(seen, reverse=True)
    assert {event_id for event_id in later if event_id < existing[0].id} <= set(seen)


def test_an_event_is_listed_through_its_shard_and_read_by_its_own_key(webhooks_table: WebhooksTable) -> None:
    event = _recorded(webhooks_table, _event(), _position(1))

    stored = webhooks_table.item(f"EVT#{event.id}", "EVENT")

    assert stored is not None
    assert stored["workspaceShard"]["S"] == f"ws_a#{shard_of(event.id, EVENT_SHARDS)}"
    assert webhooks_table.store.event("ws_b", event.id) is None  # another workspace's event is not found
    webhooks_table.store.record_attempt("ws_b", event.id, "whep_one", _succeeded(NOW))
    assert webhooks_table.store.reopen("ws_b", event.id, ["whep_one"]) is None
    assert _delivery(webhooks_table, event, "whep_one") == Delivery("whep_one")


# ---------------------------------------------------------------------------- attempts
def test_given_attempts_at_once_then_every_one_is_counted(webhooks: Webhooks) -> None:
    store = webhooks.store
    event = _recorded(webhooks, _event(endpoints=("whep_one", "whep_two")), _position(1))
    at = NOW + timedelta(seconds=5)

    answers = race(CONTENDERS, lambda _: store.record_attempt("ws_a", event.id, "whep_one", _failed(at)))

    assert answers == [None] * CONTENDERS
    delivery = _delivery(webhooks, event, "whep_one")
    assert delivery == Delivery("whep_one", DeliveryStatus.PENDING, CONTENDERS, at, 500)
    assert _delivery(webhooks, event, "whep_two") == Delivery("whep_two")


def test_given_a_success_then_a_later_failure_never_overrides_it(webhooks: Webhooks) -> None:
    store = webhooks.store
    event = _recorded(webhooks, _event(), _position(1))
    store.record_attempt("ws_a", event.id, "whep_one", _failed(NOW + timedelta(seconds=1), status=None))
    assert _delivery(webhooks, event, "whep_one") == Delivery(
        "whep_one", DeliveryStatus.PENDING, 1, NOW + timedelta(seconds=1), None
    )

    store.record_attempt("ws_a", event.id, "whep_one", _succeeded(NOW + timedelta(seconds=6)))
    store.record_attempt("ws_a", event.id, "whep_one", _failed(NOW + timedelta(seconds=7), final=True))

    assert _delivery(webhooks, event, "whep_one") == Delivery(
        "whep_one", DeliveryStatus.SUCCEEDED, 2, NOW + timedelta(seconds=6), 204
    )


def test_given_one_success_among_failures_at_once_then_the_delivery_ends_succeeded(
    webhooks: Webhooks,
) -> None:
    store = webhooks.store
    event = _recorded(webhooks, _event(), _position(1))
    at = NOW + timedelta(seconds=5)

    answers = race(
        CONTENDERS,
        lambda i: store.record_attempt(
            "ws_a", event.id, "whep_one", _succeeded(at) if i == CONTENDERS // 2 else _failed(at, final=True)
        ),
    )

    assert answers == [None] * CONTENDERS
    delivery = _delivery(webhooks, event, "whep_one")
    assert delivery.status is DeliveryStatus.SUCCEEDED
    assert 1 <= delivery.attempts <= CONTENDERS


def test_given_a_final_failure_then_the_delivery_is_failed_with_its_response(webhooks: Webhooks) -> None:
    store = webhooks.store
    event = _recorded(webhooks, _event(), _position(1))
    store.record_attempt("ws_a", event.id, "whep_one", _failed(NOW + timedelta(seconds=1), status=503))

    store.record_attempt(
        "ws_a", event.id, "whep_one", _failed(NOW + timedelta(hours=30), final=True, status=410)
    )

    assert _delivery(webhooks, event, "whep_one") == Delivery(
        "whep_one", DeliveryStatus.FAILED, 2, NOW + timedelta(hours=30), 410
    )


def test_given_a_delivery_ended_without_a_request_then_no_attempt_is_counted(webhooks: Webhooks) -> None:
    store = webhooks.store
    event = _recorded(webhooks, _event(), _position(1))
    store.record_attempt("ws_a", event.id, "whep_one", _failed(NOW + timedelta(seconds=1), status=503))

    store.record_attempt(
        "ws_a",
        event.id,
        "whep_one",
        Attempt(NOW + timedelta(hours=1), None, succeeded=False, final=True, made=False),
    )

    assert _delivery(webhooks, event, "whep_one") == Delivery(
        "whep_one", DeliveryStatus.FAILED, 1, NOW + timedelta(seconds=1), 503
    )


def test_given_no_such_delivery_or_event_then_an_attempt_writes_nothing(webhooks: Webhooks) -> None:
    store = webhooks.store
    event = _recorded(webhooks, _event(), _position(1))
    before = webhooks.snapshot()

    store.record_attempt("ws_a", event.id, "whep_other", _failed(NOW))
    store.record_attempt("ws_b", event.id, "whep_one", _succeeded(NOW))
    store.record_attempt("ws_a", _event_id(NOW), "whep_one", _succeeded(NOW))

    assert webhooks.snapshot() == before


# ---------------------------------------------------------------------------- reopen
def test_given_finished_deliveries_then_reopen_makes_them_pending_and_keeps_their_attempts(
    webhooks: Webhooks,
) -> None:
    store = webhooks.store
    event = _recorded(webhooks, _event(endpoints=("whep_one", "whep_two")), _position(1))
    store.record_attempt("ws_a", event.id, "whep_one", _failed(NOW, status=500))
    store.record_attempt(
        "ws_a", event.id, "whep_one", _failed(NOW + timedelta(hours=1), final=True, status=404)
    )
    store.record_attempt("ws_a", event.id, "whep_two", _succeeded(NOW))

    reopened = store.reopen("ws_a", event.id, ["whep_one", "whep_two", "whep_new"])

    assert reopened is not None
    assert reopened == store.event("ws_a", event.id)
    assert list(reopened.deliveries) == [
        Delivery("whep_new", DeliveryStatus.PENDING, 0),
        Delivery("whep_one", DeliveryStatus.PENDING, 2, NOW + timedelta(hours=1), 404),
        Delivery("whep_two", DeliveryStatus.PENDING, 1, NOW, 204),
    ]
    assert reopened.message == event.message


def test_given_one_endpoint_then_reopen_leaves_the_other_deliveries_alone(webhooks: Webhooks) -> None:
    store = webhooks.store
    event = _recorded(webhooks, _event(endpoints=("whep_one", "whep_two")), _position(1))
    store.record_attempt("ws_a", event.id, "whep_one", _succeeded(NOW))
    store.record_attempt("ws_a", event.id, "whep_two", _succeeded(NOW))

    reopened = store.reopen("ws_a", event.id, ["whep_two"])

    assert reopened is not None
    assert reopened.delivery("whep_one") == Delivery("whep_one", DeliveryStatus.SUCCEEDED, 1, NOW, 204)
    assert reopened.delivery("whep_two") == Delivery("whep_two", DeliveryStatus.PENDING, 1, NOW, 204)
    assert store.reopen("ws_a", event.id, []) == reopened


def test_given_no_such_event_then_reopen_is_none_and_writes_nothing(webhooks: Webhooks) -> None:
    store = webhooks.store
    event = _recorded(webhooks, _event(), _position(1))
    before = webhooks.snapshot()

    assert store.reopen("ws_b", event.id, ["whep_one"]) is None
    assert store.reopen("ws_a", _event_id(NOW), ["whep_one"]) is None
    assert store.reopen("ws_a", "evt_nonsense", ["whep_one"]) is None

    assert webhooks.snapshot() == before
