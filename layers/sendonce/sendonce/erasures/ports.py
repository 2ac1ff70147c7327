"""The erasures context's ports: the record of each erasure, its job's queue, and the stores it erases.

Every eraser is idempotent: erasing an erased copy finds nothing left to take and writes nothing,
so a job run twice (a redelivery, the sweep's recovery beside a late job) erases no more and no less.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from msgspec import Struct

from sendonce.erasures.model import Erasure, ErasureCounts, ErasureWork, Redaction
from sendonce.messages.model import Message


class ErasureJob(Struct, frozen=True):
    """What the queue carries: which erasure to run, never the address."""

    workspace_id: str
    erasure_id: str


class ErasureStore(Protocol):
    def create(self, work: ErasureWork) -> None:
        """Record a new pending erasure (one conditional write)."""
        ...

    def get(self, workspace_id: str, erasure_id: str) -> Erasure | None:
        """The erasure, if it is this workspace's."""
        ...

    def work(self, workspace_id: str, erasure_id: str) -> ErasureWork | None:
        """The pending erasure's work; None once it is done (or if there is no such erasure)."""
        ...

    def progress(
        self,
        work: ErasureWork,
        added: ErasureCounts,
        now: datetime,
    ) -> None:
        """Record how far the job got (`work`'s cursor, listed, unsettled) and add to its counts."""
        ...

    def complete(self, work: ErasureWork, added: ErasureCounts, now: datetime) -> Erasure | None:
        """Mark it done, add to its counts and forget the address, in one write; None when another
        run did first."""
        ...

    def stalled(self, before: datetime) -> list[ErasureJob]:
        """The pending erasures no run has moved on since `before`: their job may have been lost."""
        ...


class ErasureQueue(Protocol):
    def enqueue(self, job: ErasureJob, delay_seconds: int = 0) -> None: ...


class RecipientPage(Struct, frozen=True):
    messages: list[Message]
    next_cursor: str | None


# A page of the workspace's messages that name a recipient (by its key), from a cursor: the
# messages' own listing, filtered by recipient (`MessageService.list`).
RecipientMessages = Callable[[str, str, str | None], RecipientPage]
# Cancel a message still to be delivered as `DELETE /v1/messages/{id}` does (its lock released,
# its quota given back, a `message.canceled` event told); raises MessageNotCancelable otherwise.
CancelMessage = Callable[[str, str], Message]


class MessageTraces(Struct, frozen=True):
    """What erasing a message's copies found: the message after it, what was erased, and the event
    types already told of it (its latest status's event among them once the change is settled)."""

    message: Message | None
    counts: ErasureCounts
    told: frozenset[str]


class TraceEraser(Protocol):
    def erase_message(self, workspace_id: str, message_id: str, redaction: Redaction) -> MessageTraces:
        """Erase the message and every copy of it: its events, its provider events, its stored
        answer, its test delivery."""
        ...

    def erase_suppression(self, workspace_id: str, key: str) -> int:
        """Erase the shown `to` of the workspace's suppression entry for the recipient `key` (the entry
        and its key stay: the recipient stays suppressed); how many entries were erased."""
        ...

    def erase_campaign_errors(self, workspace_id: str, redaction: Redaction) -> int:
        """Erase the address from the workspace's campaigns' line errors; how many were erased."""
        ...
