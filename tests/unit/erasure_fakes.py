"""In-memory fakes of the erasures context's ports: the records, the queue, and the stores it erases."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from msgspec.structs import replace
from sendonce.erasures.model import ERASED, Erasure, ErasureCounts, ErasureStatus, ErasureWork, Redaction
from sendonce.erasures.ports import ErasureJob, MessageTraces, RecipientPage
from sendonce.errors import DependencyUnavailable, MessageNotCancelable
from sendonce.messages.model import WAITING_STATUSES, Message, Status


@dataclass
class InMemoryErasureStore:
    records: dict[str, ErasureWork] = field(default_factory=dict)
    done: dict[str, Erasure] = field(default_factory=dict)
    touched: dict[str, datetime] = field(default_factory=dict)

    def create(self, work: ErasureWork) -> None:
        assert work.erasure.id not in self.records
        self.records[work.erasure.id] = work
        self.touched[work.erasure.id] = work.erasure.created_at

    def get(self, workspace_id: str, erasure_id: str) -> Erasure | None:
        found = self.done.get(erasure_id) or (
            self.records[erasure_id].erasure if erasure_id in self.records else None
        )
        return found if found is not None and found.workspace_id == workspace_id else None

    def work(self, workspace_id: str, erasure_id: str) -> ErasureWork | None:
        work = self.records.get(erasure_id)
        return work if work is not None and work.erasure.workspace_id == workspace_id else None

    def progress(self, work: ErasureWork, added: ErasureCounts, now: datetime) -> None:
        if work.erasure.id not in self.records:
            return
        current = self.records[work.erasure.id]
        counted = replace(current.erasure, counts=current.erasure.counts.plus(added))
        self.records[work.erasure.id] = replace(work, erasure=counted)
        self.touched[work.erasure.id] = now

    def complete(self, work: ErasureWork, added: ErasureCounts, now: datetime) -> Erasure | None:
        current = self.records.pop(work.erasure.id, None)
        if current is None:
            return None
        done = replace(
            current.erasure,
            status=ErasureStatus.DONE,
            completed_at=now,
            counts=current.erasure.counts.plus(added),
        )
        self.done[done.id] = done
        return done

    def stalled(self, before: datetime) -> list[ErasureJob]:
        return [
            ErasureJob(work.erasure.workspace_id, erasure_id)
            for erasure_id, work in self.records.items()
            if self.touched[erasure_id] < before
        ]


@dataclass
class FakeErasureQueue:
    jobs: list[tuple[ErasureJob, int]] = field(default_factory=list)
    down: bool = False

    def enqueue(self, job: ErasureJob, delay_seconds: int = 0) -> None:
        if self.down:
            raise DependencyUnavailable("the queue is down")
        self.jobs.append((job, delay_seconds))


@dataclass
class FakeMessages:
    """A workspace's messages, listed by recipient key and canceled as the cancel use case does;
    the eraser erases them (to and body) and tells which event types exist of each."""

    messages: dict[str, Message] = field(default_factory=dict)
    told: dict[str, set[str]] = field(default_factory=dict)
    page_size: int = 2
    canceled: list[str] = field(default_factory=list)
    suppressions: dict[tuple[str, str], str] = field(default_factory=dict)
    clock: Callable[[], datetime] | None = None  # a cancel's updatedAt

    def page(self, workspace_id: str, key: str, cursor: str | None) -> RecipientPage:
        named = sorted(
            (
                m
                for m in self.messages.values()
                if m.workspace_id == workspace_id and key in (r.lower() for r in m.requested_recipients)
            ),
            key=lambda m: m.id,
            reverse=True,
        )
        if cursor is not None:
            named = [m for m in named if m.id < cursor]
        page = named[: self.page_size]
        more = len(named) > self.page_size
        return RecipientPage(page, page[-1].id if more and page else None)

    def cancel(self, workspace_id: str, message_id: str) -> Message:
        message = self.messages[message_id]
        if message.status not in WAITING_STATUSES:
            raise MessageNotCancelable(message.status.value)
        at = self.clock() if self.clock is not None else message.updated_at
        canceled = replace(message, status=Status.CANCELED, updated_at=at)
        self.messages[message_id] = canceled
        self.canceled.append(message_id)
        return canceled

    # -- the eraser
    def erase_message(self, workspace_id: str, message_id: str, redaction: Redaction) -> MessageTraces:
        message = self.messages.get(message_id)
        if message is None or message.workspace_id != workspace_id:
            return MessageTraces(None, ErasureCounts(), frozenset())
        erased = replace(message, to=ERASED, body=ERASED)
        self.messages[message_id] = erased
        return MessageTraces(
            erased,
            ErasureCounts(messages=int(erased != message)),
            frozenset(self.told.get(message_id, set())),
        )

    def erase_suppression(self, workspace_id: str, key: str) -> int:
        if self.suppressions.get((workspace_id, key), ERASED) == ERASED:
            return 0
        self.suppressions[(workspace_id, key)] = ERASED
        return 1

    def erase_campaign_errors(self, workspace_id: str, redaction: Redaction) -> int:
        return 0
