"""The outbox sweep against in-memory fakes: it drains everything due, page by page, within its time;
what nothing else will do goes before messages that only wait in their queue; every move is
conditional; a dead claim is tried again a bounded number of times, then ends `unknown` with a metric.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from msgspec.structs import replace
from sendonce.dispatch.outbox import CHUNK, MAX_RECLAIMS, OutboxSweeper, metric_name
from sendonce.dispatch.ports import OutboxEntry, Reclaim
from sendonce.errors import QueueUnavailable
from sendonce.messages.handoff import HANDOFF_GRACE
from sendonce.messages.model import Channel, Status
from sendonce.messages.ports import Deliverable, Handoff
from sendonce.observability import metrics

from tests.unit.unit_fakes import T0, ManualClock

SMS, EMAIL = Channel("sms"), Channel("email")


@dataclass
class Row:
    entry: OutboxEntry
    reclaims: int = 0


@dataclass
class OutboxFake:
    """The outbox index in memory: due entries in pages (oldest first), moves conditional on what was read."""

    page_size: int = 7
    rows: dict[str, Row] = field(default_factory=dict)
    pages_read: list[frozenset[Status]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, message_id: str, status: Status, due_at: datetime, **changes: object) -> OutboxEntry:
        entry = OutboxEntry(
            id=message_id,
            workspace_id="ws_a",
            channel=SMS,
            status=status,
            due_at=due_at,
            send_at=None,
        )
        entry = replace(entry, **changes)  # type: ignore[arg-type]
        self.rows[message_id] = Row(entry)
        return entry

    def status(self, message_id: str) -> Status:
        return self.rows[message_id].entry.status

    def due(self, now: datetime) -> list[OutboxEntry]:
        return sorted(
            (
                row.entry
                for row in self.rows.values()
                if row.entry.due_at is not None and row.entry.due_at <= now
            ),
            key=lambda entry: entry.due_at,
        )

    def due_pages(self, now: datetime, statuses: Collection[Status]) -> Iterator[Sequence[OutboxEntry]]:
        with self.lock:
            wanted = [entry for entry in self.due(now) if entry.status in statuses]
        for start in range(0, len(wanted), self.page_size):
            self.pages_read.append(frozenset(statuses))
            yield wanted[start : start + self.page_size]

    def _unmoved(self, entry: OutboxEntry) -> bool:
        row = self.rows.get(entry.id)
        return row is not None and (row.entry.status, row.entry.due_at) == (entry.status, entry.due_at)

    def move_outbox_entry(
        self, entry: OutboxEntry, now: datetime, *, status: Status, due_at: datetime | None
    ) -> bool:
        with self.lock:
            if not self._unmoved(entry):
                return False
            row = self.rows[entry.id]
            row.entry = replace(row.entry, status=status, due_at=due_at)  # type: ignore[arg-type]
            return True

    def reclaim(self, entry: OutboxEntry, now: datetime, *, due_at: datetime, max_reclaims: int) -> Reclaim:
        with self.lock:
            if not self._unmoved(entry):
                return Reclaim.SUPERSEDED
            row = self.rows[entry.id]
            if row.reclaims >= max_reclaims:
                return Reclaim.CAP_REACHED
            row.reclaims += 1
            row.entry = replace(row.entry, status=Status.QUEUED, due_at=due_at)
            return Reclaim.RECLAIMED

    def claim_and_die(self, message_id: str, deadline: datetime) -> None:
        """A dispatcher claims the message and dies: it is `sending` until its claim's deadline."""
        row = self.rows[message_id]
        row.entry = replace(row.entry, status=Status.SENDING, due_at=deadline)


@dataclass
class QueueFake:
    """Channel queues that record what they are given, in order; `refuse` names messages SQS refuses."""

    records: list[tuple[str, int]] = field(default_factory=list)
    batches: list[int] = field(default_factory=list)
    refuse: set[str] = field(default_factory=set)
    down: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def enqueue(self, message: Deliverable, delay_seconds: int = 0) -> None:
        if self.down:
            raise QueueUnavailable("SQS is down")
        with self.lock:
            self.records.append((message.id, delay_seconds))

    def enqueue_batch(self, handoffs: Sequence[Handoff]) -> list[Handoff]:
        if self.down:
            raise QueueUnavailable("SQS is down")
        with self.lock:
            self.batches.append(len(handoffs))
            self.records += [
                (h.message.id, h.delay_seconds) for h in handoffs if h.message.id not in self.refuse
            ]
        return [handoff for handoff in handoffs if handoff.message.id in self.refuse]

    def ids(self) -> list[str]:
        return [message_id for message_id, _ in self.records]


@dataclass
class Ticks:
    """The time left of an invocation that loses `per_check` seconds each time it is asked."""

    left: float
    per_check: float = 0.0

    def __call__(self) -> float:
        self.left -= self.per_check
        return self.left


@pytest.fixture(autouse=True)
def _no_metrics_left() -> Iterator[None]:
    metrics.clear_metrics()
    yield
    metrics.clear_metrics()


def _metric(name: str) -> float:
    return sum(metrics.metric_set.get(name, {}).get("Value", []))


def _sweeper(
    outbox: OutboxFake,
    queue: QueueFake,
    clock: ManualClock,
    *,
    honours_key: bool = True,
    workers: int = 4,
) -> OutboxSweeper:
    return OutboxSweeper(outbox, queue, lambda channel, mode: honours_key, clock, workers=workers)


def _ids(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{index:05d}" for index in range(count)]


# ---------------------------------------------------------------------------- draining
def test_given_a_peak_of_due_messages_then_one_sweep_hands_every_one_over_once_in_batches_of_10() -> None:
    clock, outbox, queue = ManualClock(), OutboxFake(page_size=7), QueueFake()
    due = _ids("m", 1_003)
    for index, message_id in enumerate(due):
        outbox.add(message_id, Status.ACCEPTED, T0 - timedelta(seconds=index % 50))

    report = _sweeper(outbox, queue, clock).sweep()

    assert report == {"handed_off": 1_003}
    assert sorted(queue.ids()) == due
    assert max(queue.batches) == CHUNK
    assert {outbox.status(message_id) for message_id in due} == {Status.QUEUED}
    assert outbox.due(T0) == []
    assert outbox.due(T0 + HANDOFF_GRACE)  # each is due again should its dispatcher not claim it


def test_given_schedules_coming_due_then_each_is_queued_with_the_delay_left_until_its_send_at() -> None:
    clock, outbox, queue = ManualClock(), OutboxFake(), QueueFake()
    soon, late = T0 + timedelta(seconds=600.5), T0 - timedelta(seconds=30)
    outbox.add("soon", Status.SCHEDULED, T0 - timedelta(minutes=1), send_at=soon)
    outbox.add("late", Status.SCHEDULED, T0 - timedelta(minutes=1), send_at=late)

    report = _sweeper(outbox, queue, clock).sweep()

    assert report == {"scheduled": 2}
    assert sorted(queue.records) == [("late", 0), ("soon", 601)]
    assert outbox.rows["soon"].entry.due_at == soon + HANDOFF_GRACE
    assert outbox.rows["late"].entry.due_at == T0 + HANDOFF_GRACE


def test_given_little_time_left_then_the_sweep_stops_starting_work_and_the_rest_stays_due() -> None:
    clock, outbox, queue = ManualClock(), OutboxFake(page_size=10), QueueFake()
    for message_id in _ids("m", 100):
        outbox.add(message_id, Status.ACCEPTED, T0 - timedelta(seconds=1))
    # 10 s above the margin, 1 s gone at every check: three chunks are started, no more.
    time_left = Ticks(left=13.5, per_check=1.0)

    first = _sweeper(outbox, queue, clock, workers=1).sweep(time_left)

    assert first == {"handed_off": 30, "budget_spent": 1}
    assert len(outbox.due(T0)) == 70
    second = _sweeper(outbox, queue, clock).sweep()
    assert second == {"handed_off": 70}
    assert len(set(queue.ids())) == 100


def test_given_entries_falling_due_during_a_sweep_then_it_goes_round_again_for_them() -> None:
    clock, outbox, queue = ManualClock(), OutboxFake(), QueueFake()
    outbox.add("now", Status.ACCEPTED, T0)
    outbox.add("in 5 s", Status.ACCEPTED, T0 + timedelta(seconds=5))

    class Advancing(QueueFake):
        def enqueue_batch(self, handoffs: Sequence[Handoff]) -> list[Handoff]:
            clock.advance(5)  # the hand-off took a while
            return super().enqueue_batch(handoffs)

    queue = Advancing()
    report = _sweeper(outbox, queue, clock).sweep()

    assert report == {"handed_off": 2}
    assert queue.ids() == ["now", "in 5 s"]


# ---------------------------------------------------------------------------- order
def test_given_a_backlog_of_waiting_messages_then_schedules_hand_offs_and_dead_claims_go_first() -> None:
    clock, outbox, queue = ManualClock(), OutboxFake(page_size=10), QueueFake()
    waiting = _ids("waiting", 300)
    for message_id in waiting:  # older than everything else: oldest first would take them first
        outbox.add(message_id, Status.QUEUED, T0 - timedelta(hours=1))
    outbox.add("scheduled", Status.SCHEDULED, T0 - timedelta(seconds=1), send_at=T0)
    outbox.add("accepted", Status.ACCEPTED, T0 - timedelta(seconds=1))
    outbox.add("stranded", Status.SENDING, T0 - timedelta(seconds=1))

    report = _sweeper(outbox, queue, clock, workers=1).sweep()

    assert report == {"handed_off": 301, "scheduled": 1, "reclaimed": 1}
    assert set(queue.ids()[:3]) == {"scheduled", "accepted", "stranded"}
    assert outbox.pages_read[0] == frozenset(Status) - {Status.QUEUED}


def test_given_time_for_one_chunk_then_it_goes_to_a_schedule_not_to_waiting_messages() -> None:
    clock, outbox, queue = ManualClock(), OutboxFake(), QueueFake()
    for message_id in _ids("waiting", 50):
        outbox.add(message_id, Status.QUEUED, T0 - timedelta(hours=1))
    outbox.add("scheduled", Status.SCHEDULED, T0 - timedelta(seconds=1), send_at=T0)

    report = _sweeper(outbox, queue, clock, workers=1).sweep(Ticks(left=11.5, per_check=1.0))

    assert report == {"scheduled": 1, "budget_spent": 1}
    assert queue.ids() == ["scheduled"]


# ---------------------------------------------------------------------------- conditional moves
def test_given_sqs_refuses_some_records_then_those_stay_due_and_the_rest_move_on() -> None:
    clock, outbox, queue = ManualClock(), OutboxFake(), QueueFake(refuse={"m00003", "m00007"})
    for message_id in _ids("m", 12):
        outbox.add(message_id, Status.ACCEPTED, T0 - timedelta(seconds=1))

    report = _sweeper(outbox, queue, clock).sweep()

    assert report == {"handed_off": 10, "deferred": 2}
    assert [entry.id for entry in outbox.due(T0)] == ["m00003", "m00007"]
    assert outbox.status("m00003") is Status.ACCEPTED


def test_given_sqs_is_down_then_nothing_moves_and_the_sweep_does_not_go_round_again() -> None:
    clock, outbox, queue = ManualClock(), OutboxFake(), QueueFake(down=True)
    for message_id in _ids("m", 25):
        outbox.add(message_id, Status.ACCEPTED, T0 - timedelta(seconds=1))

    report = _sweeper(outbox, queue, clock).sweep()

    assert report == {"deferred": 25}
    assert len(outbox.due(T0)) == 25


def test_given_a_dispatcher_claims_an_entry_after_it_was_read_then_the_sweep_leaves_its_claim() -> None:
    clock, outbox = ManualClock(), OutboxFake()
    outbox.add("m", Status.QUEUED, T0 - timedelta(seconds=1))
    claim_deadline = T0 + timedelta(seconds=70)

    class ClaimedMeanwhile(QueueFake):
        def enqueue_batch(self, handoffs: Sequence[Handoff]) -> list[Handoff]:
            outbox.claim_and_die("m", claim_deadline)
            return super().enqueue_batch(handoffs)

    _sweeper(outbox, ClaimedMeanwhile(), clock).sweep()

    assert outbox.rows["m"].entry.status is Status.SENDING
    assert outbox.rows["m"].entry.due_at == claim_deadline


def test_given_a_finished_message_still_in_the_outbox_then_its_entry_is_cleared() -> None:
    clock, outbox, queue = ManualClock(), OutboxFake(), QueueFake()
    outbox.add("m", Status.SENT, T0 - timedelta(seconds=1))

    assert _sweeper(outbox, queue, clock).sweep() == {"cleared": 1}
    assert outbox.rows["m"].entry.due_at is None
    assert queue.records == []


# ---------------------------------------------------------------------------- stranded claims
def test_given_a_claim_that_dies_every_time_then_it_is_reclaimed_at_most_the_cap_then_unknown() -> None:
    clock, outbox, queue = ManualClock(), OutboxFake(), QueueFake()
    outbox.add("poison", Status.SENDING, T0 - timedelta(seconds=1))
    reports = []
    for _ in range(MAX_RECLAIMS + 1):
        reports.append(_sweeper(outbox, queue, clock).sweep())
        if outbox.status("poison") is Status.QUEUED:
            # Its dispatcher claims it again and dies again; the claim lapses.
            clock.advance(60)
            outbox.claim_and_die("poison", clock.now - timedelta(seconds=1))

    assert reports == [{"reclaimed": 1}] * MAX_RECLAIMS + [{"reclaim_cap_reached": 1, "stranded_unknown": 1}]
    assert queue.ids() == ["poison"] * MAX_RECLAIMS
    assert outbox.status("poison") is Status.UNKNOWN
    assert outbox.rows["poison"].entry.due_at is None
    assert _metric("OutboxReclaimCapReached") == 1
    assert _metric("OutboxStrandedUnknown") == 1
    assert _metric("MessageUnknown") == 1
    assert _metric("OutboxReclaimed") == MAX_RECLAIMS


def test_given_a_dead_claim_through_a_provider_without_idempotency_then_unknown_and_never_resent() -> None:
    clock, outbox, queue = ManualClock(), OutboxFake(), QueueFake()
    outbox.add("ses", Status.SENDING, T0 - timedelta(seconds=1), channel=EMAIL)

    report = _sweeper(outbox, queue, clock, honours_key=False).sweep()

    assert report == {"stranded_unknown": 1}
    assert queue.records == []
    assert outbox.status("ses") is Status.UNKNOWN
    assert outbox.rows["ses"].reclaims == 0
    assert _metric("OutboxStrandedUnknown") == 1
    assert _metric("OutboxReclaimCapReached") == 0


def test_given_a_dead_claim_finished_meanwhile_then_the_sweep_neither_reclaims_nor_counts_it() -> None:
    clock, outbox, queue = ManualClock(), OutboxFake(), QueueFake()
    entry = outbox.add("m", Status.SENDING, T0 - timedelta(seconds=1))
    outbox.move_outbox_entry(entry, T0, status=Status.SENT, due_at=None)  # its dispatcher woke up

    assert outbox.reclaim(entry, T0, due_at=T0, max_reclaims=MAX_RECLAIMS) is Reclaim.SUPERSEDED
    assert _sweeper(outbox, queue, clock).sweep() == {}
    assert queue.records == []


def test_metric_names_are_the_ones_the_alarms_watch() -> None:
    assert metric_name("reclaim_cap_reached") == "OutboxReclaimCapReached"
    assert metric_name("stranded_unknown") == "OutboxStrandedUnknown"
    assert metric_name("handed_off") == "OutboxHandedOff"
