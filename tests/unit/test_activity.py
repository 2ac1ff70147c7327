"""The activity context: a message's timeline and the promise's daily counts, on fakes.

- `timeline` puts everything recorded of a message in the order it happened: its creation, its
  provider attempts, the provider events recorded against it, each status told and each duplicate
  blocked, and each event's status-webhook deliveries.
- `promise_count_of` says what a change the stream tells counts: a message leaving `accepted` (or
  created past it) is new, on the day it was created; a duplicate blocked, on the day it was; a
  message the dispatcher refused for a suppressed recipient; nothing else.
- Through the real handler: a replay and a send refused for a suppressed recipient are counted
  where the API answers them, a new send counts nothing at the API (its count comes from the
  stream); a batch counts its items; a count that cannot be written never changes an answer.
- `GET /v1/messages` filters by channel and recipient; `GET /v1/messages/{id}/timeline` is the
  workspace's message only.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import pytest
from msgspec.structs import replace
from sendonce import composition
from sendonce.activity.counts import PromiseKind, last_days, promise_count_of
from sendonce.activity.model import EntryKind, RecordedProviderEvent, timeline
from sendonce.activity.service import ActivityService
from sendonce.api import dependencies
from sendonce.api.answers import send_answer
from sendonce.api.app import handle
from sendonce.messages.batch import BatchSender
from sendonce.messages.model import (
    AttemptOutcome,
    Channel,
    Message,
    MessageFailure,
    ProviderAttempt,
    Status,
)
from sendonce.messages.ports import MessageFilter
from sendonce.messages.service import MessageService
from sendonce.status_webhooks.model import Delivery, DeliveryStatus, Event
from sendonce.status_webhooks.rules import EventType
from sendonce.suppressions.model import Reason, Suppression
from sendonce.suppressions.service import SuppressionService

from tests.support.lambda_context import FakeLambdaContext
from tests.unit.unit_fakes import (
    T0,
    FakeQueue,
    InMemoryApiKeys,
    InMemoryPromiseCounts,
    InMemoryProviderEventLog,
    InMemoryStore,
    InMemoryWebhookStore,
    ManualClock,
    fake_api_dependencies,
    key_of,
)

WS, OTHER_WS = "ws_activity", "ws_other"
TODAY = T0.date().isoformat()
_BASE = json.loads(
    (Path(__file__).resolve().parents[2] / "events" / "api_get_message.json").read_text("utf-8")
)


def _message(**changes: Any) -> Message:
    made = Message(
        id="msg_01KDVDNA00QV9D1V5ZMBF8DBMW",
        workspace_id=WS,
        channel=Channel("sms"),
        to="+15550100000",
        body="hello",
        status=Status.DELIVERED,
        created_at=T0,
        updated_at=T0 + timedelta(seconds=9),
    )
    return replace(made, **changes)


def _event(kind: EventType, seconds: int, *deliveries: Delivery, event_id: str | None = None) -> Event:
    return Event(
        id=event_id or f"evt_{kind.value}_{seconds}",
        workspace_id=WS,
        message_id=_message().id,
        type=kind,
        timestamp=T0 + timedelta(seconds=seconds),
        message={},
        sequence=None if kind is EventType.DUPLICATE_BLOCKED else 1,
        deliveries=deliveries,
    )


# ---------------------------------------------------------------------------- the timeline
def test_a_timeline_is_everything_recorded_in_the_order_it_happened() -> None:
    message = _message(
        provider_attempts=(
            ProviderAttempt("twilio", AttemptOutcome.UNKNOWN, T0 + timedelta(seconds=2)),
            ProviderAttempt("http", AttemptOutcome.ACCEPTED, T0 + timedelta(seconds=4)),
        )
    )
    events = [
        _event(
            EventType.DELIVERED,
            8,
            Delivery("whep_1", DeliveryStatus.SUCCEEDED, 1, T0 + timedelta(seconds=10), 204),
        ),
        _event(
            EventType.QUEUED, 0, Delivery("whep_1", DeliveryStatus.FAILED, 3, T0 + timedelta(seconds=7), 500)
        ),
        _event(EventType.DUPLICATE_BLOCKED, 5),
        _event(EventType.SENT, 4, Delivery("whep_2")),  # pending: shown at its event's time
    ]
    provider_events = [
        RecordedProviderEvent("http", "delivered", T0 + timedelta(seconds=8), "2026-01-01T12:00:08Z")
    ]

    entries = timeline(message, events, provider_events)

    assert [(int((e.at - T0).total_seconds()), e.kind, e.status or e.outcome or e.type) for e in entries] == [
        (0, EntryKind.CREATED, "queued"),
        (0, EntryKind.STATUS, "queued"),
        (2, EntryKind.PROVIDER_ATTEMPT, "unknown"),
        (4, EntryKind.STATUS, "sent"),
        (4, EntryKind.PROVIDER_ATTEMPT, "accepted"),
        (4, EntryKind.WEBHOOK_DELIVERY, "pending"),
        (5, EntryKind.DUPLICATE_BLOCKED, None),
        (7, EntryKind.WEBHOOK_DELIVERY, "failed"),
        (8, EntryKind.STATUS, "delivered"),
        (8, EntryKind.PROVIDER_EVENT, "delivered"),
        (10, EntryKind.WEBHOOK_DELIVERY, "succeeded"),
    ]
    failed = entries[7]
    assert (failed.event_id, failed.endpoint_id, failed.attempts, failed.response_status) == (
        "evt_message.queued_0",
        "whep_1",
        3,
        500,
    )


def test_a_message_created_before_its_first_told_status_was_created_accepted() -> None:
    message = _message(status=Status.QUEUED)
    assert timeline(message, [_event(EventType.QUEUED, 3)], [])[0].status == "accepted"
    assert timeline(message, [], [])[0].status == "queued"  # not told yet: the status it waits in
    assert timeline(_message(status=Status.SENT), [], [])[0].status == "accepted"


# ---------------------------------------------------------------------------- what the stream counts
@pytest.mark.parametrize(
    ("before", "after", "counted"),
    [
        (None, Status.QUEUED, PromiseKind.NEW_MESSAGES),
        (None, Status.SCHEDULED, PromiseKind.NEW_MESSAGES),
        (Status.ACCEPTED, Status.QUEUED, PromiseKind.NEW_MESSAGES),
        (Status.ACCEPTED, Status.CANCELED, PromiseKind.NEW_MESSAGES),
        (Status.SCHEDULED, Status.QUEUED, None),
        (Status.SENDING, Status.SENT, None),
        (Status.SENDING, Status.FAILED, None),
    ],
)
def test_a_message_is_new_once_when_it_leaves_accepted_or_is_created_past_it(
    before: Status | None, after: Status, counted: PromiseKind | None
) -> None:
    message = _message(
        status=after, error=MessageFailure("provider_error", "no") if after is Status.FAILED else None
    )
    found = promise_count_of(message, before, EventType.QUEUED, T0 + timedelta(days=1))

    assert (found.kind if found else None) is counted
    if found is not None:
        assert (found.workspace_id, found.day, found.count) == (WS, TODAY, 1)  # the day it was created


def test_a_duplicate_blocked_and_a_suppressed_refusal_count_on_the_day_they_happen() -> None:
    later = T0 + timedelta(days=1)
    blocked = promise_count_of(_message(), Status.DELIVERED, EventType.DUPLICATE_BLOCKED, later)
    refused = _message(status=Status.FAILED, error=MessageFailure("recipient_suppressed", "on the list"))
    suppressed = promise_count_of(refused, Status.SENDING, EventType.FAILED, later)

    assert blocked is not None
    assert (blocked.kind, blocked.day) == (PromiseKind.DUPLICATES_BLOCKED, later.date().isoformat())
    assert suppressed is not None
    assert (suppressed.kind, suppressed.day) == (PromiseKind.REFUSED_SUPPRESSED, later.date().isoformat())


def test_last_days_are_utc_days_newest_first() -> None:
    assert last_days(T0.replace(hour=23, minute=59), 3) == ["2026-01-01", "2025-12-31", "2025-12-30"]


# ---------------------------------------------------------------------------- through the handler
class Harness:
    def __init__(self) -> None:
        self.clock = ManualClock(T0)
        self.store = InMemoryStore()
        self.webhooks = InMemoryWebhookStore()
        self.counts: InMemoryPromiseCounts = self.webhooks.promise_counts
        self.provider_events = InMemoryProviderEventLog()
        self.messages = MessageService(self.store, FakeQueue(), timedelta(minutes=15), self.clock)
        self.answers: dict[tuple[str, str], dict[str, Any]] = {}
        batches = BatchSender(
            self.store, timedelta(minutes=15), self.clock, suppressions=self.store.suppressions
        )
        self.activity = ActivityService(
            self.messages, self.webhooks, self.provider_events, self.counts, self.clock
        )
        dependencies.root.use(
            fake_api_dependencies(
                self.messages,
                InMemoryApiKeys.of(WS, OTHER_WS),
                send_once=self._send_once,
                send_many=batches.send_many,
                suppressions=SuppressionService(self.store.suppressions, clock=self.clock),
                build_activity=lambda: self.activity,
            )
        )

    def _send_once(self, *, request: dict[str, Any], command: Any) -> dict[str, Any]:
        """Powertools' idempotency, as far as a replay goes: the first answer, marked replayed after."""
        key = (request["workspace"], request["key"])
        if key in self.answers:
            return {**self.answers[key], "replayed": True}
        self.answers[key] = send_answer(self.messages.send(command))
        return self.answers[key]

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        workspace: str = WS,
        query: str = "",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, Any]]:
        event = copy.deepcopy(_BASE)
        event["routeKey"] = event["requestContext"]["routeKey"] = f"{method} {path}"
        event["rawPath"] = event["requestContext"]["http"]["path"] = path
        event["requestContext"]["http"]["method"] = method
        event["rawQueryString"] = query
        # Decoded, as API Gateway passes them on.
        event["queryStringParameters"] = dict(parse_qsl(query)) if query else None
        event["headers"] = {"authorization": f"Bearer {key_of(workspace)}", **(headers or {})}
        event.pop("pathParameters", None)
        if body is not None:
            event["body"] = json.dumps(body)
            event["headers"]["content-type"] = "application/json"
        response = handle(event, FakeLambdaContext())  # type: ignore[arg-type]
        return response["statusCode"], json.loads(response["body"])

    def today(self, workspace: str = WS) -> dict[PromiseKind, int]:
        return self.counts.days(workspace, [TODAY])[0].counts


@pytest.fixture
def harness() -> Iterator[Harness]:
    yield Harness()
    composition.reset_all()


SMS = {"channel": "sms", "to": "+15550100000", "body": "Your code is 1234"}


def test_a_new_send_counts_nothing_at_the_api_and_its_replay_counts_one(harness: Harness) -> None:
    status, _ = harness.call("POST", "/v1/messages", SMS, headers={"idempotency-key": "k-1"})
    assert status == 201
    assert harness.today() == {}  # a new message is counted from the stream, with its event

    for _ in range(2):
        status, _ = harness.call("POST", "/v1/messages", SMS, headers={"idempotency-key": "k-1"})
        assert status == 201

    assert harness.today() == {PromiseKind.REPLAYS: 2}
    assert harness.today(OTHER_WS) == {}


def test_a_send_refused_for_a_suppressed_recipient_is_counted_keyed_or_not(harness: Harness) -> None:
    harness.store.suppressions.put(WS, Suppression(to="+15550100000", reason=Reason.MANUAL, created_at=T0))

    assert harness.call("POST", "/v1/messages", SMS)[0] == 422
    assert harness.call("POST", "/v1/messages", SMS, headers={"idempotency-key": "k-2"})[0] == 422

    assert harness.today() == {PromiseKind.REFUSED_SUPPRESSED: 2}


def test_a_batch_counts_its_replayed_and_its_refused_items(harness: Harness) -> None:
    harness.store.suppressions.put(WS, Suppression(to="+15550100009", reason=Reason.MANUAL, created_at=T0))
    keyed = {**SMS, "body": "keyed", "idempotencyKey": "b-1"}
    harness.call("POST", "/v1/messages", {**SMS, "body": "keyed"}, headers={"idempotency-key": "b-1"})
    items = [keyed, {**SMS, "to": "+15550100009"}, {**SMS, "to": "+15550100009", "body": "again"}, SMS]

    status, answer = harness.call("POST", "/v1/messages/batch", {"messages": items})

    assert status == 200, answer
    assert [r["status"] for r in answer["results"]] == [201, 422, 422, 201]
    assert harness.today() == {PromiseKind.REPLAYS: 1, PromiseKind.REFUSED_SUPPRESSED: 2}


def test_a_count_that_cannot_be_written_never_changes_the_answer(harness: Harness) -> None:
    harness.counts.fail = True
    harness.call("POST", "/v1/messages", SMS, headers={"idempotency-key": "k-3"})

    status, answer = harness.call("POST", "/v1/messages", SMS, headers={"idempotency-key": "k-3"})

    assert status == 201, answer
    assert harness.counts.counters == {}


def test_the_promise_lists_the_days_asked_newest_first_with_zeros(harness: Harness) -> None:
    harness.call("POST", "/v1/messages", SMS, headers={"idempotency-key": "k-4"})
    harness.call("POST", "/v1/messages", SMS, headers={"idempotency-key": "k-4"})

    status, answer = harness.call("GET", "/v1/promise", query="days=3")

    assert status == 200, answer
    assert answer["days"] == [
        {
            "date": "2026-01-01",
            "newMessages": 0,
            "replays": 1,
            "duplicatesBlocked": 0,
            "refusedSuppressed": 0,
        },
        {
            "date": "2025-12-31",
            "newMessages": 0,
            "replays": 0,
            "duplicatesBlocked": 0,
            "refusedSuppressed": 0,
        },
        {
            "date": "2025-12-30",
            "newMessages": 0,
            "replays": 0,
            "duplicatesBlocked": 0,
            "refusedSuppressed": 0,
        },
    ]
    assert harness.call("GET", "/v1/promise")[1]["days"][13]["date"] == "2025-12-19"  # 14 by default
    for bad in ("days=0", "days=32", "days=x"):
        assert harness.call("GET", "/v1/promise", query=bad)[0] == 400


def test_a_timeline_is_the_workspaces_message_only(harness: Harness) -> None:
    _, sent = harness.call("POST", "/v1/messages", SMS)
    message_id = sent["message"]["id"]
    harness.webhooks.event_items[(WS, "evt_1")] = replace(
        _event(EventType.QUEUED, 0, Delivery("whep_1", DeliveryStatus.SUCCEEDED, 1, T0, 200)),
        id="evt_1",
        message_id=message_id,
    )
    harness.provider_events.recorded[message_id] = [
        RecordedProviderEvent("http", "sent", T0 + timedelta(seconds=1))
    ]

    status, answer = harness.call("GET", f"/v1/messages/{message_id}/timeline")

    assert status == 200, answer
    assert answer["message"]["id"] == message_id
    assert answer["timeline"] == [
        {"at": "2026-01-01T12:00:00.000Z", "kind": "created", "status": "queued"},
        {"at": "2026-01-01T12:00:00.000Z", "kind": "status", "status": "queued", "eventId": "evt_1"},
        {
            "at": "2026-01-01T12:00:00.000Z",
            "kind": "webhook_delivery",
            "status": "succeeded",
            "eventId": "evt_1",
            "endpointId": "whep_1",
            "attempts": 1,
            "responseStatus": 200,
        },
        {"at": "2026-01-01T12:00:01.000Z", "kind": "provider_event", "provider": "http", "type": "sent"},
    ]
    assert harness.call("GET", f"/v1/messages/{message_id}/timeline", workspace=OTHER_WS)[0] == 404


# ---------------------------------------------------------------------------- the listing's filters
def test_messages_filter_by_channel_and_by_recipient_in_any_form(harness: Harness) -> None:
    ids = {}
    for name, body in {
        "sms": SMS,
        "other sms": {**SMS, "to": "+15550100001"},
        "email": {"channel": "email", "to": "Ann@Example.com", "subject": "Hi", "body": "hello"},
    }.items():
        ids[name] = harness.call("POST", "/v1/messages", body)[1]["message"]["id"]
        time.sleep(0.002)  # ids are ordered by the millisecond they were made in

    def listed(query: str) -> list[str]:
        status, answer = harness.call("GET", "/v1/messages", query=query)
        assert status == 200, answer
        return [m["id"] for m in answer["messages"]]

    assert listed("channel=email") == [ids["email"]]
    assert listed("channel=sms") == [ids["other sms"], ids["sms"]]
    assert listed("to=%2B1%20(555)%20010-0000") == [ids["sms"]]
    assert listed("to=ann%40example.com") == [ids["email"]]
    assert listed("to=ann%40example.com&channel=sms") == []
    assert harness.call("GET", "/v1/messages", query="channel=fax")[0] == 400
    assert harness.call("GET", "/v1/messages", query="to=nobody")[0] == 400


def test_a_filter_admits_a_message_that_names_the_recipient_among_others() -> None:
    email = _message(channel=Channel("email"), to="a@x.io", to_list=("a@x.io", "Bob@x.io"))

    assert MessageFilter(recipient="bob@x.io").admits(email)
    assert not MessageFilter(recipient="carol@x.io").admits(email)
    assert MessageFilter(channel="email", status=Status.DELIVERED).admits(email)
    assert not MessageFilter(campaign_id="cmp_1").admits(email)
