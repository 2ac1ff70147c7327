"""The customer's side of webhooks, through the API function's real handler on in-memory fakes.

- Bad input is a clear 400 and stores nothing: a URL that is not https, carries a user, or names
  (or resolves to) a private, loopback, link-local or metadata address; an 11th endpoint; an
  unknown event type.
- A secret is shown when the endpoint is added and when it is rotated, never again.
- Rotations apply one after another: one whose write finds another rotation written first is made
  again from it, so every secret answered is stored and every one it replaced signs for 24 hours;
  after MAX_ROTATION_TRIES lost races it is a 409 `rotation_conflict`, and past
  MAX_REPLACED_SECRETS replaced secrets a 429 `too_many_rotations`, with nothing rotated.
- Another workspace's endpoint or event is 404, for every operation.
- `GET /v1/events` pages newest first and filters by message and type; a redelivery queues the
  event again with its id, on a schedule of its own.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace
from sendonce import composition
from sendonce.api import dependencies
from sendonce.api.app import handle
from sendonce.entrypoints.shared.webhook_sending import target_checker
from sendonce.errors import EndpointNotFound, EventNotFound, InvalidEndpoint, TooManyRotations
from sendonce.messages.ids import ulid
from sendonce.messages.service import MessageService
from sendonce.status_webhooks.delivery import DeliveryOutcome, EndpointAnswer, WebhookDeliverer
from sendonce.status_webhooks.model import (
    MAX_ENDPOINTS,
    Delivery,
    DeliveryStatus,
    Endpoint,
    Event,
    SigningSecret,
    new_secret,
)
from sendonce.status_webhooks.outbound import check_url
from sendonce.status_webhooks.ports import DeliveryTask
from sendonce.status_webhooks.rules import (
    MAX_REPLACED_SECRETS,
    ROTATION_OVERLAP,
    EventType,
)
from sendonce.status_webhooks.service import MAX_ROTATION_TRIES, WebhookService

from tests.support.lambda_context import FakeLambdaContext
from tests.unit.unit_fakes import (
    T0,
    FakeDeliveryQueue,
    FakeQueue,
    InMemoryApiKeys,
    InMemoryStore,
    InMemoryWebhookStore,
    ManualClock,
    fake_api_dependencies,
    key_of,
)

EVENTS = Path(__file__).resolve().parents[2] / "events"
WS = "ws_local"  # the workspace of the events/ files' API key
OTHER_WS = "ws_other"
HOOK = "https://hooks.example.com/sendonce"
# What the fake DNS answers: public names resolve to a public address, the rest to what they spell.
DNS = {
    "hooks.example.com": ["93.184.215.14"],
    "internal.example.com": ["10.1.2.3"],
    "mixed.example.com": ["93.184.215.14", "127.0.0.1"],
    "metadata.example.com": ["169.254.169.254"],
}


def resolve(host: str, port: int) -> list[str]:
    return DNS.get(host, ["93.184.215.14"])


@dataclass
class Fakes:
    store: InMemoryWebhookStore
    queue: FakeDeliveryQueue
    clock: ManualClock
    service: WebhookService


def build(allow_private: bool = False) -> Fakes:
    store, queue, clock = InMemoryWebhookStore(), FakeDeliveryQueue(), ManualClock()
    service = WebhookService(
        endpoints=store,
        events=store,
        queue=queue,
        check_target=partial(check_url, allow_private=allow_private, resolve=resolve),
        clock=clock,
    )
    return Fakes(store, queue, clock, service)


@pytest.fixture
def fakes() -> Iterator[Fakes]:
    built = build()
    dependencies.root.use(
        fake_api_dependencies(
            MessageService(
                store=InMemoryStore(),
                queue=FakeQueue(),
                dedup_window=timedelta(minutes=15),
                clock=ManualClock(),
            ),
            InMemoryApiKeys.of(WS, OTHER_WS),
            build_webhooks=lambda: built.service,
        )
    )
    yield built
    composition.reset_all()


_BASE = json.loads((EVENTS / "api_get_message.json").read_text(encoding="utf-8"))


def respond(
    method: str,
    path: str,
    body: Any = None,
    *,
    query: dict[str, str] | None = None,
    workspace: str = WS,
    raw: str | None = None,
) -> dict[str, Any]:
    """The API function's handler, as API Gateway calls it for this request: its whole answer."""
    event = copy.deepcopy(_BASE)
    event["routeKey"] = event["requestContext"]["routeKey"] = f"{method} {path}"
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    event["headers"]["authorization"] = f"Bearer {key_of(workspace)}"
    event.pop("pathParameters", None)
    text = raw if raw is not None else json.dumps(body) if body is not None else None
    if text is not None:
        event["body"] = text
        event["headers"]["content-type"] = "application/json"
        event["headers"]["content-length"] = str(len(text.encode()))
    if query:
        event["rawQueryString"] = "&".join(f"{k}={v}" for k, v in query.items())
        event["queryStringParameters"] = dict(query)
    response: dict[str, Any] = handle(event, FakeLambdaContext())  # type: ignore[arg-type]
    return response


def call(method: str, path: str, body: Any = None, **options: Any) -> tuple[int, dict[str, Any]]:
    """The handler's status and body for this request."""
    response = respond(method, path, body, **options)
    return response["statusCode"], json.loads(response["body"])


def add(url: str = HOOK, **extra: Any) -> tuple[int, dict[str, Any]]:
    return call("POST", "/v1/webhook-endpoints", {"url": url, **extra})


def added(url: str = HOOK, **extra: Any) -> dict[str, Any]:
    status, body = add(url, **extra)
    assert status == 201, body
    endpoint: dict[str, Any] = body["endpoint"]
    return endpoint


def _shown_message(message_id: str) -> dict[str, Any]:
    """A message as the recorder stores it in an event: as the API showed it then."""
    return {
        "id": message_id,
        "channel": "sms",
        "to": "+15550100000",
        "subject": None,
        "body": "hi",
        "encoding": "GSM-7",
        "segments": 1,
        "status": "queued",
        "sendAt": None,
        "metadata": {},
        "idempotencyKey": None,
        "attempts": 0,
        "provider": None,
        "providerAttempts": [],
        "error": None,
        "createdAt": "2026-01-01T12:00:00.000Z",
        "updatedAt": "2026-01-01T12:00:00.000Z",
    }


def stored_event(
    fakes: Fakes, number: int, message_id: str = "msg_01KDVDNA00QV9D1V5ZMBF8DBMW", **changes: Any
) -> Event:
    """An event as the recorder writes it, its id ordered by `number`."""
    event = Event(
        id="evt_" + ulid(int(T0.timestamp() * 1000) + number, number),
        workspace_id=WS,
        message_id=message_id,
        type=EventType.QUEUED,
        timestamp=T0 + timedelta(seconds=number),
        message=_shown_message(message_id),
        sequence=number,
    )
    event = replace(event, **changes)
    fakes.store.event_items[(event.workspace_id, event.id)] = event
    return event


# ---------------------------------------------------------------------------- bad input: 400, nothing stored
@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/sendonce",  # not https
        "https://user:secret@hooks.example.com/sendonce",  # userinfo
        "https://user@hooks.example.com/sendonce",
        "https://127.0.0.1/hooks",
        "https://127.1/hooks",  # short form
        "https://2130706433/hooks",  # decimal
        "https://0177.0.0.1/hooks",  # octal
        "https://0x7f.0.0.1/hooks",  # hex
        "https://10.0.0.8/hooks",
        "https://192.168.1.1/hooks",
        "https://172.16.0.1/hooks",
        "https://100.64.0.1/hooks",  # shared address space
        "https://169.254.169.254/latest/meta-data",  # metadata
        "https://[::1]/hooks",
        "https://[::ffff:127.0.0.1]/hooks",  # IPv4-mapped IPv6
        "https://[fd00:ec2::254]/hooks",
        "https://[fe80::1]/hooks",
        "https://0.0.0.0/hooks",
        "https://localhost/hooks",
        "https://internal.example.com/hooks",  # resolves to a private address
        "https://mixed.example.com/hooks",  # one of its addresses is loopback
        "https://metadata.example.com/hooks",
        "ftp://hooks.example.com/sendonce",
        "hooks.example.com/sendonce",
        "https:///nohost",
        "https://hooks.example.com/" + "x" * 2100,
    ],
)
def test_a_url_that_may_not_be_a_target_is_a_400_and_stores_nothing(fakes: Fakes, url: str) -> None:
    status, body = add(url)

    assert status == 400, body
    assert body["success"] is False
    assert body["error"]["code"] == "validation_error"
    assert body["error"]["details"][0]["field"] == "url"
    assert body["error"]["details"][0]["message"]
    assert fakes.store.endpoint_items == {}


def test_the_reason_a_url_is_refused_is_told(fakes: Fakes) -> None:
    _, body = add("https://10.0.0.8/hooks")
    assert "10.0.0.8" in body["error"]["details"][0]["message"]

    _, body = add("http://hooks.example.com/sendonce")
    assert "https" in body["error"]["details"][0]["message"]


def test_with_private_targets_allowed_a_loopback_http_url_is_taken() -> None:
    local = build(allow_private=True)

    endpoint = local.service.add_endpoint(WS, "http://127.0.0.1:8080/hooks", None, None)

    assert endpoint.url == "http://127.0.0.1:8080/hooks"
    with pytest.raises(InvalidEndpoint):  # the metadata addresses stay refused even then
        local.service.add_endpoint(WS, "http://169.254.169.254/", None, None)


def test_the_eleventh_endpoint_is_a_400_and_is_not_stored(fakes: Fakes) -> None:
    first = [added(f"{HOOK}/{n}")["id"] for n in range(MAX_ENDPOINTS)]

    status, body = add(f"{HOOK}/11")

    assert status == 400
    assert body["error"]["code"] == "validation_error"
    assert "10" in body["error"]["details"][0]["message"]
    assert sorted(e.id for e in fakes.store.endpoints(WS)) == sorted(first)
    # Another workspace has its own ten; a deleted endpoint makes room again.
    assert fakes.service.add_endpoint(OTHER_WS, HOOK, None, None).workspace_id == OTHER_WS
    assert call("DELETE", f"/v1/webhook-endpoints/{first[0]}")[0] == 200
    assert add(f"{HOOK}/11")[0] == 201


@pytest.mark.parametrize(
    "body",
    [
        {"url": HOOK, "eventTypes": ["message.exploded"]},
        {"url": HOOK, "eventTypes": ["message.sent", "sent"]},
        {"url": HOOK, "eventTypes": []},
        {"url": HOOK, "eventTypes": "message.sent"},
        {"url": HOOK, "eventTypes": [None]},
        {"url": HOOK, "eventTypes": [{}]},  # found by the e2e fuzzer: once a 503
        {"url": HOOK, "eventTypes": [["message.sent"]]},
        {"url": HOOK, "secret": "whsec_mine"},  # a secret is never the customer's to choose
        {"url": 42},
        {"eventTypes": ["message.sent"]},
        {"url": ""},
        {"url": HOOK, "description": "x" * 501},
    ],
)
def test_a_bad_body_is_a_400_and_stores_nothing(fakes: Fakes, body: dict[str, Any]) -> None:
    status, answer = call("POST", "/v1/webhook-endpoints", body)

    assert status == 400, answer
    assert answer["error"]["code"] == "validation_error"
    assert fakes.store.endpoint_items == {}


def test_an_unknown_event_type_is_named_in_the_answer(fakes: Fakes) -> None:
    _, answer = add(eventTypes=["message.sent", "message.exploded"])

    assert "message.exploded" in json.dumps(answer["error"]["details"])


# ---------------------------------------------------------------------------- endpoints
def test_an_added_endpoint_shows_its_secret_once(fakes: Fakes) -> None:
    status, body = add(eventTypes=["message.sent", "message.failed", "message.sent"], description="CRM")

    assert status == 201
    endpoint = body["endpoint"]
    assert endpoint["id"].startswith("whep_")
    assert endpoint["url"] == HOOK
    assert endpoint["eventTypes"] == ["message.sent", "message.failed"]
    assert endpoint["description"] == "CRM"
    assert endpoint["createdAt"] == "2026-01-01T12:00:00.000Z"
    assert endpoint["secret"].startswith("whsec_")

    status, listed = call("GET", "/v1/webhook-endpoints")
    assert status == 200
    assert listed["endpoints"] == [{k: v for k, v in endpoint.items() if k != "secret"}]
    status, got = call("GET", f"/v1/webhook-endpoints/{endpoint['id']}")
    assert status == 200
    assert got["endpoint"] == listed["endpoints"][0]
    assert endpoint["secret"] not in json.dumps([listed, got])


def test_an_endpoint_without_event_types_wants_every_type(fakes: Fakes) -> None:
    endpoint = added()

    assert endpoint["eventTypes"] is None
    stored = fakes.store.endpoint(WS, endpoint["id"])
    assert stored is not None
    assert all(stored.wants(t) for t in EventType)


def test_a_rotation_shows_the_new_secret_once_and_signs_with_both_for_24_hours(fakes: Fakes) -> None:
    endpoint = added()
    fakes.clock.advance(60)

    status, body = call("POST", f"/v1/webhook-endpoints/{endpoint['id']}/rotate-secret")

    assert status == 200
    new = body["endpoint"]["secret"]
    assert new.startswith("whsec_")
    assert new != endpoint["secret"]
    stored = fakes.store.endpoint(WS, endpoint["id"])
    assert stored is not None
    assert stored.signing_secrets(fakes.clock.now) == (new, endpoint["secret"])
    assert stored.secrets[1] == SigningSecret(endpoint["secret"], fakes.clock.now + ROTATION_OVERLAP)
    _, got = call("GET", f"/v1/webhook-endpoints/{endpoint['id']}")
    assert "secret" not in got["endpoint"]


def test_a_deleted_endpoint_is_gone(fakes: Fakes) -> None:
    endpoint = added()

    assert call("DELETE", f"/v1/webhook-endpoints/{endpoint['id']}") == (200, {"success": True})

    assert call("GET", f"/v1/webhook-endpoints/{endpoint['id']}")[0] == 404
    assert call("DELETE", f"/v1/webhook-endpoints/{endpoint['id']}")[0] == 404
    assert call("POST", f"/v1/webhook-endpoints/{endpoint['id']}/rotate-secret")[0] == 404
    assert call("GET", "/v1/webhook-endpoints")[1]["endpoints"] == []


@pytest.mark.parametrize(
    ("method", "suffix"),
    [("GET", ""), ("DELETE", ""), ("POST", "/rotate-secret")],
    ids=["get", "delete", "rotate"],
)
def test_another_workspaces_endpoint_is_404(fakes: Fakes, method: str, suffix: str) -> None:
    endpoint = added()

    status, body = call(method, f"/v1/webhook-endpoints/{endpoint['id']}{suffix}", workspace=OTHER_WS)

    assert status == 404
    assert body["error"]["code"] == "not_found"
    assert fakes.store.endpoint(WS, endpoint["id"]) is not None  # untouched
    assert call("GET", "/v1/webhook-endpoints", workspace=OTHER_WS)[1]["endpoints"] == []


def test_a_rotation_of_an_endpoint_deleted_meanwhile_is_not_found() -> None:
    local = build()
    endpoint = local.service.add_endpoint(WS, HOOK, None, None)
    local.store.before_replace.append(lambda: local.store.delete_endpoint(WS, endpoint.id))

    with pytest.raises(EndpointNotFound):
        local.service.rotate_secret(WS, endpoint.id)

    assert local.store.endpoint_items == {}  # not brought back


# ---------------------------------------------------------------------------- rotations at once
def rival_rotation(fakes: Fakes, endpoint_id: str, answered: list[str]) -> Any:
    """Another request's rotation, written between this one's read and its write (its secret
    appended to `answered`, as its 200 would show it)."""

    def rotate() -> None:
        current = fakes.store.endpoint_items[(WS, endpoint_id)]
        answered.append(new_secret())
        rotated = current.rotated(answered[-1], fakes.clock.now)
        fakes.store.endpoint_items[(WS, endpoint_id)] = replace(rotated, version=current.version + 1)

    return rotate


def other_write(fakes: Fakes, endpoint_id: str) -> Any:
    """Another write of the endpoint that is no rotation: it moves the version on, nothing else."""

    def write() -> None:
        current = fakes.store.endpoint_items[(WS, endpoint_id)]
        fakes.store.endpoint_items[(WS, endpoint_id)] = replace(current, version=current.version + 1)

    return write


def stored_endpoint(fakes: Fakes, endpoint_id: str) -> Endpoint:
    stored = fakes.store.endpoint(WS, endpoint_id)
    assert stored is not None
    return stored


def test_a_rotation_that_loses_a_race_is_applied_after_the_winner_and_both_secrets_sign(fakes: Fakes) -> None:
    endpoint = added()
    rivals: list[str] = []
    fakes.store.before_replace.append(rival_rotation(fakes, endpoint["id"], rivals))

    status, body = call("POST", f"/v1/webhook-endpoints/{endpoint['id']}/rotate-secret")

    assert status == 200, body
    ours = body["endpoint"]["secret"]
    stored = stored_endpoint(fakes, endpoint["id"])
    assert stored.signing_secrets(fakes.clock.now) == (ours, rivals[0], endpoint["secret"])
    assert [s.expires_at for s in stored.secrets] == [None] + [fakes.clock.now + ROTATION_OVERLAP] * 2
    assert stored.version == 3  # added, the rival's, ours


def test_a_rotation_that_loses_nine_races_in_a_row_is_stored_after_all_nine(fakes: Fakes) -> None:
    endpoint = added()
    rivals: list[str] = []
    fakes.store.before_replace.extend(rival_rotation(fakes, endpoint["id"], rivals) for _ in range(9))

    rotated = fakes.service.rotate_secret(WS, endpoint["id"])

    assert fakes.store.before_replace == []  # every try but the last lost
    stored = stored_endpoint(fakes, endpoint["id"])
    assert rotated == stored
    assert stored.signing_secrets(fakes.clock.now) == (
        rotated.secrets[0].value,
        *reversed(rivals),
        endpoint["secret"],
    )
    assert stored.version == 11


def test_a_rotation_that_loses_every_try_is_a_409_and_stores_no_secret_of_its_own(fakes: Fakes) -> None:
    endpoint = added()
    fakes.store.before_replace.extend(other_write(fakes, endpoint["id"]) for _ in range(MAX_ROTATION_TRIES))

    response = respond("POST", f"/v1/webhook-endpoints/{endpoint['id']}/rotate-secret")

    assert response["statusCode"] == 409, response
    assert json.loads(response["body"])["error"]["code"] == "rotation_conflict"
    assert response["headers"]["Retry-After"] == "1"
    assert fakes.store.before_replace == []
    stored = stored_endpoint(fakes, endpoint["id"])
    assert stored.signing_secrets(fakes.clock.now) == (endpoint["secret"],)
    assert stored.version == 1 + MAX_ROTATION_TRIES
    # Asked again, it is applied.
    status, body = call("POST", f"/v1/webhook-endpoints/{endpoint['id']}/rotate-secret")
    assert status == 200
    current = stored_endpoint(fakes, endpoint["id"]).signing_secrets(fakes.clock.now)
    assert current == (body["endpoint"]["secret"], endpoint["secret"])


def test_rotations_that_race_up_to_the_cap_end_in_a_429_not_a_409(fakes: Fakes) -> None:
    endpoint = added()
    rivals: list[str] = []
    rotate = rival_rotation(fakes, endpoint["id"], rivals)
    fakes.store.before_replace.extend(rotate for _ in range(MAX_REPLACED_SECRETS))

    with pytest.raises(TooManyRotations):
        fakes.service.rotate_secret(WS, endpoint["id"])

    assert MAX_ROTATION_TRIES > MAX_REPLACED_SECRETS  # the cap refuses before the tries run out
    stored = stored_endpoint(fakes, endpoint["id"])
    assert stored.signing_secrets(fakes.clock.now) == (*reversed(rivals), endpoint["secret"])


def test_a_rotation_past_the_cap_is_a_429_until_the_oldest_replaced_secret_stops_signing(
    fakes: Fakes,
) -> None:
    endpoint = added()
    answered = [endpoint["secret"]]
    for _ in range(MAX_REPLACED_SECRETS):
        fakes.clock.advance(600)
        status, body = call("POST", f"/v1/webhook-endpoints/{endpoint['id']}/rotate-secret")
        assert status == 200, body
        answered.append(body["endpoint"]["secret"])
    first_stops = T0 + timedelta(seconds=600) + ROTATION_OVERLAP  # the added secret's, replaced first
    before = stored_endpoint(fakes, endpoint["id"])
    assert before.signing_secrets(fakes.clock.now) == tuple(reversed(answered))
    fakes.clock.advance(60)

    response = respond("POST", f"/v1/webhook-endpoints/{endpoint['id']}/rotate-secret")

    assert response["statusCode"] == 429, response
    error = json.loads(response["body"])["error"]
    assert error["code"] == "too_many_rotations"
    assert str(MAX_REPLACED_SECRETS) in error["message"]
    wait = first_stops - fakes.clock.now
    assert response["headers"]["Retry-After"] == str(int(wait.total_seconds()))
    assert stored_endpoint(fakes, endpoint["id"]) == before  # nothing rotated

    fakes.clock.advance(wait.total_seconds())  # the added secret stops signing: room for one more
    status, body = call("POST", f"/v1/webhook-endpoints/{endpoint['id']}/rotate-secret")
    assert status == 200
    after = stored_endpoint(fakes, endpoint["id"]).signing_secrets(fakes.clock.now)
    assert after == (body["endpoint"]["secret"], *reversed(answered[1:]))


# ---------------------------------------------------------------------------- events
def test_events_are_listed_newest_first_page_by_page(fakes: Fakes) -> None:
    made = [stored_event(fakes, n) for n in range(1, 6)]

    status, first = call("GET", "/v1/events", query={"limit": "2"})
    assert status == 200
    _, second = call("GET", "/v1/events", query={"limit": "2", "cursor": first["nextCursor"]})
    _, third = call("GET", "/v1/events", query={"limit": "2", "cursor": second["nextCursor"]})

    pages = [first, second, third]
    assert [[e["id"] for e in p["events"]] for p in pages] == [
        [made[4].id, made[3].id],
        [made[2].id, made[1].id],
        [made[0].id],
    ]
    assert third["nextCursor"] is None
    assert first["events"][0] == {"id": made[4].id, **made[4].payload(), "deliveries": []}


def test_events_are_filtered_by_message_and_type(fakes: Fakes) -> None:
    a, b = "msg_01KDVDNA00QV9D1V5ZMBF8DBAA", "msg_01KDVDNA00QV9D1V5ZMBF8DBBB"
    queued_a = stored_event(fakes, 1, a)
    sent_a = stored_event(fakes, 2, a, type=EventType.SENT)
    stored_event(fakes, 3, b)

    _, of_a = call("GET", "/v1/events", query={"messageId": a})
    _, sent = call("GET", "/v1/events", query={"type": "message.sent"})
    _, queued_of_a = call("GET", "/v1/events", query={"messageId": a, "type": "message.queued"})

    assert [e["id"] for e in of_a["events"]] == [sent_a.id, queued_a.id]
    assert [e["id"] for e in sent["events"]] == [sent_a.id]
    assert [e["id"] for e in queued_of_a["events"]] == [queued_a.id]


@pytest.mark.parametrize(
    "query",
    [
        {"type": "message.exploded"},
        {"limit": "0"},
        {"limit": "101"},
        {"cursor": "msg_01KDVDNA00QV9D1V5ZMBF8DBMW"},
        {"messageId": "evt_01KDVDNA00QV9D1V5ZMBF8DBMW"},
    ],
)
def test_a_bad_events_query_is_a_400(fakes: Fakes, query: dict[str, str]) -> None:
    status, body = call("GET", "/v1/events", query=query)

    assert status == 400
    assert body["error"]["code"] == "validation_error"


def test_one_event_is_found_in_its_workspace_only(fakes: Fakes) -> None:
    event = stored_event(fakes, 1, deliveries=(Delivery("whep_1", DeliveryStatus.SUCCEEDED, 1, T0, 200),))

    shown = {
        "id": event.id,
        **event.payload(),
        "deliveries": [
            {
                "endpointId": "whep_1",
                "status": "succeeded",
                "attempts": 1,
                "lastAttemptAt": "2026-01-01T12:00:00.000Z",
                "lastResponseStatus": 200,
            }
        ],
    }
    assert call("GET", f"/v1/events/{event.id}") == (200, {"success": True, "event": shown})
    status, body = call("GET", f"/v1/events/{event.id}", workspace=OTHER_WS)
    assert status == 404
    assert body["error"]["code"] == "not_found"
    assert call("GET", "/v1/events", workspace=OTHER_WS)[1]["events"] == []
    assert call("POST", f"/v1/events/{event.id}/redeliver", workspace=OTHER_WS)[0] == 404
    assert fakes.queue.tasks == []


def test_a_redelivery_queues_the_event_again_for_every_live_endpoint_it_had(fakes: Fakes) -> None:
    kept, deleted = added(), added(f"{HOOK}/2")
    event = stored_event(
        fakes,
        1,
        deliveries=(
            Delivery(kept["id"], DeliveryStatus.SUCCEEDED, 1, T0, 200),
            Delivery(deleted["id"], DeliveryStatus.FAILED, 8, T0, 500),
        ),
    )
    call("DELETE", f"/v1/webhook-endpoints/{deleted['id']}")

    assert call("POST", f"/v1/events/{event.id}/redeliver") == (202, {"success": True})

    assert fakes.queue.tasks == [DeliveryTask(WS, event.id, kept["id"], base_attempts=1)]
    delivery = fakes.store.event_items[(WS, event.id)].delivery(kept["id"])
    assert delivery == Delivery(kept["id"], DeliveryStatus.PENDING, 1, T0, 200)


def test_a_redelivery_to_one_endpoint_queues_that_one_even_if_the_event_never_had_it(fakes: Fakes) -> None:
    first, second = added(), added(f"{HOOK}/2")
    event = stored_event(fakes, 1, deliveries=(Delivery(first["id"], DeliveryStatus.FAILED, 8, T0, 500),))

    assert call("POST", f"/v1/events/{event.id}/redeliver", {"endpointId": first["id"]})[0] == 202
    assert call("POST", f"/v1/events/{event.id}/redeliver", {"endpointId": second["id"]})[0] == 202

    assert fakes.queue.tasks == [
        DeliveryTask(WS, event.id, first["id"], base_attempts=8),
        DeliveryTask(WS, event.id, second["id"], base_attempts=0),
    ]
    stored = fakes.store.event_items[(WS, event.id)]
    assert [(d.endpoint_id, d.status) for d in stored.deliveries] == sorted(
        [(first["id"], DeliveryStatus.PENDING), (second["id"], DeliveryStatus.PENDING)]
    )


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"endpointId": "whep_01KDVDNA00QV9D1V5ZMBF8DBZZ"}, 404),  # no such endpoint
        ({"endpointId": ""}, 400),
        ({"endpointId": 7}, 400),
        ({"other": "x"}, 400),
    ],
)
def test_a_bad_redelivery_queues_nothing(fakes: Fakes, body: dict[str, Any], status: int) -> None:
    event = stored_event(fakes, 1)

    assert call("POST", f"/v1/events/{event.id}/redeliver", body)[0] == status
    assert fakes.queue.tasks == []


def test_a_redelivery_to_another_workspaces_endpoint_is_404(fakes: Fakes) -> None:
    theirs = fakes.service.add_endpoint(OTHER_WS, HOOK, None, None)
    event = stored_event(fakes, 1)

    assert call("POST", f"/v1/events/{event.id}/redeliver", {"endpointId": theirs.id})[0] == 404
    assert fakes.queue.tasks == []


def test_a_redelivered_event_arrives_again_with_the_same_id_on_a_fresh_schedule() -> None:
    local = build()
    endpoint = local.service.add_endpoint(WS, HOOK, None, None)
    event = Event(
        id="evt_01KDVDNA00QV9D1V5ZMBF8DBMW",
        workspace_id=WS,
        message_id="msg_01KDVDNA00QV9D1V5ZMBF8DBMW",
        type=EventType.SENT,
        timestamp=T0,
        message={"id": "msg_01KDVDNA00QV9D1V5ZMBF8DBMW"},
        sequence=2,
        deliveries=(Delivery(endpoint.id, DeliveryStatus.FAILED, 3, T0, 500),),
    )
    local.store.event_items[(WS, event.id)] = event
    sent: list[dict[str, str]] = []

    def receiver(url: str, body: bytes, headers: Any, timeout: float) -> EndpointAnswer:
        sent.append(dict(headers))
        return EndpointAnswer(200)

    deliverer = WebhookDeliverer(
        events=local.store,
        endpoints=local.store,
        send=receiver,
        slow_lane=FakeDeliveryQueue(),
        schedule=(5, 300),
    )
    assert (
        deliverer.deliver(DeliveryTask(WS, event.id, endpoint.id)) is DeliveryOutcome.DROPPED
    )  # it had failed

    local.service.redeliver(WS, event.id, None)
    [task] = local.queue.tasks
    assert deliverer.deliver(task) is DeliveryOutcome.SUCCEEDED

    assert [h["webhook-id"] for h in sent] == [event.id]
    delivery = local.store.event_items[(WS, event.id)].delivery(endpoint.id)
    assert delivery is not None
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.SUCCEEDED, 4)


def test_redelivering_an_event_that_is_gone_is_not_found() -> None:
    local = build()
    with pytest.raises(EventNotFound):
        local.service.redeliver(WS, "evt_01KDVDNA00QV9D1V5ZMBF8DBMW", None)
    assert local.queue.tasks == []


@pytest.mark.parametrize(
    "url",
    [
        "https://10.0.0.8/hooks",
        "https://[::1]/hooks",
        "http://93.184.215.14/hooks",
        "https://u@93.184.215.14/",
    ],
)
def test_the_apis_own_checker_refuses_without_asking_dns(url: str) -> None:
    service = WebhookService(
        endpoints=InMemoryWebhookStore(),
        events=InMemoryWebhookStore(),
        queue=FakeDeliveryQueue(),
        check_target=target_checker(allow_private=False),
    )

    with pytest.raises(InvalidEndpoint):
        service.add_endpoint(WS, url, None, None)
