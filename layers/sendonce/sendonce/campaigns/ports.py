"""The campaigns context's ports: where campaigns, their pages and errors are kept, where their
recipient lists live, the queue of the fan-out's work, and the pace its workers share."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Protocol

from msgspec import Struct

from sendonce.campaigns.model import (
    Campaign,
    CampaignStatus,
    Counts,
    LineError,
    PageProgress,
    PageWork,
    PausedReason,
)


class CampaignPage(Struct, frozen=True):
    campaigns: list[Campaign]
    next_cursor: str | None


class ErrorPage(Struct, frozen=True):
    errors: list[LineError]
    next_cursor: str | None


class Transition(Struct, frozen=True):
    """A change of a campaign's status, written only while it is in one of `from_statuses`; the
    campaign's gate (what its creates check) is opened or closed with it, in the same write."""

    to: CampaignStatus
    from_statuses: frozenset[CampaignStatus]
    at: datetime
    paused_reason: PausedReason | None = None
    gate_open: bool = False


class CampaignStore(Protocol):
    def create(self, campaign: Campaign) -> None:
        """Write a new campaign (a draft), its gate closed."""
        ...

    def get(self, workspace_id: str, campaign_id: str, *, delivery_counts: bool = True) -> Campaign | None:
        """The workspace's campaign (None: unknown, or another workspace's); without
        `delivery_counts`, its `sent`, `delivered` and `failed` are left at 0 (the fan-out's read)."""
        ...

    def page(self, workspace_id: str, limit: int, cursor: str | None) -> CampaignPage:
        """The workspace's campaigns, newest first."""
        ...

    def transition(self, campaign: Campaign, change: Transition) -> Campaign | None:
        """The campaign after the change, or None when it was no longer in a status it changes from."""
        ...

    def planned(self, workspace_id: str, campaign_id: str, pages: int, total: int) -> None:
        """Every page of the campaign is handed to the fan-out: `pages` of them, `total` lines."""
        ...

    def progress(self, work: PageWork) -> PageProgress:
        """How far the page has gone (a fresh progress when it never moved)."""
        ...

    def save_progress(self, work: PageWork, seen: PageProgress, progress: PageProgress) -> bool:
        """Write the page's progress, while it is still `seen`; False when another worker moved it.
        A parked progress is written only while the campaign is not sending (False otherwise)."""
        ...

    def finish_page(self, work: PageWork, seen: PageProgress, counts: Counts) -> bool:
        """Mark the page done and add its `counts` to its campaign's, in one write, while its
        progress is still `seen`; False when another worker moved it."""
        ...

    def parked(self, workspace_id: str, campaign_id: str) -> list[PageWork]:
        """The campaign's pages parked by a pause, to hand out again on resume."""
        ...

    def complete_if_done(self, workspace_id: str, campaign_id: str, at: datetime) -> Campaign | None:
        """The campaign completed, when it is sending and every page of it is done; else None."""
        ...

    def add_errors(self, workspace_id: str, campaign_id: str, errors: Sequence[LineError]) -> None:
        """Record why these lines are invalid (written again, the same)."""
        ...

    def errors(self, workspace_id: str, campaign_id: str, limit: int, cursor: str | None) -> ErrorPage: ...


class Upload(Struct, frozen=True):
    url: str
    expires_at: datetime


class RecipientFiles(Protocol):
    def upload_url(self, workspace_id: str, campaign_id: str, now: datetime) -> Upload:
        """A presigned PUT of the campaign's list."""
        ...

    def put(self, workspace_id: str, campaign_id: str, body: bytes) -> None:
        """Store the campaign's list (inline recipients, as JSON Lines)."""
        ...

    def size(self, workspace_id: str, campaign_id: str) -> int | None:
        """The list's size in bytes; None when there is none yet."""
        ...

    def lines(self, workspace_id: str, campaign_id: str) -> Iterator[tuple[int, bytes]]:
        """Every line of the list with the offset of its first byte, the newline left out."""
        ...

    def read(self, workspace_id: str, campaign_id: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of the list."""
        ...


class CampaignWork(Protocol):
    """The fan-out's work items, on a queue (SQS): plans, pages and cancel sweeps."""

    def plan(self, workspace_id: str, campaign_id: str, delay_seconds: int = 0) -> None: ...

    def pages(self, pages: Sequence[PageWork]) -> None: ...

    def sweep(
        self, workspace_id: str, campaign_id: str, cursor: str | None, delay_seconds: int = 0
    ) -> None: ...


class CampaignPace(Protocol):
    def take(self, campaign_id: str, rate_per_second: int, wanted: int, now: datetime) -> int:
        """Tokens granted of `wanted` in the campaign's current rate window (0: the window is spent)."""
        ...
