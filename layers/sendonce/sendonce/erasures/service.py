"""The erasures' use cases: request one (the API), run its job (ErasureFunction), and recover the
jobs that were lost (the same function's every-minute sweep).

Invariants:
- An accepted erasure is never lost: its pending record is written before the 202, and a record no
  run has moved on for STALLED_AFTER is queued again by the sweep, whether its job was never sent,
  lost, or died mid-way.
- A run is resumable and idempotent: it pages through the recipient's messages from the cursor the
  last run recorded, erasing is a no-op on what is erased, and the completion is one conditional
  write (the first run to finish completes it; another finds it done).
- A message still to be delivered is canceled first, through the user's cancel, then erased.
- An erasure is done only once every message's latest change has been told as an event (or has
  been quiet for QUIET_AFTER): the event is written from the stream's image of the change, which
  may predate the erasure, so its message's copies are erased again until then (SETTLE_DELAY apart).
- No address and no content in a log line: only ids and counts.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

from msgspec.structs import replace

from sendonce.clock import Clock, TimeLeft, utc_now
from sendonce.erasures.model import (
    Erasure,
    ErasureCounts,
    ErasureStatus,
    ErasureWork,
    Redaction,
    looks_like_erasure_id,
    new_erasure_id,
)
from sendonce.erasures.ports import (
    CancelMessage,
    ErasureJob,
    ErasureQueue,
    ErasureStore,
    MessageTraces,
    RecipientMessages,
    TraceEraser,
)
from sendonce.errors import MessageNotCancelable, MessageNotFound, SendonceError
from sendonce.messages.model import WAITING_STATUSES, Message
from sendonce.observability import logger, metrics
from sendonce.status_webhooks.model import STATUS_EVENTS
from sendonce.suppressions.model import recipient_key, recipient_of

# Seconds between the runs that wait for the latest changes of erased messages to be told.
SETTLE_DELAY_SECONDS = 5
# A message unchanged this long has no change left on its way to an event.
QUIET_AFTER = timedelta(seconds=30)
# Past this age an erasure stops waiting for events and is completed (its count says how many).
SETTLE_LIMIT = timedelta(minutes=5)
# A pending erasure no run has moved on for this long is queued again by the sweep.
STALLED_AFTER = timedelta(seconds=20)
# A run hands itself on (queued again at once) rather than start a page with less time left.
PAGE_SECONDS = 10.0


class RunOutcome(StrEnum):
    DONE = "done"  # completed by this run
    CONTINUED = "continued"  # handed on to a new run: time ran short
    SETTLING = "settling"  # waiting for the latest changes of some messages to be told
    NOTHING = "nothing"  # done before, or no such erasure


class ErasureService:
    """What the API asks: an erasure requested, and read."""

    def __init__(self, store: ErasureStore, queue: ErasureQueue, clock: Clock = utc_now) -> None:
        self._store = store
        self._queue = queue
        self._clock = clock

    def request(self, workspace_id: str, raw_to: str) -> Erasure:
        """A pending erasure of the recipient `raw_to` names (InvalidRecipient if it names none)."""
        recipient = recipient_of(raw_to)
        now = self._clock()
        erasure = Erasure(
            id=new_erasure_id(now), workspace_id=workspace_id, status=ErasureStatus.PENDING, created_at=now
        )
        self._store.create(ErasureWork(erasure, to=recipient.address))
        try:
            self._queue.enqueue(ErasureJob(workspace_id, erasure.id))
        except SendonceError:
            # Recorded already: the sweep queues a stalled erasure again, so it is only late.
            logger.warning(
                "erasure.enqueue_failed", extra={"event": "erasure.enqueue_failed", "erasure_id": erasure.id}
            )
        metrics.add_metric(name="ErasureRequested", unit="Count", value=1)
        logger.info(
            "erasure.requested",
            extra={"event": "erasure.requested", "erasure_id": erasure.id, "workspace_id": workspace_id},
        )
        return erasure

    def get(self, workspace_id: str, erasure_id: str) -> Erasure | None:
        if not looks_like_erasure_id(erasure_id):
            return None
        return self._store.get(workspace_id, erasure_id)


class ErasureRunner:
    """The job: cancel and erase every message of the workspace that names the recipient, each
    copy of it, the suppression entry's shown address and the campaigns' line errors."""

    def __init__(
        self,
        *,
        store: ErasureStore,
        queue: ErasureQueue,
        eraser: TraceEraser,
        messages: RecipientMessages,
        cancel: CancelMessage,
        clock: Clock = utc_now,
    ) -> None:
        self._store = store
        self._queue = queue
        self._eraser = eraser
        self._messages = messages
        self._cancel = cancel
        self._clock = clock

    def run(self, job: ErasureJob, time_left: TimeLeft) -> RunOutcome:
        work = self._store.work(job.workspace_id, job.erasure_id)
        if work is None:
            return RunOutcome.NOTHING
        recipient = recipient_of(work.to)
        redaction = Redaction.of(recipient)
        key = recipient_key(recipient.address)
        workspace_id = work.erasure.workspace_id
        while not work.listed:
            if time_left() < PAGE_SECONDS:
                self._queue.enqueue(job)
                return RunOutcome.CONTINUED
            page = self._messages(workspace_id, key, work.cursor)
            counts, unsettled = ErasureCounts(), set(work.unsettled)
            for message in page.messages:
                traces, canceled = self._erase(workspace_id, message, redaction)
                counts = counts.plus(traces.counts).plus(ErasureCounts(canceled=canceled))
                if not self._settled(traces):
                    unsettled.add(message.id)
            listed = page.next_cursor is None
            if listed:  # once, after the messages: what is not found through them
                counts = counts.plus(
                    ErasureCounts(
                        suppressions=self._eraser.erase_suppression(workspace_id, key),
                        campaign_errors=self._eraser.erase_campaign_errors(workspace_id, redaction),
                    )
                )
            work = ErasureWork(work.erasure, work.to, page.next_cursor, listed, frozenset(unsettled))
            self._store.progress(work, counts, self._clock())
        return self._settle(job, work, redaction)

    def sweep(self) -> int:
        """Queue again every pending erasure no run has moved on lately; how many."""
        stalled = self._store.stalled(self._clock() - STALLED_AFTER)
        for job in stalled:
            self._queue.enqueue(job)
        if stalled:
            logger.info(
                "erasure.sweep.requeued", extra={"event": "erasure.sweep.requeued", "count": len(stalled)}
            )
        return len(stalled)

    def _erase(self, workspace_id: str, message: Message, redaction: Redaction) -> tuple[MessageTraces, int]:
        canceled = 0
        if message.status in WAITING_STATUSES:
            try:
                self._cancel(workspace_id, message.id)
                canceled = 1
            except (MessageNotCancelable, MessageNotFound):
                pass  # claimed meanwhile (or gone): erased all the same
        return self._eraser.erase_message(workspace_id, message.id, redaction), canceled

    def _settle(self, job: ErasureJob, work: ErasureWork, redaction: Redaction) -> RunOutcome:
        """Erase again the messages whose latest change was not told yet; done when none is left."""
        counts, unsettled = ErasureCounts(), set[str]()
        for message_id in sorted(work.unsettled):
            traces = self._eraser.erase_message(work.erasure.workspace_id, message_id, redaction)
            # The copies made since the first pass (its message was counted then).
            counts = counts.plus(replace(traces.counts, messages=0))
            if not self._settled(traces):
                unsettled.add(message_id)
        now = self._clock()
        work = ErasureWork(work.erasure, work.to, work.cursor, work.listed, frozenset(unsettled))
        if unsettled and now - work.erasure.created_at < SETTLE_LIMIT:
            self._store.progress(work, counts, now)
            self._queue.enqueue(job, SETTLE_DELAY_SECONDS)
            return RunOutcome.SETTLING
        completed = self._store.complete(work, counts, now)
        if completed is None:
            return RunOutcome.NOTHING
        metrics.add_metric(name="ErasureCompleted", unit="Count", value=1)
        logger.info(
            "erasure.completed",
            extra={
                "event": "erasure.completed",
                "erasure_id": completed.id,
                "workspace_id": completed.workspace_id,
                "counts": completed.counts.as_dict(),
                "unsettled": len(unsettled),
                "seconds": round((now - completed.created_at).total_seconds(), 3),
            },
        )
        return RunOutcome.DONE

    def _settled(self, traces: MessageTraces) -> bool:
        """Whether no event of the message can still come from an image taken before the erasure:
        its latest status was told, or it has not changed for QUIET_AFTER (the stream's consumer
        tells a change within seconds; an event past its retention is told and gone)."""
        message = traces.message
        if message is None or self._clock() - message.updated_at >= QUIET_AFTER:
            return True
        told = STATUS_EVENTS.get(message.status)
        return told is not None and told.value in traces.told
