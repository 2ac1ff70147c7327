"""The outbox: no accepted message is left behind, and none waits behind a backlog.

Every message carries an outbox due time while something is still owed to it: its hand-off to
the queue (the API's direct hand-off failed, or a scheduled send comes within SQS's 15-minute
reach), or the end of a claimed attempt (a dispatcher that died mid-send). A scheduled function
reads the due entries from a sparse index and drives each to its end under the delivery rules.

A sweep drains everything due within its invocation's time: it follows every shard's pages, hands
records over ten at a time from a few threads, and starts no more work once the time left is under
a margin; what it could not reach stays due for the next sweep. What nothing else will do goes
first (hand-offs never made, schedules coming due, dead claims), then the messages that only wait
in their queue past their grace, so a backlog of those never delays a schedule. A dead claim is
tried again a bounded number of times; then the message ends `unknown`, for an operator.
Every move is conditional on the entry as it was read, so a sweep never overrides a dispatcher.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import datetime
from functools import partial
from itertools import chain

from msgspec import Struct, field

from sendonce.clock import Clock, TimeLeft, utc_now
from sendonce.dispatch.ports import OutboxEntry, OutboxStore, Reclaim
from sendonce.errors import DependencyUnavailable, QueueUnavailable
from sendonce.messages.handoff import HANDOFF_GRACE, MAX_QUEUE_DELAY
from sendonce.messages.model import WAITING_STATUSES, Channel, Status
from sendonce.messages.ports import Handoff, MessageQueue
from sendonce.modes import Mode, mode_of
from sendonce.observability import logger, metrics

# Messages that only wait in their queue past their grace: re-enqueued after everything else.
WAITING = frozenset({Status.QUEUED})
FIRST = frozenset(Status) - WAITING
# A claim found dead is tried again at most this often: a message that kills its dispatcher
# every time must not be sent forever.
MAX_RECLAIMS = 3
# One SQS SendMessageBatch; a worker hands a chunk over, then moves its entries.
CHUNK = 10
# Threads handing chunks over; within botocore's 10 pooled connections a client, with one left for reading.
WORKERS = 8
# No chunk is started with less time left than this: chunks under way must end, and metrics be flushed.
STOP_MARGIN_SECONDS = 10.0
# Without an invocation's clock (a test, the bench): what a 50-second function has after its margin.
DEFAULT_BUDGET_SECONDS = 50.0


def budget(seconds: float) -> TimeLeft:
    """The time left of a budget of `seconds` starting now."""
    deadline = time.monotonic() + seconds
    return lambda: deadline - time.monotonic()


def metric_name(outcome: str) -> str:
    return "Outbox" + "".join(part.capitalize() for part in outcome.split("_"))


def _chunks(pages: Iterable[Sequence[OutboxEntry]]) -> Iterator[list[OutboxEntry]]:
    """The entries of `pages` in chunks of CHUNK, read only as far as the chunks are taken."""
    chunk: list[OutboxEntry] = []
    for entry in chain.from_iterable(pages):
        chunk.append(entry)
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class _UnderWay(Struct):
    """Chunks being driven on by the pool, no more than `limit` (one a worker) at once: reading keeps
    pace, and none waits in the pool, so when the time runs short what is under way ends soon."""

    pool: ThreadPoolExecutor
    drive: Callable[[list[OutboxEntry]], Counter[str]]
    limit: int
    report: Counter[str]
    futures: set[Future[Counter[str]]] = field(default_factory=set)

    def start(self, chunk: list[OutboxEntry]) -> None:
        while len(self.futures) >= self.limit:
            done, self.futures = wait(self.futures, return_when=FIRST_COMPLETED)
            self._collect(done)
        self.futures.add(self.pool.submit(self.drive, chunk))

    def finish(self) -> None:
        self._collect(wait(self.futures).done)
        self.futures = set()

    def _collect(self, done: set[Future[Counter[str]]]) -> None:
        for future in done:
            self.report.update(future.result())


class OutboxSweeper:
    def __init__(
        self,
        store: OutboxStore,
        queue: MessageQueue,
        provider_honours_key: Callable[[Channel, Mode], bool],
        clock: Clock = utc_now,
        *,
        max_reclaims: int = MAX_RECLAIMS,
        workers: int = WORKERS,
        margin_seconds: float = STOP_MARGIN_SECONDS,
    ) -> None:
        self._store = store
        self._queue = queue
        self._honours_key = provider_honours_key
        self._clock = clock
        self._max_reclaims = max_reclaims
        self._workers = workers
        self._margin = margin_seconds

    def sweep(self, time_left: TimeLeft | None = None) -> dict[str, int]:
        """Drive every due entry on, most urgent first, until none is due or the time is spent."""
        time_left = time_left or budget(DEFAULT_BUDGET_SECONDS)
        report: Counter[str] = Counter()
        with ThreadPoolExecutor(self._workers, thread_name_prefix="outbox") as pool:
            while True:
                now = self._clock()
                round_: Counter[str] = Counter()
                in_time = all(
                    self._drain(pool, now, statuses, time_left, round_) for statuses in (FIRST, WAITING)
                )
                report.update(round_)
                if not in_time:
                    report["budget_spent"] += 1
                    break
                # Again with a later `now`, for what fell due meanwhile; not while the queue refuses.
                if not round_ or round_["deferred"]:
                    break
        for outcome, count in report.items():
            metrics.add_metric(name=metric_name(outcome), unit="Count", value=count)
        if report["stranded_unknown"]:
            metrics.add_metric(name="MessageUnknown", unit="Count", value=report["stranded_unknown"])
        if report:
            logger.info("message.outbox.swept", extra={"event": "message.outbox.swept", **report})
        return dict(report)

    def _drain(
        self,
        pool: ThreadPoolExecutor,
        now: datetime,
        statuses: frozenset[Status],
        time_left: TimeLeft,
        report: Counter[str],
    ) -> bool:
        """Every entry of `statuses` due by `now`, driven on in chunks; False if the time ran out first."""
        under_way = _UnderWay(pool, partial(self._drive, now=now), self._workers, report)
        in_time = True
        for chunk in _chunks(self._store.due_pages(now, statuses)):
            if time_left() < self._margin:
                in_time = False
                break
            under_way.start(chunk)
        under_way.finish()
        return in_time

    def _drive(self, entries: Sequence[OutboxEntry], *, now: datetime) -> Counter[str]:
        outcomes: Counter[str] = Counter()
        owed = [entry for entry in entries if entry.status in WAITING_STATUSES]
        if owed:
            outcomes.update(self._hand_over(owed, now))
        for entry in entries:
            if entry.status is Status.SENDING:
                outcomes.update(self._guarded(entry, partial(self._recover_stranded_claim, entry, now)))
            elif entry.status not in WAITING_STATUSES:
                outcomes.update(self._guarded(entry, partial(self._clear, entry, now)))
        return outcomes

    def _hand_over(self, entries: list[OutboxEntry], now: datetime) -> Counter[str]:
        """Records first, then the moves: a record whose move lost to a claim is a harmless extra."""
        handoffs = [Handoff(entry, self._delay_seconds(entry, now)) for entry in entries]
        try:
            refused = {handoff.message.id for handoff in self._queue.enqueue_batch(handoffs)}
        except QueueUnavailable:
            refused = {entry.id for entry in entries}
        outcomes: Counter[str] = Counter()
        if refused:
            logger.warning(
                "message.outbox.retry_later",
                extra={"event": "message.outbox.retry_later", "message_ids": sorted(refused)},
            )
            outcomes["deferred"] += len(refused)
        for entry in entries:
            if entry.id not in refused:
                outcomes.update(self._guarded(entry, partial(self._move_handed_over, entry, now)))
        return outcomes

    @staticmethod
    def _delay_seconds(entry: OutboxEntry, now: datetime) -> int:
        if entry.status is not Status.SCHEDULED or entry.send_at is None:
            return 0
        delay = max(0.0, min((entry.send_at - now).total_seconds(), MAX_QUEUE_DELAY.total_seconds()))
        return int(delay) + (1 if delay % 1 else 0)

    def _move_handed_over(self, entry: OutboxEntry, now: datetime) -> str:
        if entry.status is Status.SCHEDULED:
            send_at = entry.send_at or now
            due_at = max(send_at, now) + HANDOFF_GRACE
            self._store.move_outbox_entry(entry, now, status=Status.SCHEDULED, due_at=due_at)
            return "scheduled"
        self._store.move_outbox_entry(entry, now, status=Status.QUEUED, due_at=now + HANDOFF_GRACE)
        return "handed_off"

    def _clear(self, entry: OutboxEntry, now: datetime) -> str:
        """Nothing is owed to a message that ended: its entry leaves the outbox."""
        moved = self._store.move_outbox_entry(entry, now, status=entry.status, due_at=None)
        return "cleared" if moved else "superseded"

    def _recover_stranded_claim(self, entry: OutboxEntry, now: datetime) -> Counter[str]:
        """The claim's deadline outlived any Lambda that could hold it: that attempt is dead.

        Whether it reached the provider cannot be known. Through a provider that dedups on the
        message id it is repeated with the same key, at most `max_reclaims` times; through any
        other it could deliver twice, so the message ends `unknown` and is never retried
        automatically; so does a message reclaimed as often as allowed.
        """
        outcomes: Counter[str] = Counter()
        if self._honours_key(entry.channel, mode_of(entry.workspace_id)):
            reclaimed = self._store.reclaim(
                entry, now, due_at=now + HANDOFF_GRACE, max_reclaims=self._max_reclaims
            )
            if reclaimed is Reclaim.SUPERSEDED:
                outcomes["superseded"] += 1
                return outcomes
            if reclaimed is Reclaim.RECLAIMED:
                # Should this hand-off fail, the entry is due again after its grace.
                self._queue.enqueue(entry)
                outcomes["reclaimed"] += 1
                self._log_stranded(entry, "reclaimed")
                return outcomes
            outcomes["reclaim_cap_reached"] += 1
            self._log_stranded(entry, "reclaim_cap_reached")
        if self._store.move_outbox_entry(entry, now, status=Status.UNKNOWN, due_at=None):
            outcomes["stranded_unknown"] += 1
            self._log_stranded(entry, "unknown")
        else:
            outcomes["superseded"] += 1
        return outcomes

    def _log_stranded(self, entry: OutboxEntry, outcome: str) -> None:
        logger.warning(
            f"message.outbox.stranded_{outcome}",
            extra={
                "event": f"message.outbox.stranded_{outcome}",
                "message_id": entry.id,
                "max_reclaims": self._max_reclaims,
            },
        )

    @staticmethod
    def _guarded(entry: OutboxEntry, act: Callable[[], str | Counter[str]]) -> Counter[str]:
        """One entry's outcome; a dependency that failed leaves it due for the next sweep."""
        try:
            outcome = act()
        except (QueueUnavailable, DependencyUnavailable):
            logger.warning(
                "message.outbox.retry_later",
                extra={"event": "message.outbox.retry_later", "message_id": entry.id},
            )
            return Counter(deferred=1)
        return Counter([outcome]) if isinstance(outcome, str) else outcome
