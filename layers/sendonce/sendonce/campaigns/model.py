"""A campaign, its statuses and counts, and the pages its fan-out works in.

A campaign's recipients are one JSON Lines object (given inline, or uploaded); its fan-out reads
it in pages of PAGE_LINES lines. A page's work names its byte range, so a worker reads its own
lines and nothing else; a page's progress (`PageProgress`) moves on only by a write conditioned on
the progress it was read as, so two copies of one page's work never both count it.

The counts hold `accepted + duplicates + suppressed + invalid = total` once every page is done: a
page adds its lines' outcomes to the campaign when it finishes, in the same write that marks it
done. The delivery counts (`sent`, `delivered`, `failed`) follow the messages' status changes.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from msgspec import Struct, field

from sendonce.messages.ids import looks_like_ulid, ulid

CAMPAIGN_PREFIX = "cmp_"
# The fan-out's unit of work: small enough that a page re-read after a crash costs little, large
# enough that its reads, checkpoints and hand-offs stay a few hundredths of a call a recipient.
PAGE_LINES = 500
# Recipients sent together: the batch sender's bulk transactions, one suppression read.
CHUNK_LINES = 50
MAX_INLINE_RECIPIENTS = 1_000
MAX_LINES = 1_000_000
MAX_FILE_BYTES = 100 * 1024 * 1024
MAX_NAME_CHARACTERS = 200


class CampaignStatus(StrEnum):
    DRAFT = "draft"
    SCHEDULED = "scheduled"
    SENDING = "sending"
    PAUSED = "paused"
    COMPLETED = "completed"
    CANCELED = "canceled"


FINISHED = frozenset({CampaignStatus.COMPLETED, CampaignStatus.CANCELED})


class PausedReason(StrEnum):
    PAUSED = "paused"  # by its owner: it goes on only by resume
    QUOTA_EXCEEDED = "quota_exceeded"  # the workspace's daily quota (or sms budget) was spent


def new_campaign_id(now: datetime) -> str:
    return CAMPAIGN_PREFIX + ulid(int(now.timestamp() * 1000))


def looks_like_campaign_id(candidate: str) -> bool:
    return candidate.startswith(CAMPAIGN_PREFIX) and looks_like_ulid(candidate.removeprefix(CAMPAIGN_PREFIX))


class Counts(Struct, frozen=True):
    total: int = 0
    accepted: int = 0
    duplicates: int = 0
    suppressed: int = 0
    invalid: int = 0
    sent: int = 0
    delivered: int = 0
    failed: int = 0

    def plus(self, other: Counts) -> Counts:
        return Counts(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple(), strict=True)))

    def as_tuple(self) -> tuple[int, ...]:
        return (
            self.total,
            self.accepted,
            self.duplicates,
            self.suppressed,
            self.invalid,
            self.sent,
            self.delivered,
            self.failed,
        )

    def as_dict(self) -> dict[str, int]:
        return dict(zip(COUNT_NAMES, self.as_tuple(), strict=True))


COUNT_NAMES = ("total", "accepted", "duplicates", "suppressed", "invalid", "sent", "delivered", "failed")


class Campaign(Struct, frozen=True):
    id: str
    workspace_id: str
    name: str
    channel: str
    status: CampaignStatus
    # The send fields every recipient's send shares, as the request gave them (a template or
    # written content, sendAt, smartEncoding): each line adds its `to`, `data` and `metadata`.
    content: dict[str, Any]
    rate_per_second: int
    created_at: datetime
    counts: Counts = field(default_factory=Counts)
    paused_reason: PausedReason | None = None
    send_at: datetime | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    inline: bool = False  # its recipients came with the create (stored like an upload)
    planned: bool = False  # its pages are all handed to the fan-out
    pages: int = 0  # how many, once planned
    pages_done: int = 0

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


class PageWork(Struct, frozen=True):
    """One page of a campaign's list: bytes [start, end) of its file, whose first line is
    `first_line` (1-based); `repeats`: its lines whose recipient an earlier line of the list named."""

    workspace_id: str
    campaign_id: str
    number: int
    start: int
    end: int
    first_line: int
    repeats: tuple[int, ...] = ()


class PageProgress(Struct, frozen=True):
    """How far a page's work has gone: its first `next_line` lines are counted in `counts`.
    `version` moves on with every write of it (0: never written)."""

    next_line: int = 0
    counts: Counts = field(default_factory=Counts)
    done: bool = False
    parked: bool = False
    version: int = 0


class LineError(Struct, frozen=True):
    """Why a line of the list is counted invalid: the error a send of it would have been answered."""

    line: int
    code: str
    message: str
    details: Any = None  # as the API's error shows them


class LineOutcome(StrEnum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicates"
    SUPPRESSED = "suppressed"
    INVALID = "invalid"


def counted(outcomes: list[LineOutcome]) -> Counts:
    """The counts of these lines' outcomes."""
    tally = dict.fromkeys(LineOutcome, 0)
    for outcome in outcomes:
        tally[outcome] += 1
    return Counts(
        accepted=tally[LineOutcome.ACCEPTED],
        duplicates=tally[LineOutcome.DUPLICATE],
        suppressed=tally[LineOutcome.SUPPRESSED],
        invalid=tally[LineOutcome.INVALID],
    )
