"""The erasures' use cases on fakes: a request is recorded then queued, a run cancels the messages
still to be delivered before it erases them, pages through every message of the recipient, waits
for their last change to be told, resumes from where a run stopped, and the sweep recovers a lost job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sendonce.erasures.model import ERASED, ErasureCounts, ErasureStatus, Redaction
from sendonce.erasures.ports import ErasureJob
from sendonce.erasures.service import (
    QUIET_AFTER,
    SETTLE_DELAY_SECONDS,
    STALLED_AFTER,
    ErasureRunner,
    ErasureService,
    RunOutcome,
)
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Channel, Message, Status
from sendonce.messages.recipients import InvalidRecipient, normalise_email, normalise_phone

from tests.unit.erasure_fakes import FakeErasureQueue, FakeMessages, InMemoryErasureStore
from tests.unit.unit_fakes import ManualClock

WS = "ws_erase"
OTHER = "ws_other"
PHONE = "+15550100000"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
PLENTY: float = 100.0


class World:
    def __init__(self) -> None:
        self.clock = ManualClock(NOW)
        self.store = InMemoryErasureStore()
        self.queue = FakeErasureQueue()
        self.messages = FakeMessages(clock=self.clock)
        self.service = ErasureService(self.store, self.queue, clock=self.clock)
        self.runner = ErasureRunner(
            store=self.store,
            queue=self.queue,
            eraser=self.messages,
            messages=self.messages.page,
            cancel=self.messages.cancel,
            clock=self.clock,
        )

    def message(
        self, status: Status, *, to: str = PHONE, workspace: str = WS, age: timedelta = timedelta(hours=1)
    ) -> Message:
        at = self.clock() - age
        message = Message(
            id=new_message_id(int(at.timestamp() * 1000)),
            workspace_id=workspace,
            channel=Channel("sms"),
            to=to,
            body="secret words",
            status=status,
            created_at=at,
            updated_at=at,
        )
        self.messages.messages[message.id] = message
        return message

    def run_all(self) -> RunOutcome:
        """Every queued job run, in order, until none is left (delays waited out on the clock)."""
        outcome = RunOutcome.NOTHING
        while self.queue.jobs:
            job, delay = self.queue.jobs.pop(0)
            self.clock.advance(delay)
            outcome = self.runner.run(job, lambda: PLENTY)
        return outcome


@pytest.fixture
def world() -> World:
    return World()


def test_a_request_is_recorded_pending_with_the_normalised_address_and_queued_by_id(world: World) -> None:
    erasure = world.service.request(WS, "+1 (555) 010-0000")

    assert erasure.status is ErasureStatus.PENDING
    assert erasure.id.startswith("era_")
    assert world.store.records[erasure.id].to == PHONE
    assert world.queue.jobs == [(ErasureJob(WS, erasure.id), 0)]
    assert world.service.get(WS, erasure.id) == erasure
    assert world.service.get(OTHER, erasure.id) is None  # another workspace's is not found
    assert world.service.get(WS, "era_nope") is None


def test_a_recipient_that_is_neither_a_phone_number_nor_an_address_is_refused(world: World) -> None:
    with pytest.raises(InvalidRecipient):
        world.service.request(WS, "nope")
    assert world.store.records == {}


def test_a_queue_that_refuses_the_job_loses_nothing_the_sweep_queues_it_again(world: World) -> None:
    world.queue.down = True
    erasure = world.service.request(WS, PHONE)  # accepted all the same
    world.queue.down = False

    world.clock.advance(STALLED_AFTER.total_seconds() + 1)
    assert world.runner.sweep() == 1

    assert world.queue.jobs == [(ErasureJob(WS, erasure.id), 0)]
    assert world.run_all() is RunOutcome.DONE


def test_a_run_cancels_what_is_still_to_be_delivered_then_erases_every_message_of_the_recipient(
    world: World,
) -> None:
    delivered = world.message(Status.DELIVERED)
    scheduled = world.message(Status.SCHEDULED)
    queued = world.message(Status.QUEUED)
    someone_else = world.message(Status.DELIVERED, to="+15550100001")
    other_workspace = world.message(Status.DELIVERED, workspace=OTHER)
    world.messages.suppressions[(WS, PHONE)] = PHONE
    world.messages.told = {
        m.id: {"message.delivered", "message.canceled"} for m in world.messages.messages.values()
    }
    erasure = world.service.request(WS, PHONE)

    assert world.run_all() is RunOutcome.DONE

    assert sorted(world.messages.canceled) == sorted([scheduled.id, queued.id])
    for message in (delivered, scheduled, queued):
        assert world.messages.messages[message.id].to == ERASED
        assert world.messages.messages[message.id].body == ERASED
    assert world.messages.messages[someone_else.id] == someone_else
    assert world.messages.messages[other_workspace.id] == other_workspace
    assert world.messages.suppressions[(WS, PHONE)] == ERASED  # its shown address; the entry stays
    done = world.service.get(WS, erasure.id)
    assert done is not None
    assert done.status is ErasureStatus.DONE
    assert done.completed_at == world.clock()
    assert done.counts == ErasureCounts(messages=3, canceled=2, suppressions=1)
    assert erasure.id not in world.store.records  # the address is gone with the pending record


def test_a_run_again_changes_nothing(world: World) -> None:
    world.message(Status.DELIVERED)
    erasure = world.service.request(WS, PHONE)
    job = world.queue.jobs[0][0]
    assert world.run_all() is RunOutcome.DONE

    assert world.runner.run(job, lambda: PLENTY) is RunOutcome.NOTHING
    done = world.service.get(WS, erasure.id)
    assert done is not None
    assert done.counts.messages == 1


def test_a_canceled_message_is_erased_again_until_its_canceled_event_is_told(world: World) -> None:
    scheduled = world.message(Status.SCHEDULED)
    world.service.request(WS, PHONE)
    job, _ = world.queue.jobs.pop(0)

    assert world.runner.run(job, lambda: PLENTY) is RunOutcome.SETTLING
    assert world.queue.jobs == [(job, SETTLE_DELAY_SECONDS)]
    assert world.store.records[job.erasure_id].unsettled == {scheduled.id}

    world.messages.told[scheduled.id] = {"message.scheduled", "message.canceled"}  # the stream caught up
    assert world.run_all() is RunOutcome.DONE


def test_a_change_never_told_stops_holding_the_erasure_once_the_message_is_quiet(world: World) -> None:
    world.message(Status.SENDING, age=timedelta(seconds=0))  # a dispatcher claimed it just now
    world.service.request(WS, PHONE)
    job, _ = world.queue.jobs.pop(0)
    assert world.runner.run(job, lambda: PLENTY) is RunOutcome.SETTLING

    world.clock.advance(QUIET_AFTER.total_seconds())
    assert world.run_all() is RunOutcome.DONE


def test_a_run_short_of_time_hands_itself_on_and_the_next_resumes_from_its_cursor(world: World) -> None:
    messages = [world.message(Status.DELIVERED, age=timedelta(hours=n + 1)) for n in range(5)]
    world.messages.page_size = 2
    world.service.request(WS, PHONE)
    job, _ = world.queue.jobs.pop(0)
    times = iter([PLENTY, 1.0])  # time for one page only

    assert world.runner.run(job, lambda: next(times)) is RunOutcome.CONTINUED
    erased = [m for m in messages if world.messages.messages[m.id].to == ERASED]
    assert len(erased) == 2
    assert world.queue.jobs == [(job, 0)]

    assert world.run_all() is RunOutcome.DONE
    assert all(world.messages.messages[m.id].to == ERASED for m in messages)
    done = world.service.get(WS, job.erasure_id)
    assert done is not None
    assert done.counts.messages == 5


def test_the_sweep_leaves_alone_an_erasure_a_run_moved_on_lately(world: World) -> None:
    world.service.request(WS, PHONE)
    world.clock.advance(STALLED_AFTER.total_seconds() - 1)

    assert world.runner.sweep() == 0


def test_a_redaction_matches_every_form_of_the_address_and_erases_recipient_and_content_fields() -> None:
    phone = Redaction.of(normalise_phone(PHONE))
    email = Redaction.of(normalise_email("Ann@Example.com"))

    assert phone.names("call +15550100000 now")
    assert phone.names("15550100000")
    assert not phone.names("+15550100001")
    assert email.names("ANN@example.COM")
    assert not email.names("bo@example.com")
    snapshot = {
        "id": "msg_1",
        "to": ["ann@example.com", "bo@example.com"],
        "body": "hello",
        "subject": None,
        "metadata": {"note": "for Ann@example.com", "order": "42"},
        "attempts": 1,
    }
    assert email.value(snapshot) == {
        "id": "msg_1",
        "to": [ERASED, ERASED],
        "body": ERASED,
        "subject": None,
        "metadata": {"note": ERASED, "order": "42"},
        "attempts": 1,
    }
