"""Test mode on in-memory ports: the twin and its keys, the simulator's recipient table, the simulator
as an honest provider under the real Dispatcher, the provider resolution that gives a test message
the simulator and nothing else, and `GET /v1/test/deliveries` through the real handler."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sendonce import composition
from sendonce.api import dependencies
from sendonce.api.app import handle
from sendonce.auth.api_keys import generate_api_key, hash_api_key, issue_api_key, resolve_workspace
from sendonce.dedup.identity import dedup_identity
from sendonce.dispatch.dispatcher import Dispatcher, DispatchOutcome, DispatchRequest
from sendonce.dispatch.retry_policy import RetryPolicy
from sendonce.entrypoints.shared.provider_registry import PROVIDERS, Providers
from sendonce.errors import (
    AmbiguousOutcome,
    DependencyUnavailable,
    PermanentFailure,
    RetryLater,
    TransientFailure,
)
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Channel, Message, Status
from sendonce.messages.ports import DedupClaim
from sendonce.messages.service import MessageService
from sendonce.modes import (
    TEST_DATA_RETENTION,
    Mode,
    is_test_workspace,
    live_workspace_of,
    mode_of,
    mode_of_key,
    retention_for,
    twin_of,
)
from sendonce.provider_events.model import SIMULATOR, ProviderEvent, ProviderEventType, from_json
from sendonce.settings import DispatcherSettings
from sendonce.simulator.ports import SimulatedDelivery
from sendonce.simulator.provider import Simulator
from sendonce.simulator.recipients import RECIPIENTS, Behaviour, behaviour_for
from sendonce.suppressions.model import Reason

from tests.support.lambda_context import FakeLambdaContext
from tests.unit.unit_fakes import (
    FakeEventQueue,
    FakeQueue,
    InMemoryApiKeys,
    InMemorySimulatorStore,
    InMemoryStore,
    ManualClock,
    fake_api_dependencies,
)

EVENTS = Path(__file__).resolve().parents[2] / "events"
LIVE = "ws_acme"
TWIN = twin_of(LIVE)
LIVE_KEY = "sk_live_acme"
TEST_KEY = "sk_test_acme"


# ---------------------------------------------------------------------------- the twin and its keys
def test_the_twin_is_its_own_workspace_and_says_its_mode() -> None:
    assert TWIN != LIVE
    assert (mode_of(LIVE), mode_of(TWIN)) == (Mode.LIVE, Mode.TEST)
    assert is_test_workspace(TWIN)
    assert not is_test_workspace(LIVE)
    assert live_workspace_of(TWIN) == live_workspace_of(LIVE) == LIVE
    with pytest.raises(ValueError, match="test twin"):
        twin_of(TWIN)


@given(st.text(min_size=1, max_size=30))
def test_no_live_workspace_is_a_twin_and_each_has_one_twin(workspace: str) -> None:
    if is_test_workspace(workspace):
        return  # never a live workspace: issue_api_key refuses it (below)
    assert twin_of(workspace) != workspace
    assert mode_of(twin_of(workspace)) is Mode.TEST
    assert live_workspace_of(twin_of(workspace)) == workspace


def test_test_data_is_kept_7_days_live_data_its_own_retention() -> None:
    assert retention_for(TWIN, timedelta(days=90)) == TEST_DATA_RETENTION == timedelta(days=7)
    assert retention_for(TWIN, None) == TEST_DATA_RETENTION
    assert retention_for(LIVE, timedelta(days=90)) == timedelta(days=90)
    assert retention_for(LIVE, None) is None


def test_a_generated_key_says_its_mode_and_a_live_one_never_looks_like_a_test_one() -> None:
    assert generate_api_key(Mode.TEST).startswith("sk_test_")
    assert generate_api_key().startswith("sk_live_")
    assert all(mode_of_key(generate_api_key()) is Mode.LIVE for _ in range(50))


def test_a_test_key_is_stored_against_the_twin_and_opens_only_the_twin() -> None:
    keys = InMemoryApiKeys()
    issue_api_key(keys, LIVE, LIVE_KEY)
    issue_api_key(keys, LIVE, TEST_KEY)  # locally: SENDONCE_LOCAL_API_KEYS' "ws_acme:sk_test_acme"
    new_test_key = issue_api_key(keys, LIVE, mode=Mode.TEST)  # sendonce create-api-key --test

    assert keys.workspaces[hash_api_key(TEST_KEY)] == TWIN
    assert keys.workspaces[hash_api_key(LIVE_KEY)] == LIVE
    assert resolve_workspace(keys, f"Bearer {TEST_KEY}") == TWIN
    assert resolve_workspace(keys, f"Bearer {new_test_key}") == TWIN
    assert resolve_workspace(keys, f"Bearer {LIVE_KEY}") == LIVE


def test_a_key_whose_prefix_and_workspace_disagree_opens_nothing() -> None:
    keys = InMemoryApiKeys()
    keys.save(hash_api_key("sk_live_stored_for_a_twin"), TWIN)  # written by hand, or by mistake
    keys.save(hash_api_key("sk_test_stored_for_live"), LIVE)

    assert resolve_workspace(keys, "Bearer sk_live_stored_for_a_twin") is None
    assert resolve_workspace(keys, "Bearer sk_test_stored_for_live") is None


def test_a_key_is_never_issued_for_a_twin_by_its_own_id_nor_with_a_prefix_against_its_mode() -> None:
    keys = InMemoryApiKeys()
    with pytest.raises(ValueError, match="test twin"):
        issue_api_key(keys, TWIN, "sk_live_x")
    with pytest.raises(ValueError, match="sk_test_"):
        issue_api_key(keys, LIVE, "sk_live_x", mode=Mode.TEST)
    with pytest.raises(ValueError, match="sk_test_"):
        issue_api_key(keys, LIVE, "sk_test_x", mode=Mode.LIVE)
    assert keys.workspaces == {}


def test_a_message_carries_its_mode_from_its_workspace(clock: ManualClock) -> None:
    assert _message(TWIN, "+15550100000", clock).mode is Mode.TEST
    assert _message(LIVE, "+15550100000", clock).mode is Mode.LIVE


# ---------------------------------------------------------------------------- the recipient table
@pytest.mark.parametrize(
    ("to", "behaviour"),
    [
        ("+15005550001", Behaviour.PERMANENT_FAILURE),
        ("+15005550002", Behaviour.TRANSIENT_TWICE),
        ("+15005550003", Behaviour.LOST_ANSWER),
        ("+15005550004", Behaviour.OPTS_OUT),
        ("success@simulator.amazonses.com", Behaviour.SES_SUCCESS),
        ("bounce@simulator.amazonses.com", Behaviour.SES_BOUNCE),
        ("complaint@simulator.amazonses.com", Behaviour.SES_COMPLAINT),
        ("Bounce@simulator.amazonses.com", Behaviour.SES_BOUNCE),  # the local part in any ASCII case
        ("+15005550005", Behaviour.DELIVERED),
        ("+15550100000", Behaviour.DELIVERED),
        ("ann@example.com", Behaviour.DELIVERED),
    ],
)
def test_the_recipient_table(to: str, behaviour: Behaviour) -> None:
    assert behaviour_for(to) is behaviour


def test_the_table_holds_the_contracts_rows_and_no_others() -> None:
    assert set(RECIPIENTS) == {
        "+15005550001",
        "+15005550002",
        "+15005550003",
        "+15005550004",
        "success@simulator.amazonses.com",
        "bounce@simulator.amazonses.com",
        "complaint@simulator.amazonses.com",
    }


# ---------------------------------------------------------------------------- the simulator alone
@dataclass
class _Simulated:
    store: InMemorySimulatorStore = field(default_factory=InMemorySimulatorStore)
    events: FakeEventQueue = field(default_factory=FakeEventQueue)

    def simulator(self, clock: ManualClock) -> Simulator:
        return Simulator(self.store, self.events, clock)

    def deliveries(self, message: Message) -> list[SimulatedDelivery]:
        return self.store.deliveries(message.workspace_id, message.id)

    def published(self) -> list[tuple[ProviderEventType, str]]:
        return [(event.type, event.message_id) for event in self.events.published]


def _message(workspace: str, to: str, clock: ManualClock, channel: str = "sms", **changes: Any) -> Message:
    return Message(
        id=new_message_id(),
        workspace_id=workspace,
        channel=Channel(channel),
        to=to,
        body="hello",
        status=Status.SENDING,
        created_at=clock.now,
        updated_at=clock.now,
        **changes,
    )


def test_the_permanent_number_is_refused_and_nothing_is_delivered(clock: ManualClock) -> None:
    sim = _Simulated()
    message = _message(TWIN, "+15005550001", clock)

    with pytest.raises(PermanentFailure) as refused:
        sim.simulator(clock).send(message)

    assert refused.value.code == "provider_rejected"
    assert sim.deliveries(message) == []
    assert sim.events.published == []


def test_the_transient_number_really_fails_its_first_two_calls_then_accepts(clock: ManualClock) -> None:
    sim = _Simulated()
    message = _message(TWIN, "+15005550002", clock)

    for _ in range(2):
        with pytest.raises(TransientFailure) as failed:
            sim.simulator(clock).send(message)
        assert failed.value.code == "provider_unavailable"
        assert sim.deliveries(message) == []
    provider_id = sim.simulator(clock).send(message)

    assert [d.provider_id for d in sim.deliveries(message)] == [provider_id]
    assert sim.published() == [(ProviderEventType.DELIVERED, message.id)]


def test_the_lost_answer_number_records_the_delivery_then_loses_the_answer(clock: ManualClock) -> None:
    sim = _Simulated()
    message = _message(TWIN, "+15005550003", clock)

    with pytest.raises(AmbiguousOutcome) as lost:
        sim.simulator(clock).send(message)
    assert lost.value.code == "provider_timeout"
    assert len(sim.deliveries(message)) == 1  # recorded before the answer was lost

    clock.advance(2)
    provider_id = sim.simulator(clock).send(message)  # the retry, under the same Idempotency-Key

    [delivery] = sim.deliveries(message)
    assert delivery.provider_id == provider_id
    assert delivery.at == clock.now - timedelta(seconds=2)  # the first call's record, answered again
    assert delivery.idempotency_key == message.id


def test_the_opt_out_number_is_delivered_then_opts_out_in_an_event_naming_the_message(
    clock: ManualClock,
) -> None:
    sim = _Simulated()
    message = _message(TWIN, "+15005550004", clock)

    sim.simulator(clock).send(message)

    assert sim.published() == [
        (ProviderEventType.DELIVERED, message.id),
        (ProviderEventType.OPTED_OUT, message.id),
    ]
    opted_out = sim.events.published[1]
    assert (opted_out.provider, opted_out.to) == (SIMULATOR, "+15005550004")
    assert sim.events.delays == [1, 1]  # reported after the call, as a provider's webhook follows it
    assert len(sim.deliveries(message)) == 1


@pytest.mark.parametrize(
    ("to", "reports"),
    [
        ("success@simulator.amazonses.com", [(ProviderEventType.DELIVERED, None, None)]),
        ("bounce@simulator.amazonses.com", [(ProviderEventType.FAILED, "bounced", Reason.BOUNCED)]),
        (
            "complaint@simulator.amazonses.com",
            [
                (ProviderEventType.DELIVERED, None, None),
                (ProviderEventType.DELIVERED, None, Reason.COMPLAINED),
            ],
        ),
        ("ann@example.com", [(ProviderEventType.DELIVERED, None, None)]),
    ],
)
def test_the_ses_mailbox_simulators_addresses_end_as_ses_would_end_them(
    clock: ManualClock, to: str, reports: list[tuple[ProviderEventType, str | None, Reason | None]]
) -> None:
    sim = _Simulated()
    message = _message(TWIN, to, clock, channel="email", subject="hi")

    sim.simulator(clock).send(message)

    published = [
        (event.type, event.error.code if event.error else None, event.suppression_reason)
        for event in sim.events.published
    ]
    assert published == reports
    [delivery] = sim.deliveries(message)
    assert (delivery.to, delivery.subject, delivery.channel) == (to, "hi", "email")


def test_an_email_to_several_meets_its_first_listed_recipients_behaviour_and_reports_about_it(
    clock: ManualClock,
) -> None:
    """One call for all its recipients: the bounce address in cc bounces the message, and the bounce
    names that address (the one suppressed), not the first recipient."""
    sim = _Simulated()
    message = _message(
        TWIN,
        "ann@example.com",
        clock,
        channel="email",
        subject="hi",
        to_list=("ann@example.com",),
        cc=("bounce@simulator.amazonses.com",),
        bcc=("cy@example.com",),
    )

    sim.simulator(clock).send(message)

    [bounce] = sim.events.published
    assert (bounce.type, bounce.suppression_reason) == (ProviderEventType.FAILED, Reason.BOUNCED)
    assert bounce.to == "bounce@simulator.amazonses.com"
    [delivery] = sim.deliveries(message)
    assert (delivery.to_list, delivery.cc, delivery.bcc) == (
        ("ann@example.com",),
        ("bounce@simulator.amazonses.com",),
        ("cy@example.com",),
    )


def test_a_replay_reports_again_under_the_same_event_ids_so_a_lost_report_is_applied_once(
    clock: ManualClock,
) -> None:
    sim = _Simulated()
    message = _message(TWIN, "+15005550004", clock)

    sim.simulator(clock).send(message)
    sim.simulator(clock).send(message)

    ids = [event.event_id for event in sim.events.published]
    assert ids[:2] == ids[2:]
    assert len(set(ids)) == 2
    assert len(sim.deliveries(message)) == 1


def test_the_simulator_refuses_a_live_message(clock: ManualClock) -> None:
    sim = _Simulated()
    message = _message(LIVE, "+15550100000", clock)

    with pytest.raises(PermanentFailure):
        sim.simulator(clock).send(message)
    assert sim.store.delivered == {}


def test_simulator_events_concern_test_messages_real_providers_live_ones(clock: ManualClock) -> None:
    test_message, live_message = _message(TWIN, "+15550100000", clock), _message(LIVE, "+15550100000", clock)

    def event(provider: str) -> ProviderEvent:
        return ProviderEvent(provider, "e", "msg", ProviderEventType.DELIVERED, "2026-01-01T00:00:00Z")

    assert event(SIMULATOR).concerns(test_message)
    assert not event(SIMULATOR).concerns(live_message)
    assert event("http").concerns(live_message)
    assert not event("http").concerns(test_message)
    assert event("ses").concerns(live_message)
    assert not event("ses").concerns(test_message)


def test_an_opt_out_event_survives_its_queue_record() -> None:
    event = ProviderEvent(
        SIMULATOR,
        "sim_x_opted_out",
        "msg_x",
        ProviderEventType.OPTED_OUT,
        "2026-01-01T00:00:00Z",
        to="+15005550004",
    )
    assert from_json(event.to_json()) == event
    assert not event.changes_status


# ---------------------------------------------------------------------------- under the Dispatcher
def _queued(store: InMemoryStore, clock: ManualClock, to: str, channel: str = "sms") -> Message:
    message = Message(
        id=new_message_id(),
        workspace_id=TWIN,
        channel=Channel(channel),
        to=to,
        body="hello",
        subject="hi" if channel == "email" else None,
        status=Status.QUEUED,
        created_at=clock.now,
        updated_at=clock.now,
    )
    claim = DedupClaim(dedup_identity(TWIN, to, message.subject, "hello"), clock.now + timedelta(minutes=15))
    created = store.create(message, claim, None, clock.now, clock.now)
    return created.message  # type: ignore[union-attr]


def _deliver_until_done(
    dispatcher: Dispatcher, message: Message, clock: ManualClock
) -> list[DispatchOutcome | str]:
    """The queue's part: each RetryLater brings the record back after its delay."""
    outcomes: list[DispatchOutcome | str] = []
    for _ in range(10):
        try:
            outcomes.append(dispatcher.dispatch(DispatchRequest(message.workspace_id, message.id)))
            return outcomes
        except RetryLater as later:
            outcomes.append("retry")
            clock.advance(later.seconds)
    raise AssertionError(f"still retrying: {outcomes}")


@pytest.mark.parametrize(
    ("to", "channel", "outcomes", "status", "deliveries"),
    [
        ("+15005550001", "sms", [DispatchOutcome.FAILED], Status.FAILED, 0),
        ("+15005550002", "sms", ["retry", "retry", DispatchOutcome.SENT], Status.SENT, 1),
        ("+15005550003", "sms", ["retry", DispatchOutcome.SENT], Status.SENT, 1),
        ("+15005550004", "imessage", [DispatchOutcome.SENT], Status.SENT, 1),
        ("bounce@simulator.amazonses.com", "email", [DispatchOutcome.SENT], Status.SENT, 1),
        ("+15550100000", "sms", [DispatchOutcome.SENT], Status.SENT, 1),
    ],
)
def test_under_the_dispatcher_each_row_ends_as_the_contract_says_with_at_most_one_delivery(
    clock: ManualClock,
    to: str,
    channel: str,
    outcomes: list[DispatchOutcome | str],
    status: Status,
    deliveries: int,
) -> None:
    store, sim = InMemoryStore(), _Simulated()
    providers = Providers(_dispatcher_settings(), live={}, test=lambda settings: sim.simulator(clock))
    dispatcher = Dispatcher(store, providers, RetryPolicy(max_attempts=5), claim_seconds=70, clock=clock)
    message = _queued(store, clock, to, channel)

    assert _deliver_until_done(dispatcher, message, clock) == outcomes

    assert store.messages[message.id].status is status
    assert len(sim.deliveries(message)) == deliveries
    if status is Status.FAILED:
        assert store.released == [message.id]  # the dedup lock, as for any failed message


# ---------------------------------------------------------------------------- provider resolution
def _dispatcher_settings() -> DispatcherSettings:
    return DispatcherSettings.from_environment(
        {
            "MESSAGES_TABLE": "MessagesTable",
            "SENDONCE_HASHING_KEY_ARN": "HashingKeySecret",
            "SENDONCE_SMS_PROVIDER": "http",
            "SENDONCE_IMESSAGE_PROVIDER": "http",
            "SENDONCE_EMAIL_PROVIDER": "http",
        }
    )


@dataclass
class _Spy:
    name: str
    honours_idempotency_key: bool = False
    sent: list[str] = field(default_factory=list)

    def send(self, message: Message) -> str:
        self.sent.append(message.id)
        return "x"


def test_a_test_message_gets_the_simulator_and_the_live_registry_is_never_asked(clock: ManualClock) -> None:
    asked: list[str] = []
    simulator = _Spy("simulator", honours_idempotency_key=True)

    def live(name: str) -> Any:
        def build(settings: DispatcherSettings) -> _Spy:
            asked.append(name)
            return _Spy(name)

        return build

    providers = Providers(
        _dispatcher_settings(), live={name: live(name) for name in PROVIDERS}, test=lambda _: simulator
    )
    for channel in ("sms", "imessage", "email"):
        assert providers(_message(TWIN, "+15550100000", clock, channel=channel)) == (simulator,)
        assert providers.honour_idempotency_key(channel, Mode.TEST)
    assert asked == []

    assert [provider.name for provider in providers(_message(LIVE, "+15550100000", clock))] == ["http"]
    assert asked == ["http"]


# ---------------------------------------------------------------------------- GET /v1/test/deliveries
@pytest.fixture
def api(clock: ManualClock) -> Iterator[tuple[InMemoryStore, InMemorySimulatorStore]]:
    store, deliveries = InMemoryStore(), InMemorySimulatorStore()
    keys = InMemoryApiKeys()
    for workspace, key in ((LIVE, LIVE_KEY), (LIVE, TEST_KEY), ("ws_other", "sk_test_other")):
        issue_api_key(keys, workspace, key)
    dependencies.root.use(
        fake_api_dependencies(
            MessageService(store=store, queue=FakeQueue(), dedup_window=timedelta(minutes=15), clock=clock),
            keys,
            build_test_deliveries=lambda: deliveries,
        )
    )
    yield store, deliveries
    composition.reset_all()


def _get(key: str, query: dict[str, str] | None = None, path: str = "/v1/test/deliveries") -> tuple[int, Any]:
    event = json.loads((EVENTS / "api_list_messages.json").read_text(encoding="utf-8"))
    event["headers"]["authorization"] = f"Bearer {key}"
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["routeKey"] = event["requestContext"]["routeKey"] = f"GET {path}"
    event["queryStringParameters"] = query or None
    event["rawQueryString"] = "&".join(f"{name}={value}" for name, value in (query or {}).items())
    response = handle(event, FakeLambdaContext())  # type: ignore[arg-type]
    return response["statusCode"], json.loads(response["body"])


def _simulated(
    api: tuple[InMemoryStore, InMemorySimulatorStore], clock: ManualClock, workspace: str = TWIN
) -> Message:
    store, deliveries = api
    message = _queued(store, clock, "+15550100000") if workspace == TWIN else _message(workspace, "+1", clock)
    Simulator(deliveries, FakeEventQueue(), clock).send(message)
    return message


def test_a_test_key_reads_what_the_simulator_accepted(
    api: tuple[InMemoryStore, InMemorySimulatorStore], clock: ManualClock
) -> None:
    message = _simulated(api, clock)

    status, body = _get(TEST_KEY, {"messageId": message.id})

    assert status == 200, body
    assert body == {
        "success": True,
        "deliveries": [
            {
                "messageId": message.id,
                "channel": "sms",
                "to": "+15550100000",
                "subject": None,
                "body": "hello",
                "at": "2026-01-01T12:00:00.000Z",
            }
        ],
    }
    assert _get(TEST_KEY)[1]["deliveries"] == body["deliveries"]  # without messageId: the newest


@pytest.mark.parametrize("query", [None, {"messageId": "msg_01JAAAAAAAAAAAAAAAAAAAAAAA"}, {"messageId": "x"}])
def test_a_live_key_gets_404_whatever_it_asks(
    api: tuple[InMemoryStore, InMemorySimulatorStore], query: dict[str, str] | None
) -> None:
    status, body = _get(LIVE_KEY, query)

    assert status == 404
    assert body["error"]["code"] == "not_found"


def test_a_test_messages_id_with_the_live_key_is_404_and_another_twins_is_404_too(
    api: tuple[InMemoryStore, InMemorySimulatorStore], clock: ManualClock
) -> None:
    message = _simulated(api, clock)

    assert _get(LIVE_KEY, path=f"/v1/messages/{message.id}")[0] == 404
    assert _get(LIVE_KEY, {"messageId": message.id})[0] == 404
    assert _get("sk_test_other", {"messageId": message.id})[0] == 404
    assert _get("sk_test_other")[1]["deliveries"] == []
    assert _get(TEST_KEY, path=f"/v1/messages/{message.id}")[0] == 200


def test_a_malformed_message_id_with_a_test_key_is_400(
    api: tuple[InMemoryStore, InMemorySimulatorStore],
) -> None:
    status, body = _get(TEST_KEY, {"messageId": "not-an-id"})

    assert status == 400
    assert body["error"]["code"] == "validation_error"


def test_a_simulator_whose_records_cannot_be_written_is_a_provider_that_is_down(clock: ManualClock) -> None:
    class Down(InMemorySimulatorStore):
        def accept(self, delivery: SimulatedDelivery) -> tuple[SimulatedDelivery, bool]:
            raise DependencyUnavailable("throttled")

    with pytest.raises(TransientFailure) as down:
        Simulator(Down(), FakeEventQueue(), clock).send(_message(TWIN, "+15550100000", clock))

    assert down.value.code == "provider_unavailable"
