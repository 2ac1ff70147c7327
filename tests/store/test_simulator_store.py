"""The simulator's store contract, on every engine (its records' expiry on moto and DynamoDB Local).

A delivery is recorded once per Idempotency-Key, however many copies of the call race: one call
records it, every other is answered with that record. Calls are counted exactly. Each workspace
reads its own records only, and every record expires after 7 days. A provider event that moves no
status (an opt-out) is applied by being recorded, once.
"""

from __future__ import annotations

from datetime import timedelta

from msgspec.structs import replace
from sendonce.modes import twin_of
from sendonce.provider_events.model import SIMULATOR, ProviderEvent, ProviderEventType
from sendonce.provider_events.ports import EventOutcome
from sendonce.simulator.ports import SimulatedDelivery

from tests.store.conftest import NOW, DynamoDbEngine, Stores, created, race

TWIN = twin_of("ws_a")
COPIES = 10


def _delivery(message_id: str = "msg_01JAAAAAAAAAAAAAAAAAAAAAAA", workspace: str = TWIN) -> SimulatedDelivery:
    return SimulatedDelivery(
        workspace_id=workspace,
        message_id=message_id,
        channel="email",
        to="ann@example.com",
        subject="hi",
        body="hello",
        at=NOW,
        provider_id=f"sim_{message_id}",
        idempotency_key=message_id,
    )


def test_an_emails_lists_are_recorded_as_the_call_carried_them(stores: Stores) -> None:
    delivery = replace(
        _delivery(), to_list=("ann@example.com", "bo@example.com"), cc=(), bcc=("cy@example.com",)
    )

    assert stores.simulator.accept(delivery) == (delivery, True)
    assert stores.simulator.deliveries(TWIN, delivery.message_id) == [delivery]
    plain = _delivery("msg_01JBBBBBBBBBBBBBBBBBBBBBBB")
    stores.simulator.accept(plain)
    assert stores.simulator.deliveries(TWIN, plain.message_id) == [plain]


def test_given_10_copies_of_one_call_at_once_then_one_records_and_all_get_its_record(stores: Stores) -> None:
    store = stores.simulator
    calls = [replace(_delivery(), at=NOW + timedelta(seconds=i)) for i in range(COPIES)]

    answers = race(COPIES, lambda i: store.accept(calls[i]))

    assert all(isinstance(answer, tuple) for answer in answers), answers
    firsts = [answer for answer in answers if isinstance(answer, tuple) and answer[1]]
    assert len(firsts) == 1, answers
    assert {answer[0] for answer in answers if isinstance(answer, tuple)} == {firsts[0][0]}
    assert store.deliveries(TWIN, _delivery().message_id) == [firsts[0][0]]


def test_calls_are_counted_exactly_under_a_race(stores: Stores) -> None:
    store = stores.simulator

    answers = race(COPIES, lambda _: store.count_call(TWIN, "msg_x", NOW))

    assert sorted(answers) == list(range(1, COPIES + 1))  # type: ignore[type-var]


def test_a_workspace_reads_its_own_deliveries_newest_first(stores: Stores) -> None:
    store = stores.simulator
    older, newer = "msg_01JAAAAAAAAAAAAAAAAAAAAAAA", "msg_01JBBBBBBBBBBBBBBBBBBBBBBB"
    for message_id in (older, newer):
        store.accept(_delivery(message_id))
    store.accept(_delivery("msg_01JCCCCCCCCCCCCCCCCCCCCCCC", workspace=twin_of("ws_b")))

    assert [d.message_id for d in store.deliveries(TWIN, None)] == [newer, older]
    assert store.deliveries(TWIN, "msg_01JCCCCCCCCCCCCCCCCCCCCCCC") == []
    assert store.deliveries(twin_of("ws_b"), older) == []


def test_every_record_expires_7_days_after_it_was_made(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    store = stores.simulator
    store.accept(_delivery())
    store.count_call(TWIN, "msg_x", NOW)

    records = [item for item in dynamodb_engine.items() if item["pk"]["S"] == f"SIMULATOR#{TWIN}"]

    assert len(records) == 2
    assert {int(item["expiresAt"]["N"]) for item in records} == {int((NOW + timedelta(days=7)).timestamp())}


def test_given_an_opt_out_of_a_test_message_then_it_is_applied_once_and_moves_no_status(
    stores: Stores,
) -> None:
    message = created(stores, workspace=TWIN)
    event = ProviderEvent(
        SIMULATOR,
        "sim_opted_out",
        message.id,
        ProviderEventType.OPTED_OUT,
        "2036-11-30T12:00:00Z",
        to=message.to,
    )

    answers = race(COPIES, lambda _: stores.events.apply_provider_event(event, NOW))

    outcomes = [answer[0] for answer in answers if isinstance(answer, tuple)]
    assert outcomes.count(EventOutcome.APPLIED) == 1, answers
    assert outcomes.count(EventOutcome.REPEATED) == COPIES - 1, answers
    assert stores.sending.get(TWIN, message.id) == message
