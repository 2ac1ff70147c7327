"""Every route's every documented answer matches its schema in the OpenAPI document, without the
fuzz tier.

For each declared route and each status its OpenAPI operation documents, a scenario drives the real
handler (`sendonce.api.app.handle`, on in-memory fakes) to that answer; the answer's body is then
validated against that operation's response schema for that status (`jsonschema`, the document's
own components). A route or a documented status without a scenario fails the first test, so a new
one is covered on purpose.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)
from jsonschema import Draft202012Validator
from msgspec.structs import replace
from sendonce import composition
from sendonce.activity.service import ActivityService
from sendonce.api import dependencies
from sendonce.api.answers import send_answer
from sendonce.api.app import handle
from sendonce.api.campaign_lines import parse_line, recipient_key, refusal
from sendonce.api.dependencies import ApiDependencies
from sendonce.api.openapi import openapi_document
from sendonce.api.routers import ROUTES
from sendonce.api.routes import (
    Body,
    Route,
    campaigns,
    console,
    erasures,
    promise,
    provider_events,
    service,
    suppressions,
    templates,
    usage,
    webhooks,
)
from sendonce.api.routes import messages as messages_router
from sendonce.auth.api_keys import hash_api_key
from sendonce.campaigns.fanout import FanOut
from sendonce.campaigns.service import CampaignService
from sendonce.erasures.service import ErasureService
from sendonce.limits.model import Limits
from sendonce.limits.service import RequestLimits
from sendonce.messages.batch import BatchSender
from sendonce.messages.service import MessageService
from sendonce.modes import twin_of
from sendonce.provider_events.signature import sign
from sendonce.secret_values import SecretUnavailable
from sendonce.simulator.ports import SimulatedDelivery
from sendonce.status_webhooks.model import (
    Delivery,
    DeliveryStatus,
    Event,
)
from sendonce.status_webhooks.rules import (
    EventType,
)
from sendonce.status_webhooks.service import MAX_ROTATION_TRIES, WebhookService
from sendonce.suppressions.service import SuppressionService
from sendonce.templates.service import TemplateService

from tests.support.lambda_context import FakeLambdaContext
from tests.unit.campaign_fakes import (
    FakeCampaignPace,
    FakeCampaignWork,
    InMemoryCampaignStore,
    InMemoryRecipientFiles,
    run_queued,
)
from tests.unit.erasure_fakes import FakeErasureQueue, InMemoryErasureStore
from tests.unit.unit_fakes import (
    FakeDeliveryQueue,
    FakeLimits,
    FakeQueue,
    InMemoryApiKeys,
    InMemoryProviderEventLog,
    InMemorySimulatorStore,
    InMemoryStore,
    InMemoryTemplates,
    InMemoryWebhookStore,
    InProcessRenderer,
    ManualClock,
    accept_any_target,
    fake_api_dependencies,
    key_of,
)

WS = "ws_answers"
TWIN = twin_of(WS)
TEST_KEY = "sk_test_answers"
SECRET = "whsec_answers"
NOW = datetime.now(UTC).replace(microsecond=0)
SMS = {"channel": "sms", "to": "+15550100000", "body": "hi"}
UNKNOWN_MESSAGE = "msg_01KDVDNA00QV9D1V5ZMBF8DBMW"
UNKNOWN_ENDPOINT = "whep_01KDVDNA00QV9D1V5ZMBF8DBMW"
UNKNOWN_EVENT = "evt_01KDVDNA00QV9D1V5ZMBF8DBMW"
UNKNOWN_CAMPAIGN = "cmp_01KDVDNA00QV9D1V5ZMBF8DBMW"
UNKNOWN_ERASURE = "era_01KDVDNA00QV9D1V5ZMBF8DBMW"

DOCUMENT: dict[str, Any] = json.loads(openapi_document())
Answer = dict[str, Any]


# ---------------------------------------------------------------------------- the API on fakes
@dataclass
class Api:
    """The real handler on in-memory fakes, and what a scenario turns to reach an answer."""

    deps: ApiDependencies
    webhook_store: InMemoryWebhookStore
    webhooks: WebhookService
    simulator: InMemorySimulatorStore
    keys: InMemoryApiKeys
    limits: FakeLimits
    campaign_store: InMemoryCampaignStore
    recipient_files: InMemoryRecipientFiles
    campaign_work: FakeCampaignWork
    fan_out: FanOut
    in_progress: list[bool] = field(default_factory=lambda: [False])

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        key: str | None = key_of(WS),
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        raw: str | None = None,
        content_type: str = "application/json",
    ) -> Answer:
        sent = dict(headers or {})
        if key is not None:
            sent["authorization"] = f"Bearer {key}"
        text = raw if raw is not None else json.dumps(body) if body is not None else None
        if text is not None:
            sent["content-type"] = content_type
        event: dict[str, Any] = {
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": path,
            "rawQueryString": "&".join(f"{k}={v}" for k, v in (query or {}).items()),
            "headers": sent,
            "requestContext": {"http": {"method": method, "path": path}, "stage": "$default"},
            "isBase64Encoded": False,
        }
        if query:
            event["queryStringParameters"] = dict(query)
        if text is not None:
            event["body"] = text
        answer: Answer = handle(event, FakeLambdaContext())  # type: ignore[arg-type]
        return answer

    def sent(self, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """A message sent now, as the API shows it."""
        answer = self.call("POST", "/v1/messages", body or {**SMS, "body": f"hi {time.perf_counter_ns()}"})
        assert answer["statusCode"] == 201, answer["body"]
        message: dict[str, Any] = json.loads(answer["body"])["message"]
        return message

    def scheduled(self) -> dict[str, Any]:
        send_at = (NOW + timedelta(days=1)).isoformat().replace("+00:00", "Z")
        return self.sent({**SMS, "body": f"later {time.perf_counter_ns()}", "sendAt": send_at})

    def endpoint(self) -> dict[str, Any]:
        answer = self.call("POST", "/v1/webhook-endpoints", {"url": "https://hooks.example.com/in"})
        assert answer["statusCode"] == 201, answer["body"]
        endpoint: dict[str, Any] = json.loads(answer["body"])["endpoint"]
        return endpoint

    def event(self) -> str:
        message = self.sent()
        endpoint = self.endpoint()
        event = Event(
            UNKNOWN_EVENT.replace("MW", "MX"),
            WS,
            message["id"],
            EventType.SENT,
            NOW,
            message,
            2,
            (Delivery(endpoint["id"], DeliveryStatus.FAILED, 3, NOW, 503), Delivery("whep_other")),
        )
        self.webhook_store.event_items[(WS, event.id)] = event
        return event.id

    def event_message(self) -> str:
        """A message with an event whose deliveries are one failed and one pending."""
        return self.webhook_store.event_items[(WS, self.event())].message_id

    def template(self, name: str = "welcome") -> str:
        body = {"name": name, "channel": "sms", "body": "Hi {{ name }}, your code is {{ code }}"}
        answer = self.call("POST", "/v1/templates", body)
        assert answer["statusCode"] == 201, answer["body"]
        return name

    def campaign(self, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """A draft campaign, its recipients given inline unless `body` says otherwise."""
        answer = self.call(
            "POST", "/v1/campaigns", body or {**CAMPAIGN, "name": f"c {time.perf_counter_ns()}"}
        )
        assert answer["statusCode"] == 201, answer["body"]
        campaign: dict[str, Any] = json.loads(answer["body"])["campaign"]
        return campaign

    def campaign_call(self, action: str, campaign_id: str, status: int | None = None) -> Answer:
        answer = self.call("POST", f"/v1/campaigns/{campaign_id}/{action}")
        assert status is None or answer["statusCode"] == status, answer["body"]
        return answer

    def started(self) -> dict[str, Any]:
        campaign = self.campaign()
        self.campaign_call("start", campaign["id"], 202)
        return campaign

    def finished(self) -> dict[str, Any]:
        """A canceled campaign: nothing changes it any more."""
        campaign = self.campaign()
        self.campaign_call("cancel", campaign["id"], 200)
        return campaign

    def sent_campaign(self) -> dict[str, Any]:
        """A campaign started and fanned out to the end, on the fakes."""
        campaign = self.started()
        run_queued(self.fan_out, self.campaign_work)
        return campaign

    def suppressed(self, to: str = "+15550100009") -> str:
        answer = self.call("POST", "/v1/suppressions", {"channel": "sms", "to": to})
        assert answer["statusCode"] in (200, 201), answer["body"]
        return to

    def signed(self, text: str, provider: str = "http") -> Answer:
        signature = sign(SECRET, int(time.time()), text.encode())
        return self.call(
            "POST",
            f"/v1/webhooks/{provider}",
            raw=text,
            key=None,
            headers={"x-sendonce-signature": signature},
        )


@pytest.fixture
def api() -> Iterator[Api]:
    store, clock = InMemoryStore(), ManualClock(NOW)
    limits = FakeLimits(defaults=Limits(rate_per_second=10_000, daily_quota=100_000), store=store)
    suppressions_store = store.suppressions
    messages = MessageService(
        store=store, queue=FakeQueue(), dedup_window=timedelta(minutes=15), clock=clock, limits=limits
    )
    batches = BatchSender(
        store=store, dedup_window=timedelta(minutes=15), clock=clock, suppressions=suppressions_store
    )
    in_progress = [False]

    def send_once(*, request: dict[str, Any], command: Any) -> dict[str, Any]:
        if in_progress[0]:
            raise IdempotencyAlreadyInProgressError("in progress")
        return send_answer(messages.send(command))

    def send_batch_once(*, request: dict[str, Any], run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        if in_progress[0]:
            raise IdempotencyAlreadyInProgressError("in progress")
        if request["key"] == "reused":
            raise IdempotencyValidationError("another payload")
        return run()

    campaign_store = InMemoryCampaignStore(gates=store.gates)
    recipient_files, campaign_work = InMemoryRecipientFiles(), FakeCampaignWork()
    campaign_service = CampaignService(campaign_store, recipient_files, campaign_work, clock=clock)
    fan_out = FanOut(
        store=campaign_store,
        files=recipient_files,
        work=campaign_work,
        pace=FakeCampaignPace(unlimited=True),
        send=batches.send_many,
        parse=parse_line,
        recipient_key=recipient_key,
        refusal=refusal,
        messages=store,
        clock=clock,
    )

    webhook_store = InMemoryWebhookStore()
    webhook_service = WebhookService(
        endpoints=webhook_store,
        events=webhook_store,
        queue=FakeDeliveryQueue(),
        check_target=accept_any_target,
        clock=clock,
    )
    keys = InMemoryApiKeys.of(WS)
    keys.save(hash_api_key(TEST_KEY), TWIN)
    erasure_service = ErasureService(InMemoryErasureStore(), FakeErasureQueue(), clock=clock)
    simulator = InMemorySimulatorStore()
    deps = fake_api_dependencies(
        messages,
        keys,
        limits=RequestLimits(limits),
        suppressions=SuppressionService(suppressions_store, clock=clock),
        provider_events_secret=lambda: SECRET,
        send_once=send_once,
        send_many=batches.send_many,
        send_batch_once=send_batch_once,
        build_webhooks=lambda: webhook_service,
        build_test_deliveries=lambda: simulator,
        build_templates=lambda: TemplateService(InMemoryTemplates(), InProcessRenderer(), clock=clock),
        build_campaigns=lambda: campaign_service,
        create_campaign_once=send_batch_once,  # a keyed create runs once, as a keyed batch
        build_activity=lambda: ActivityService(
            messages, webhook_store, InMemoryProviderEventLog(), webhook_store.promise_counts, clock
        ),
        build_erasures=lambda: erasure_service,
    )
    dependencies.root.use(deps)
    yield Api(
        deps,
        webhook_store,
        webhook_service,
        simulator,
        keys,
        limits,
        campaign_store=campaign_store,
        recipient_files=recipient_files,
        campaign_work=campaign_work,
        fan_out=fan_out,
        in_progress=in_progress,
    )
    composition.reset_all()


# ---------------------------------------------------------------------- the answers every route of a kind has
def _path(route: Route) -> str:
    """A path the route takes, its parameters filled in."""
    fill = {
        "{id}": UNKNOWN_MESSAGE,
        "{provider}": "http",
        "{to}": "%2B15550100000",
        "{name}": "unknown-template",
        "{version}": "1",
    }
    path = route.path
    for name, value in fill.items():
        path = path.replace(name, value)
    if route.path.startswith(("/v1/webhook-endpoints/", "/v1/events/")):
        path = path.replace(UNKNOWN_MESSAGE, UNKNOWN_ENDPOINT if "webhook" in route.path else UNKNOWN_EVENT)
    if route.path.startswith("/v1/campaigns/"):
        path = path.replace(UNKNOWN_MESSAGE, UNKNOWN_CAMPAIGN)
    return path


def _no_key(route: Route) -> Callable[[Api], Answer]:
    return lambda api: api.call(
        route.method, _path(route), {} if route.body is not Body.NONE else None, key=None
    )


def _over_the_rate(route: Route) -> Callable[[Api], Answer]:
    def scenario(api: Api) -> Answer:
        limits = RequestLimits(FakeLimits(defaults=Limits(rate_per_second=1, daily_quota=0)))
        dependencies.root.use(replace(api.deps, limits=limits))
        # The rate refills on the real clock: on a busy machine a token may come back between the
        # bucket emptied and the call, so the call is made again with the bucket emptied again.
        for _ in range(5):
            while limits.check_rate(WS).allowed:  # type: ignore[union-attr]
                pass
            answer = api.call(route.method, _path(route), {} if route.body is not Body.NONE else None)
            if answer["statusCode"] == 429:
                break
        return answer

    return scenario


def _key_store_down(route: Route) -> Callable[[Api], Answer]:
    def scenario(api: Api) -> Answer:
        api.keys.failing = True
        return api.call(route.method, _path(route), {} if route.body is not Body.NONE else None)

    return scenario


def _too_large(route: Route) -> Callable[[Api], Answer]:
    key = None if route.public else key_of(WS)
    return lambda api: api.call(route.method, _path(route), raw="x" * (route.max_body_bytes + 1), key=key)


def _not_json(route: Route) -> Callable[[Api], Answer]:
    return lambda api: api.call(route.method, _path(route), raw="{}", content_type="text/plain")


def _shared() -> dict[tuple[str, int], Callable[[Api], Answer]]:
    found: dict[tuple[str, int], Callable[[Api], Answer]] = {}
    for route in ROUTES:
        if not route.public:
            found[(route.key, 401)] = _no_key(route)
            found[(route.key, 429)] = _over_the_rate(route)
            found[(route.key, 503)] = _key_store_down(route)
        if route.body is not Body.NONE:
            found[(route.key, 413)] = _too_large(route)
        if route.body in (Body.JSON, Body.OPTIONAL_JSON):
            found[(route.key, 415)] = _not_json(route)
    return found


# ---------------------------------------------------------------------------- each route's own
def _with_key(api: Api, key: str) -> Answer:
    return api.call("POST", "/v1/messages", SMS, headers={"idempotency-key": key})


def _in_progress(send: Callable[[Api], Answer]) -> Callable[[Api], Answer]:
    def scenario(api: Api) -> Answer:
        api.in_progress[0] = True
        return send(api)

    return scenario


def _batch(api: Api, **options: Any) -> Answer:
    items = [SMS, {**SMS, "to": "nope"}, {**SMS, "body": "keyed", "idempotencyKey": "b-1"}]
    return api.call("POST", "/v1/messages/batch", {"messages": items}, **options)


def _canceled_twice(api: Api) -> Answer:
    message = api.scheduled()
    assert api.call("DELETE", f"/v1/messages/{message['id']}")["statusCode"] == 200
    return api.call("DELETE", f"/v1/messages/{message['id']}")


def _rotation_conflict(api: Api) -> Answer:
    endpoint = api.endpoint()

    def other_write() -> None:
        current = api.webhook_store.endpoint_items[(WS, endpoint["id"])]
        api.webhook_store.endpoint_items[(WS, endpoint["id"])] = replace(current, version=current.version + 1)

    api.webhook_store.before_replace.extend(other_write for _ in range(MAX_ROTATION_TRIES))
    return api.call("POST", f"/v1/webhook-endpoints/{endpoint['id']}/rotate-secret")


def _secret_down(api: Api) -> Answer:
    def unavailable() -> str:
        raise SecretUnavailable("the secret store is down")

    dependencies.root.use(replace(api.deps, provider_events_secret=unavailable))
    return api.signed('{"eventId": "e1"}')


def _erasure(api: Api) -> Answer:
    requested = api.call("POST", "/v1/erasures", {"to": "ann@example.com"})
    assert requested["statusCode"] == 202, requested["body"]
    return api.call("GET", f"/v1/erasures/{json.loads(requested['body'])['erasure']['id']}")


def _test_deliveries(api: Api) -> Answer:
    delivery = SimulatedDelivery(TWIN, UNKNOWN_MESSAGE, "sms", "+15550100000", None, "hi", NOW, "sim_1", "k")
    api.simulator.delivered[(TWIN, "k")] = delivery
    return api.call("GET", "/v1/test/deliveries", key=TEST_KEY)


_PROVIDER_EVENT = json.dumps(
    {"eventId": "e1", "messageId": UNKNOWN_MESSAGE, "type": "delivered", "occurredAt": "2026-01-01T00:00:00Z"}
)
m, w, s, tp, c = messages_router, webhooks, suppressions, templates, campaigns
_TEMPLATE = {"name": "welcome", "channel": "sms", "body": "Hi {{ name }}"}
# Three recipients: one sent, one no send would take (counted invalid, line 2), one repeated.
CAMPAIGN = {
    "name": "launch",
    "channel": "sms",
    "body": "We launch today",
    "recipients": [
        {"to": "+15550100031", "metadata": {"segment": "a"}},
        {"to": "nope"},
        {"to": "+1 555 010 0031"},
    ],
}
# A campaign whose list is to be uploaded: the answer carries its upload's URL.
TO_UPLOAD = {"name": "to upload", "channel": "sms", "body": "We launch today"}


def _create_keyed(key: str) -> Callable[[Api], Answer]:
    return lambda api: api.call("POST", "/v1/campaigns", CAMPAIGN, headers={"idempotency-key": key})


def _paused(api: Api) -> dict[str, Any]:
    campaign = api.started()
    api.campaign_call("pause", campaign["id"], 200)
    return campaign


OWN: dict[tuple[str, int], Callable[[Api], Answer]] = {
    # messages
    (m.SEND_MESSAGE.key, 201): lambda api: api.call("POST", "/v1/messages", SMS),
    (m.SEND_MESSAGE.key, 200): lambda api: (
        api.call("POST", "/v1/messages", SMS),
        api.call("POST", "/v1/messages", SMS),
    )[1],
    (m.SEND_MESSAGE.key, 400): lambda api: api.call(
        "POST", "/v1/messages", {**SMS, "channel": "fax", "extra": 1}
    ),
    (m.SEND_MESSAGE.key, 409): _in_progress(lambda api: _with_key(api, "k-1")),
    (m.SEND_MESSAGE.key, 422): lambda api: api.call("POST", "/v1/messages", {**SMS, "to": api.suppressed()}),
    (m.SEND_BATCH.key, 200): _batch,
    (m.SEND_BATCH.key, 400): lambda api: _batch(api, query={"validation": "strict"}),
    (m.SEND_BATCH.key, 409): _in_progress(lambda api: _batch(api, headers={"idempotency-key": "b"})),
    (m.SEND_BATCH.key, 422): lambda api: _batch(api, headers={"idempotency-key": "reused"}),
    (m.GET_MESSAGE.key, 200): lambda api: api.call("GET", f"/v1/messages/{api.sent()['id']}"),
    (m.GET_MESSAGE.key, 404): lambda api: api.call("GET", f"/v1/messages/{UNKNOWN_MESSAGE}"),
    (m.MESSAGE_TIMELINE.key, 200): lambda api: api.call(
        "GET", f"/v1/messages/{api.event_message()}/timeline"
    ),
    (m.MESSAGE_TIMELINE.key, 404): lambda api: api.call("GET", f"/v1/messages/{UNKNOWN_MESSAGE}/timeline"),
    (m.LIST_MESSAGES.key, 200): lambda api: (api.sent(), api.scheduled(), api.call("GET", "/v1/messages"))[2],
    (m.LIST_MESSAGES.key, 400): lambda api: api.call("GET", "/v1/messages", query={"limit": "0"}),
    (m.CANCEL_MESSAGE.key, 200): lambda api: api.call("DELETE", f"/v1/messages/{api.scheduled()['id']}"),
    (m.CANCEL_MESSAGE.key, 404): lambda api: api.call("DELETE", f"/v1/messages/{UNKNOWN_MESSAGE}"),
    (m.CANCEL_MESSAGE.key, 409): _canceled_twice,
    (m.EDIT_MESSAGE.key, 200): lambda api: api.call(
        "PATCH", f"/v1/messages/{api.scheduled()['id']}", {"body": "new"}
    ),
    (m.EDIT_MESSAGE.key, 400): lambda api: api.call("PATCH", f"/v1/messages/{api.scheduled()['id']}", {}),
    (m.EDIT_MESSAGE.key, 404): lambda api: api.call(
        "PATCH", f"/v1/messages/{UNKNOWN_MESSAGE}", {"body": "new"}
    ),
    (m.EDIT_MESSAGE.key, 409): lambda api: api.call(
        "PATCH", f"/v1/messages/{api.sent()['id']}", {"body": "new"}
    ),
    # provider events
    (provider_events.PROVIDER_WEBHOOK.key, 200): lambda api: api.signed(_PROVIDER_EVENT),
    (provider_events.PROVIDER_WEBHOOK.key, 400): lambda api: api.signed('{"eventId": 1}'),
    (provider_events.PROVIDER_WEBHOOK.key, 401): lambda api: api.call(
        "POST", "/v1/webhooks/http", raw=_PROVIDER_EVENT, key=None
    ),
    (provider_events.PROVIDER_WEBHOOK.key, 404): lambda api: api.signed(_PROVIDER_EVENT, provider="sns"),
    (provider_events.PROVIDER_WEBHOOK.key, 503): _secret_down,
    # webhooks
    (w.ADD_WEBHOOK_ENDPOINT.key, 201): lambda api: api.call(
        "POST", "/v1/webhook-endpoints", {"url": "https://h.example.com", "eventTypes": ["message.sent"]}
    ),
    (w.ADD_WEBHOOK_ENDPOINT.key, 400): lambda api: api.call(
        "POST", "/v1/webhook-endpoints", {"url": "https://h.example.com", "eventTypes": ["nope"]}
    ),
    (w.LIST_WEBHOOK_ENDPOINTS.key, 200): lambda api: (
        api.endpoint(),
        api.call("GET", "/v1/webhook-endpoints"),
    )[1],
    (w.GET_WEBHOOK_ENDPOINT.key, 200): lambda api: api.call(
        "GET", f"/v1/webhook-endpoints/{api.endpoint()['id']}"
    ),
    (w.GET_WEBHOOK_ENDPOINT.key, 404): lambda api: api.call(
        "GET", f"/v1/webhook-endpoints/{UNKNOWN_ENDPOINT}"
    ),
    (w.DELETE_WEBHOOK_ENDPOINT.key, 200): lambda api: api.call(
        "DELETE", f"/v1/webhook-endpoints/{api.endpoint()['id']}"
    ),
    (w.DELETE_WEBHOOK_ENDPOINT.key, 404): lambda api: api.call(
        "DELETE", f"/v1/webhook-endpoints/{UNKNOWN_ENDPOINT}"
    ),
    (w.ROTATE_WEBHOOK_SECRET.key, 200): lambda api: api.call(
        "POST", f"/v1/webhook-endpoints/{api.endpoint()['id']}/rotate-secret"
    ),
    (w.ROTATE_WEBHOOK_SECRET.key, 404): lambda api: api.call(
        "POST", f"/v1/webhook-endpoints/{UNKNOWN_ENDPOINT}/rotate-secret"
    ),
    (w.ROTATE_WEBHOOK_SECRET.key, 409): _rotation_conflict,
    (w.LIST_EVENTS.key, 200): lambda api: (api.event(), api.call("GET", "/v1/events"))[1],
    (w.LIST_EVENTS.key, 400): lambda api: api.call("GET", "/v1/events", query={"type": "nope"}),
    (w.GET_EVENT.key, 200): lambda api: api.call("GET", f"/v1/events/{api.event()}"),
    (w.GET_EVENT.key, 404): lambda api: api.call("GET", f"/v1/events/{UNKNOWN_EVENT}"),
    (w.REDELIVER_EVENT.key, 202): lambda api: api.call("POST", f"/v1/events/{api.event()}/redeliver"),
    (w.REDELIVER_EVENT.key, 400): lambda api: api.call(
        "POST", f"/v1/events/{api.event()}/redeliver", {"x": 1}
    ),
    (w.REDELIVER_EVENT.key, 404): lambda api: api.call("POST", f"/v1/events/{UNKNOWN_EVENT}/redeliver"),
    # suppressions
    (s.ADD_SUPPRESSION.key, 201): lambda api: api.call(
        "POST", "/v1/suppressions", {"channel": "sms", "to": "+15550100001"}
    ),
    (s.ADD_SUPPRESSION.key, 200): lambda api: api.call(
        "POST", "/v1/suppressions", {"channel": "imessage", "to": api.suppressed("+15550100002")}
    ),
    (s.ADD_SUPPRESSION.key, 400): lambda api: api.call(
        "POST", "/v1/suppressions", {"channel": "sms", "to": "nope"}
    ),
    (s.LIST_SUPPRESSIONS.key, 200): lambda api: (api.suppressed(), api.call("GET", "/v1/suppressions"))[1],
    (s.LIST_SUPPRESSIONS.key, 400): lambda api: api.call("GET", "/v1/suppressions", query={"limit": "101"}),
    (s.GET_SUPPRESSION.key, 200): lambda api: (
        api.suppressed(),
        api.call("GET", "/v1/suppressions/%2B15550100009"),
    )[1],
    (s.GET_SUPPRESSION.key, 400): lambda api: api.call("GET", "/v1/suppressions/nope"),
    (s.GET_SUPPRESSION.key, 404): lambda api: api.call("GET", "/v1/suppressions/%2B15550100008"),
    (s.DELETE_SUPPRESSION.key, 200): lambda api: (
        api.suppressed(),
        api.call("DELETE", "/v1/suppressions/%2B15550100009"),
    )[1],
    (s.DELETE_SUPPRESSION.key, 400): lambda api: api.call("DELETE", "/v1/suppressions/nope"),
    (s.DELETE_SUPPRESSION.key, 404): lambda api: api.call("DELETE", "/v1/suppressions/%2B15550100008"),
    # templates
    (tp.CREATE_TEMPLATE.key, 201): lambda api: api.call("POST", "/v1/templates", _TEMPLATE),
    (tp.CREATE_TEMPLATE.key, 400): lambda api: api.call(
        "POST", "/v1/templates", {**_TEMPLATE, "body": "Hi {{ name"}
    ),
    (tp.CREATE_TEMPLATE.key, 409): lambda api: (api.template(), api.call("POST", "/v1/templates", _TEMPLATE))[
        1
    ],
    (tp.LIST_TEMPLATES.key, 200): lambda api: (api.template(), api.call("GET", "/v1/templates"))[1],
    (tp.LIST_TEMPLATES.key, 400): lambda api: api.call("GET", "/v1/templates", query={"limit": "0"}),
    (tp.GET_TEMPLATE.key, 200): lambda api: api.call("GET", f"/v1/templates/{api.template()}"),
    (tp.GET_TEMPLATE.key, 404): lambda api: api.call("GET", "/v1/templates/unknown"),
    (tp.DELETE_TEMPLATE.key, 200): lambda api: api.call("DELETE", f"/v1/templates/{api.template()}"),
    (tp.DELETE_TEMPLATE.key, 404): lambda api: api.call("DELETE", "/v1/templates/unknown"),
    (tp.ADD_TEMPLATE_VERSION.key, 201): lambda api: api.call(
        "POST", f"/v1/templates/{api.template()}/versions", {"body": "Hello {{ name }}"}
    ),
    (tp.ADD_TEMPLATE_VERSION.key, 400): lambda api: api.call(
        "POST", f"/v1/templates/{api.template()}/versions", {"body": "Hello", "subject": "Not for sms"}
    ),
    (tp.ADD_TEMPLATE_VERSION.key, 404): lambda api: api.call(
        "POST", "/v1/templates/unknown/versions", {"body": "Hello"}
    ),
    (tp.GET_TEMPLATE_VERSION.key, 200): lambda api: api.call(
        "GET", f"/v1/templates/{api.template()}/versions/1"
    ),
    (tp.GET_TEMPLATE_VERSION.key, 400): lambda api: api.call("GET", "/v1/templates/welcome/versions/one"),
    (tp.GET_TEMPLATE_VERSION.key, 404): lambda api: api.call(
        "GET", f"/v1/templates/{api.template()}/versions/2"
    ),
    (tp.RENDER_TEMPLATE.key, 200): lambda api: api.call(
        "POST", f"/v1/templates/{api.template()}/render", {"data": {"name": "Ann", "code": "123456"}}
    ),
    (tp.RENDER_TEMPLATE.key, 400): lambda api: api.call(
        "POST", f"/v1/templates/{api.template()}/render", {"data": [1, 2]}
    ),
    (tp.RENDER_TEMPLATE.key, 404): lambda api: api.call("POST", "/v1/templates/unknown/render", {"data": {}}),
    (tp.RENDER_TEMPLATE.key, 422): lambda api: api.call(
        "POST", f"/v1/templates/{api.template()}/render", {"data": {"name": "Ann"}}
    ),
    # campaigns
    (c.CREATE_CAMPAIGN.key, 201): lambda api: api.call("POST", "/v1/campaigns", CAMPAIGN),
    (c.CREATE_CAMPAIGN.key, 400): lambda api: api.call(
        "POST", "/v1/campaigns", {**CAMPAIGN, "recipients": "+15550100031"}
    ),
    (c.CREATE_CAMPAIGN.key, 409): _in_progress(_create_keyed("c-1")),
    (c.CREATE_CAMPAIGN.key, 422): _create_keyed("reused"),
    (c.LIST_CAMPAIGNS.key, 200): lambda api: (
        api.campaign(),
        api.started(),
        api.finished(),
        api.call("GET", "/v1/campaigns"),
    )[3],
    (c.LIST_CAMPAIGNS.key, 400): lambda api: api.call("GET", "/v1/campaigns", query={"cursor": "bm9wZQ"}),
    (c.GET_CAMPAIGN.key, 200): lambda api: api.call("GET", f"/v1/campaigns/{api.sent_campaign()['id']}"),
    (c.GET_CAMPAIGN.key, 404): lambda api: api.call("GET", f"/v1/campaigns/{UNKNOWN_CAMPAIGN}"),
    (c.START_CAMPAIGN.key, 202): lambda api: api.campaign_call("start", api.campaign()["id"]),
    (c.START_CAMPAIGN.key, 200): lambda api: api.campaign_call("start", api.started()["id"]),
    (c.START_CAMPAIGN.key, 404): lambda api: api.campaign_call("start", UNKNOWN_CAMPAIGN),
    (c.START_CAMPAIGN.key, 409): lambda api: api.campaign_call("start", api.campaign(TO_UPLOAD)["id"]),
    (c.PAUSE_CAMPAIGN.key, 200): lambda api: api.campaign_call("pause", api.started()["id"]),
    (c.PAUSE_CAMPAIGN.key, 404): lambda api: api.campaign_call("pause", UNKNOWN_CAMPAIGN),
    (c.PAUSE_CAMPAIGN.key, 409): lambda api: api.campaign_call("pause", api.finished()["id"]),
    (c.RESUME_CAMPAIGN.key, 200): lambda api: api.campaign_call("resume", _paused(api)["id"]),
    (c.RESUME_CAMPAIGN.key, 404): lambda api: api.campaign_call("resume", UNKNOWN_CAMPAIGN),
    (c.RESUME_CAMPAIGN.key, 409): lambda api: api.campaign_call("resume", api.sent_campaign()["id"]),
    (c.CANCEL_CAMPAIGN.key, 200): lambda api: api.campaign_call("cancel", _paused(api)["id"]),
    (c.CANCEL_CAMPAIGN.key, 404): lambda api: api.campaign_call("cancel", UNKNOWN_CAMPAIGN),
    (c.CANCEL_CAMPAIGN.key, 409): lambda api: api.campaign_call("cancel", api.finished()["id"]),
    (c.LIST_CAMPAIGN_ERRORS.key, 200): lambda api: api.call(
        "GET", f"/v1/campaigns/{api.sent_campaign()['id']}/errors"
    ),
    (c.LIST_CAMPAIGN_ERRORS.key, 400): lambda api: api.call(
        "GET", f"/v1/campaigns/{api.campaign()['id']}/errors", query={"limit": "0"}
    ),
    (c.LIST_CAMPAIGN_ERRORS.key, 404): lambda api: api.call(
        "GET", f"/v1/campaigns/{UNKNOWN_CAMPAIGN}/errors"
    ),
    # usage and test mode
    (usage.USAGE.key, 200): lambda api: (api.sent(), api.call("GET", "/v1/usage"))[1],
    # the console: its page and its assets, no key
    (console.CONSOLE_PAGE.key, 200): lambda api: api.call("GET", "/console", key=None),
    (console.CONSOLE_ASSET.key, 200): lambda api: api.call("GET", "/console/console.js", key=None),
    (console.CONSOLE_ASSET.key, 404): lambda api: api.call("GET", "/console/nothing.js", key=None),
    # erasures
    (erasures.REQUEST_ERASURE.key, 202): lambda api: api.call("POST", "/v1/erasures", {"to": "+15550100003"}),
    (erasures.REQUEST_ERASURE.key, 400): lambda api: api.call("POST", "/v1/erasures", {"to": "nope"}),
    (erasures.GET_ERASURE.key, 200): _erasure,
    (erasures.GET_ERASURE.key, 404): lambda api: api.call("GET", f"/v1/erasures/{UNKNOWN_ERASURE}"),
    (promise.PROMISE_DAYS.key, 200): lambda api: (api.event(), api.call("GET", "/v1/promise"))[1],
    (promise.PROMISE_DAYS.key, 400): lambda api: api.call("GET", "/v1/promise", query={"days": "32"}),
    (usage.TEST_DELIVERIES.key, 200): _test_deliveries,
    (usage.TEST_DELIVERIES.key, 400): lambda api: api.call(
        "GET", "/v1/test/deliveries", key=TEST_KEY, query={"messageId": "nope"}
    ),
    (usage.TEST_DELIVERIES.key, 404): lambda api: api.call("GET", "/v1/test/deliveries"),
    # the service
    (service.HEALTH.key, 200): lambda api: api.call("GET", "/v1/health", key=None),
    (service.OPENAPI.key, 200): lambda api: api.call("GET", "/openapi.json", key=None),
    (service.DOCS.key, 200): lambda api: api.call("GET", "/docs", key=None),
}
SCENARIOS = {**_shared(), **OWN}


# ---------------------------------------------------------------------------- the tests
def _documented() -> set[tuple[str, int]]:
    found = set()
    for route in ROUTES:
        for status in DOCUMENT["paths"][route.path][route.method.lower()]["responses"]:
            found.add((route.key, int(status)))
    return found


def test_every_route_and_every_status_it_documents_has_a_scenario() -> None:
    documented = _documented()

    assert {(route.key, int(status)) for route in ROUTES for status in route.responses} == documented
    assert sorted(documented - SCENARIOS.keys()) == [], "add a scenario for each"
    assert sorted(SCENARIOS.keys() - documented) == [], "a scenario for an answer the route does not document"


def _schema(route_key: str, status: int) -> tuple[str, dict[str, Any] | None]:
    method, path = route_key.split(" ", 1)
    content = DOCUMENT["paths"][path][method.lower()]["responses"][str(status)]["content"]
    media_type, described = next(iter(content.items()))
    schema = described.get("schema")
    return media_type, {**schema, "components": DOCUMENT["components"]} if schema else None


@pytest.mark.parametrize(("route_key", "status"), sorted(SCENARIOS), ids=str)
def test_the_answer_is_the_documented_status_content_type_and_schema(
    api: Api, route_key: str, status: int
) -> None:
    answer = SCENARIOS[(route_key, status)](api)

    assert answer["statusCode"] == status, answer["body"]
    media_type, schema = _schema(route_key, status)
    assert answer["headers"]["Content-Type"].split(";")[0] == media_type
    if media_type != "application/json":
        return
    body = json.loads(answer["body"])
    if schema is not None:
        errors = [
            f"{list(error.absolute_path)}: {error.message}"
            for error in Draft202012Validator(schema).iter_errors(body)
        ]
        assert errors == [], answer["body"]
    assert body.get("success") is (status < 400) or route_key.endswith("/openapi.json")


def test_the_validator_catches_an_answer_off_its_schema() -> None:
    _, schema = _schema(messages_router.GET_MESSAGE.key, 200)
    assert schema is not None
    good = {
        "success": True,
        "message": {
            "id": UNKNOWN_MESSAGE,
            "channel": "sms",
            "to": "+15550100000",
            "subject": None,
            "body": "hi",
            "status": "queued",
            "sendAt": None,
            "metadata": {},
            "idempotencyKey": None,
            "attempts": 0,
            "error": None,
            "createdAt": "2026-01-01T00:00:00.000Z",
            "updatedAt": "2026-01-01T00:00:00.000Z",
        },
    }
    validator = Draft202012Validator(schema)

    assert validator.is_valid(good)
    assert not validator.is_valid({**good, "message": {**good["message"], "status": "lost"}})
    assert not validator.is_valid(
        {**good, "message": {k: v for k, v in good["message"].items() if k != "to"}}
    )
    assert not validator.is_valid({**good, "success": False})


EMAIL_LISTS = {
    "channel": "email",
    "to": ["ada@example.com", "Bo@example.com"],
    "cc": ["ADA@example.com", "cy@example.com"],
    "bcc": ["dee@example.com"],
    "replyTo": "desk@example.com",
    "subject": "s",
    "html": "<p>hi</p>",
}


def _valid(route_key: str, status: int, answer: Answer) -> dict[str, Any]:
    assert answer["statusCode"] == status, answer["body"]
    _, schema = _schema(route_key, status)
    assert schema is not None
    body: dict[str, Any] = json.loads(answer["body"])
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in Draft202012Validator(schema).iter_errors(body)]
    assert errors == [], answer["body"]
    return body


def test_an_email_with_lists_is_answered_on_the_documented_schemas_of_send_get_and_batch(api: Api) -> None:
    """Email as senders write it: to a list, cc, bcc, replyTo and html (no body) are each documented."""
    sent = _valid(m.SEND_MESSAGE.key, 201, api.call("POST", "/v1/messages", EMAIL_LISTS))
    shown = sent["message"]
    assert (shown["to"], shown["cc"], shown["bcc"]) == (
        ["ada@example.com", "Bo@example.com"],
        ["cy@example.com"],
        ["dee@example.com"],
    )
    assert (shown["replyTo"], shown["html"], shown["body"]) == ("desk@example.com", "<p>hi</p>", "")

    got = _valid(messages_router.GET_MESSAGE.key, 200, api.call("GET", f"/v1/messages/{shown['id']}"))
    assert got["message"] == shown

    too_many = {
        **EMAIL_LISTS,
        "to": [f"r{i}@example.com" for i in range(30)],
        "cc": [f"c{i}@x.io" for i in range(21)],
    }
    items = [{**EMAIL_LISTS, "subject": "batched"}, {**SMS, "cc": ["a@example.com"]}, too_many]
    batch = api.call("POST", "/v1/messages/batch", {"messages": items})
    results = _valid(m.SEND_BATCH.key, 200, batch)["results"]
    assert [result["status"] for result in results] == [201, 400, 400]
    assert results[2]["error"]["details"][0]["field"] == "to"
    refused = _valid(m.SEND_MESSAGE.key, 400, api.call("POST", "/v1/messages", too_many))
    assert refused["error"]["details"] == [
        {
            "field": "to",
            "message": "at most 50 recipients in to, cc and bcc together, once each; these name 52",
        }
    ]
    strict = api.call("POST", "/v1/messages/batch", {"messages": [too_many]}, query={"validation": "strict"})
    assert "messages.0.to" in strict["body"]
    assert results[0]["message"]["cc"] == ["cy@example.com"]
    assert results[1]["error"]["details"][0]["field"] == "cc"  # the item's own Result names its field


def test_a_campaign_fanned_out_on_the_fakes_is_answered_on_the_documented_schemas(api: Api) -> None:
    """Its counts end true (the repeat a duplicate, the bad line invalid and listed by its line), and
    its one message carries its campaignId, on `GET /v1/messages?campaignId=`."""
    campaign_id = api.sent_campaign()["id"]

    shown = _valid(c.GET_CAMPAIGN.key, 200, api.call("GET", f"/v1/campaigns/{campaign_id}"))["campaign"]
    assert shown["status"] == "completed"
    assert shown["completedAt"] is not None
    assert shown["counts"] == {
        "total": 3,
        "accepted": 1,
        "duplicates": 1,
        "suppressed": 0,
        "invalid": 1,
        "sent": 0,
        "delivered": 0,
        "failed": 0,
    }
    listed_errors = api.call("GET", f"/v1/campaigns/{campaign_id}/errors")
    errors = _valid(c.LIST_CAMPAIGN_ERRORS.key, 200, listed_errors)["errors"]
    assert [(error["line"], error["error"]["code"]) for error in errors] == [(2, "validation_error")]
    assert errors[0]["error"]["details"][0]["field"] == "to"
    listed = api.call("GET", "/v1/messages", query={"campaignId": campaign_id})
    messages = _valid(m.LIST_MESSAGES.key, 200, listed)["messages"]
    assert [(message["to"], message["campaignId"]) for message in messages] == [("+15550100031", campaign_id)]
    assert messages[0]["metadata"] == {"segment": "a"}
    assert "campaignId" not in api.sent()  # a message of no campaign shows none


def test_a_campaign_to_upload_answers_its_url_and_starts_once_its_list_is_there(api: Api) -> None:
    created = _valid(c.CREATE_CAMPAIGN.key, 201, api.call("POST", "/v1/campaigns", TO_UPLOAD))
    campaign_id = created["campaign"]["id"]
    assert created["upload"]["url"].startswith("https://")
    assert created["upload"]["expiresAt"] > created["campaign"]["createdAt"]

    refused = _valid(c.START_CAMPAIGN.key, 409, api.campaign_call("start", campaign_id))
    assert refused["error"]["code"] == "recipients_not_ready"
    api.recipient_files.upload(WS, campaign_id, b'{"to": "+15550100032"}\n{"to": "+15550100033"}\n')
    started = _valid(c.START_CAMPAIGN.key, 202, api.campaign_call("start", campaign_id))
    assert started["campaign"]["status"] == "sending"
    run_queued(api.fan_out, api.campaign_work)
    assert api.campaign_store.counts_of(WS, campaign_id)["accepted"] == 2


def test_a_finished_campaign_is_a_409_campaign_finished_to_every_change(api: Api) -> None:
    campaign_id = api.finished()["id"]

    for action in ("start", "pause", "resume", "cancel"):
        route = {"start": c.START_CAMPAIGN, "pause": c.PAUSE_CAMPAIGN, "resume": c.RESUME_CAMPAIGN}.get(
            action, c.CANCEL_CAMPAIGN
        )
        body = _valid(route.key, 409, api.campaign_call(action, campaign_id))
        assert body["error"]["code"] == "campaign_finished"
    assert api.campaign_store.campaigns[(WS, campaign_id)].status.value == "canceled"


def test_a_paused_campaign_creates_nothing_until_it_is_resumed(api: Api) -> None:
    campaign = api.started()
    paused = _valid(c.PAUSE_CAMPAIGN.key, 200, api.campaign_call("pause", campaign["id"]))["campaign"]
    assert (paused["status"], paused["pausedReason"]) == ("paused", "paused")

    run_queued(api.fan_out, api.campaign_work)
    listed = api.call("GET", "/v1/messages", query={"campaignId": campaign["id"]})
    assert json.loads(listed["body"])["messages"] == []

    resumed = _valid(c.RESUME_CAMPAIGN.key, 200, api.campaign_call("resume", campaign["id"]))["campaign"]
    assert (resumed["status"], resumed["pausedReason"]) == ("sending", None)
    run_queued(api.fan_out, api.campaign_work)
    shown = json.loads(api.call("GET", f"/v1/campaigns/{campaign['id']}")["body"])["campaign"]
    assert (shown["status"], shown["counts"]["accepted"]) == ("completed", 1)
