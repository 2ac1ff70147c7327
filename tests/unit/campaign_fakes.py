"""In-memory fakes of the campaigns' ports (`sendonce.campaigns.ports`): the store, the recipient
files, the fan-out's queue and its pace.

Each keeps the rules of its adapter: `InMemoryCampaignStore` writes only where
`adapters/dynamodb_campaigns.py`'s conditions would let it (a status change only from one of its
`from_statuses`, a page's progress only over the version it was read as, a parked page only while its
campaign is not sending, a completion only once every planned page is done), and it opens and closes
the campaign's gate in the same write, in the `gates` it shares with the sending store's fake
(`InMemoryStore.gates`), whose creates check it. Its cursors are the adapter's (opaque, the last
campaign's id or error's line). `InMemoryRecipientFiles` reads a list as `S3RecipientFiles` does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from msgspec.structs import replace
from sendonce.adapters.dynamodb_items import cursor_text, opaque_cursor
from sendonce.adapters.s3_recipients import UPLOAD_SECONDS, object_key
from sendonce.campaigns.fanout import FanOut
from sendonce.campaigns.model import (
    COUNT_NAMES,
    Campaign,
    CampaignStatus,
    Counts,
    LineError,
    PageProgress,
    PageWork,
    looks_like_campaign_id,
)
from sendonce.campaigns.ports import CampaignPage, ErrorPage, Transition, Upload
from sendonce.errors import DependencyUnavailable, InvalidCursor
from sendonce.limits.model import Grant, Limits, Window

if TYPE_CHECKING:  # the status webhooks' part of a campaign's counts
    from sendonce.status_webhooks.model import CampaignTally


@dataclass
class _Page:
    work: PageWork
    progress: PageProgress


@dataclass
class InMemoryCampaignStore:
    """The campaigns' store as the DynamoDB adapter keeps it. `gates`: campaign id -> open (give it
    the sending store's fake's `gates` so that its creates check the same gate). `down`: every call
    fails, as with the table unreachable."""

    gates: dict[str, bool] = field(default_factory=dict)
    campaigns: dict[tuple[str, str], Campaign] = field(default_factory=dict)
    pages: dict[tuple[str, str, int], _Page] = field(default_factory=dict)
    line_errors: dict[tuple[str, str, int], LineError] = field(default_factory=dict)
    requested: dict[str, Campaign] = field(default_factory=dict)  # each create, by its token (the id)
    down: bool = False
    guard: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def _check(self) -> None:
        if self.down:
            raise DependencyUnavailable("the campaigns' table is down")

    def create(self, campaign: Campaign) -> None:
        with self.guard:
            self._check()
            written = replace(campaign, planned=False, pages=0, pages_done=0, paused_reason=None)
            if self.requested.get(campaign.id) == written:
                return  # the same transaction again: its ClientRequestToken (the id) makes it a success
            if (campaign.workspace_id, campaign.id) in self.campaigns:  # attribute_not_exists(pk)
                raise DependencyUnavailable("the campaign's create was canceled: ['ConditionalCheckFailed']")
            self.campaigns[(campaign.workspace_id, campaign.id)] = written
            self.requested[campaign.id] = written
            self.gates[campaign.id] = False

    def get(self, workspace_id: str, campaign_id: str, *, delivery_counts: bool = True) -> Campaign | None:
        with self.guard:
            self._check()
            if not looks_like_campaign_id(campaign_id):
                return None
            campaign = self.campaigns.get((workspace_id, campaign_id))
            if campaign is None or delivery_counts:
                return campaign
            counts = replace(campaign.counts, sent=0, delivered=0, failed=0)  # as the adapter's counters
            return replace(campaign, counts=counts)

    def page(self, workspace_id: str, limit: int, cursor: str | None) -> CampaignPage:
        with self.guard:
            self._check()
            ids = sorted((cid for ws, cid in self.campaigns if ws == workspace_id), reverse=True)
            if cursor is not None:
                after = cursor_text(cursor)
                if not looks_like_campaign_id(after):
                    raise InvalidCursor(cursor)
                ids = [cid for cid in ids if cid < after]
            shown = [self.campaigns[(workspace_id, cid)] for cid in ids[:limit]]
            # DynamoDB names a LastEvaluatedKey whenever a page stops at its Limit.
            more = len(shown) == limit
            return CampaignPage(shown, opaque_cursor(shown[-1].id) if more and shown else None)

    def transition(self, campaign: Campaign, change: Transition) -> Campaign | None:
        with self.guard:
            self._check()
            key = (campaign.workspace_id, campaign.id)
            current = self.campaigns.get(key)
            if current is None or current.status not in change.from_statuses:  # #status IN (...)
                return None
            started_at = current.started_at
            if change.to in (CampaignStatus.SENDING, CampaignStatus.SCHEDULED) and started_at is None:
                started_at = change.at  # if_not_exists(startedAt, :at)
            completed_at = current.completed_at
            if change.to in (CampaignStatus.COMPLETED, CampaignStatus.CANCELED):
                completed_at = change.at
            changed = replace(
                current,
                status=change.to,
                paused_reason=change.paused_reason,
                started_at=started_at,
                completed_at=completed_at,
            )
            self.campaigns[key] = changed
            self.gates[campaign.id] = change.gate_open
            return changed

    def planned(self, workspace_id: str, campaign_id: str, pages: int, total: int) -> None:
        with self.guard:
            self._check()
            current = self.campaigns[(workspace_id, campaign_id)]
            counts = replace(current.counts, total=total)
            self.campaigns[(workspace_id, campaign_id)] = replace(
                current, planned=True, pages=pages, counts=counts
            )

    def progress(self, work: PageWork) -> PageProgress:
        with self.guard:
            self._check()
            stored = self.pages.get(_page_key(work))
            return stored.progress if stored is not None else PageProgress()

    def _moved(self, work: PageWork, seen: PageProgress) -> bool:
        """Whether the page's progress is no longer `seen` (the adapter's Put condition)."""
        stored = self.pages.get(_page_key(work))
        if seen.version == 0:
            return stored is not None  # attribute_not_exists(pk)
        return stored is None or stored.progress.version != seen.version  # version = :seen

    def save_progress(self, work: PageWork, seen: PageProgress, progress: PageProgress) -> bool:
        with self.guard:
            self._check()
            if self._moved(work, seen):
                return False
            if progress.parked:  # the ConditionCheck: #status <> sending
                campaign = self.campaigns.get((work.workspace_id, work.campaign_id))
                if campaign is None or campaign.status is CampaignStatus.SENDING:
                    return False
            self.pages[_page_key(work)] = _Page(work, progress)
            return True

    def finish_page(self, work: PageWork, seen: PageProgress, counts: Counts) -> bool:
        with self.guard:
            self._check()
            if self._moved(work, seen):
                return False
            done = PageProgress(next_line=seen.next_line, counts=counts, done=True, version=seen.version + 1)
            self.pages[_page_key(work)] = _Page(work, done)
            key = (work.workspace_id, work.campaign_id)
            campaign = self.campaigns.get(key)
            if campaign is not None:
                added = replace(counts, total=0)  # a page's lines are in the plan's total already
                self.campaigns[key] = replace(
                    campaign, counts=campaign.counts.plus(added), pages_done=campaign.pages_done + 1
                )
            return True

    def parked(self, workspace_id: str, campaign_id: str) -> list[PageWork]:
        with self.guard:
            self._check()
            return [
                page.work
                for (ws, cid, _), page in sorted(self.pages.items(), key=lambda pair: pair[0][2])
                if (ws, cid) == (workspace_id, campaign_id) and page.progress.parked
            ]

    def complete_if_done(self, workspace_id: str, campaign_id: str, at: datetime) -> Campaign | None:
        with self.guard:
            self._check()
            key = (workspace_id, campaign_id)
            campaign = self.campaigns.get(key)
            if (
                campaign is None
                or campaign.status is not CampaignStatus.SENDING
                or not campaign.planned
                or campaign.pages_done < campaign.pages
            ):
                return None
            completed = replace(campaign, status=CampaignStatus.COMPLETED, completed_at=at)
            self.campaigns[key] = completed
            self.gates[campaign_id] = False
            return completed

    def add_errors(self, workspace_id: str, campaign_id: str, errors: Sequence[LineError]) -> None:
        with self.guard:
            self._check()
            for error in errors:
                self.line_errors[(workspace_id, campaign_id, error.line)] = error

    def errors(self, workspace_id: str, campaign_id: str, limit: int, cursor: str | None) -> ErrorPage:
        with self.guard:
            self._check()
            lines = sorted(
                line for ws, cid, line in self.line_errors if (ws, cid) == (workspace_id, campaign_id)
            )
            if cursor is not None:
                after = cursor_text(cursor)
                if not after.isdigit():
                    raise InvalidCursor(cursor)
                lines = [line for line in lines if line > int(after)]
            shown = [self.line_errors[(workspace_id, campaign_id, line)] for line in lines[:limit]]
            more = len(shown) == limit
            return ErrorPage(shown, opaque_cursor(str(shown[-1].line)) if more and shown else None)

    def add_delivery_counts(self, tally: CampaignTally) -> None:
        """A campaign's message's change added to its campaign's delivery counts (the status
        webhooks' store does it in the write of the change's event: `dynamodb_campaigns.tally_update`)."""
        with self.guard:
            key = (tally.workspace_id, tally.campaign_id)
            campaign = self.campaigns.get(key)
            if campaign is not None:
                added = Counts(sent=tally.sent, delivered=tally.delivered, failed=tally.failed)
                self.campaigns[key] = replace(campaign, counts=campaign.counts.plus(added))

    # -- for the tests
    def counts_of(self, workspace_id: str, campaign_id: str) -> dict[str, int]:
        campaign = self.campaigns[(workspace_id, campaign_id)]
        return dict(zip(COUNT_NAMES, campaign.counts.as_tuple(), strict=True))


def _page_key(work: PageWork) -> tuple[str, str, int]:
    return (work.workspace_id, work.campaign_id, work.number)


@dataclass
class InMemoryRecipientFiles:
    """The recipient lists as S3 keeps them, one object a campaign; `upload` is the client's PUT to
    the presigned URL. `down`: every call fails, as with S3 unreachable."""

    objects: dict[tuple[str, str], bytes] = field(default_factory=dict)
    reads: list[tuple[str, str, int, int]] = field(default_factory=list)  # every ranged read
    down: bool = False

    def _check(self) -> None:
        if self.down:
            raise DependencyUnavailable("the campaigns' bucket is down")

    def upload_url(self, workspace_id: str, campaign_id: str, now: datetime) -> Upload:
        self._check()
        url = f"https://campaigns.s3.example/{object_key(workspace_id, campaign_id)}?X-Amz-Signature=unit"
        return Upload(url=url, expires_at=now + timedelta(seconds=UPLOAD_SECONDS))

    def upload(self, workspace_id: str, campaign_id: str, body: bytes) -> None:
        self.objects[(workspace_id, campaign_id)] = body

    def put(self, workspace_id: str, campaign_id: str, body: bytes) -> None:
        self._check()
        self.objects[(workspace_id, campaign_id)] = body

    def size(self, workspace_id: str, campaign_id: str) -> int | None:
        self._check()
        body = self.objects.get((workspace_id, campaign_id))
        return len(body) if body is not None else None

    def lines(self, workspace_id: str, campaign_id: str) -> Iterator[tuple[int, bytes]]:
        self._check()
        body = self.objects.get((workspace_id, campaign_id))
        if body is None:
            raise DependencyUnavailable("NoSuchKey")
        offset = 0
        *whole, rest = body.split(b"\n")
        for line in whole:
            yield offset, line.removesuffix(b"\r")
            offset += len(line) + 1
        if rest:
            yield offset, rest.removesuffix(b"\r")

    def read(self, workspace_id: str, campaign_id: str, start: int, end: int) -> bytes:
        self._check()
        if end <= start:
            return b""
        body = self.objects.get((workspace_id, campaign_id))
        if body is None:
            raise DependencyUnavailable("NoSuchKey")
        self.reads.append((workspace_id, campaign_id, start, end))
        return body[start:end]


@dataclass(frozen=True)
class QueuedWork:
    """One record of the fan-out's queue, as `SqsCampaignWork` sends it."""

    kind: Literal["plan", "page", "sweep"]
    workspace_id: str
    campaign_id: str
    delay_seconds: int = 0
    page: PageWork | None = None
    cursor: str | None = None


@dataclass
class FakeCampaignWork:
    """The fan-out's queue: every record handed to it, in order (`queued`); `taken()` empties it, as
    workers receive them. `down`: a hand-off fails, as with SQS unreachable."""

    queued: list[QueuedWork] = field(default_factory=list)
    down: bool = False
    guard: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _add(self, work: QueuedWork) -> None:
        if self.down:
            raise DependencyUnavailable("the campaigns' queue is down")
        with self.guard:
            self.queued.append(work)

    def plan(self, workspace_id: str, campaign_id: str, delay_seconds: int = 0) -> None:
        self._add(QueuedWork("plan", workspace_id, campaign_id, delay_seconds))

    def pages(self, pages: Sequence[PageWork]) -> None:
        for page in pages:
            self._add(QueuedWork("page", page.workspace_id, page.campaign_id, page=page))

    def sweep(self, workspace_id: str, campaign_id: str, cursor: str | None, delay_seconds: int = 0) -> None:
        self._add(QueuedWork("sweep", workspace_id, campaign_id, delay_seconds, cursor=cursor))

    def taken(self) -> list[QueuedWork]:
        with self.guard:
            taken, self.queued = self.queued, []
        return taken

    def of_kind(self, kind: str) -> list[QueuedWork]:
        return [work for work in self.queued if work.kind == kind]


@dataclass
class FakeCampaignPace:
    """A campaign's rate on the limits' fixed windows, counted as `DynamoDbCampaignPace` counts it:
    each take adds what it asks for to one shard's count and is granted what fell under its cap.
    `unlimited`: every take is granted whole."""

    unlimited: bool = False
    counters: dict[tuple[str, int, int], int] = field(default_factory=dict)
    takes: list[tuple[str, int, int]] = field(default_factory=list)  # (campaign, wanted, granted)
    guard: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take(self, campaign_id: str, rate_per_second: int, wanted: int, now: datetime) -> int:
        with self.guard:
            if self.unlimited:
                self.takes.append((campaign_id, wanted, wanted))
                return wanted
            limits = Limits(rate_per_second, 0)
            window = Window.at(now)
            granted = 0
            for shard in range(limits.rate_shards):
                key = (campaign_id, window.number, shard)
                self.counters[key] = self.counters.get(key, 0) + wanted
                granted = Grant(wanted, self.counters[key], limits.rate_shard_cap(shard)).granted
                if granted:
                    break
            self.takes.append((campaign_id, wanted, granted))
            return granted


def run_queued(fan_out: FanOut, work: FakeCampaignWork, most: int = 10_000) -> int:
    """Run the fan-out's queued records as its workers would (delays not waited out), the records
    they hand on too, until the queue is empty; how many ran."""
    ran = 0
    while work.queued:
        for queued in work.taken():
            ran += 1
            assert ran <= most, "the fan-out keeps handing work on"
            if queued.kind == "plan":
                fan_out.plan(queued.workspace_id, queued.campaign_id)
            elif queued.kind == "page":
                assert queued.page is not None
                fan_out.run_page(queued.page)
            else:
                fan_out.sweep(queued.workspace_id, queued.campaign_id, queued.cursor)
    return ran
