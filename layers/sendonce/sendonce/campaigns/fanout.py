"""The fan-out: a campaign's list read once to plan its pages, then each page sent by whichever
worker its queue record reaches, side by side.

The invariant: each distinct recipient of the list gets at most one message, and each valid,
unsuppressed one exactly one, however often a page's work is delivered, crashed or parked.
- At most one: every message of a campaign takes the campaign's lock on its recipient
  (`campaign_identity`) in the transaction that creates it; a page read again meets its own
  messages there (`MadeBefore`) and counts them as it did the first time. The plan names each line
  whose recipient an earlier line named (`PageWork.repeats`): the first occurrence is the one sent.
- Exactly one: a page's work is deleted from its queue only after its progress is written (done,
  parked or handed on), so a crash anywhere before brings it back from its last progress.
- Counts: a page's counts are added to its campaign's in the write that marks it done, conditioned
  on the progress it started from; a second worker on the same page loses that write.
- Pause and cancel: the campaign's gate is checked in every create's transaction; a page that finds
  it closed parks where it stopped (paused) or ends (canceled).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from msgspec import Struct
from msgspec.structs import replace

from sendonce.campaigns.model import (
    CHUNK_LINES,
    MAX_LINES,
    PAGE_LINES,
    Campaign,
    CampaignStatus,
    LineError,
    LineOutcome,
    PageProgress,
    PageWork,
    PausedReason,
    counted,
)
from sendonce.campaigns.ports import CampaignPace, CampaignStore, CampaignWork, RecipientFiles, Transition
from sendonce.campaigns.service import delay_until
from sendonce.clock import Clock, utc_now
from sendonce.errors import DependencyUnavailable, MessageNotCancelable, MessageNotFound, SendonceError
from sendonce.limits.model import Window
from sendonce.messages.batch import BatchOutcome, DestinationRefused, NotRendered
from sendonce.messages.model import Message, Status
from sendonce.messages.ports import (
    CampaignGate,
    Capped,
    GateClosed,
    MadeBefore,
    MessageFilter,
    NotWritten,
    Page,
    QuotaSpent,
    SmsBudgetSpent,
    Suppressed,
)
from sendonce.messages.service import SendCommand, SendResult
from sendonce.observability import logger, metrics

# A worker hands its page on (to a fresh invocation) with this much of its time left.
HAND_ON_SECONDS = 20.0
# Pages a plan hands to the queue at once; listing pages a cancel's sweep goes through per run.
SWEEP_PAGES = 20
SWEEP_PAGE_SIZE = 100
_S = CampaignStatus


class LineRefused(Exception):
    """A line a send would refuse: its answer's code, message and details."""

    def __init__(self, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


# A line of the list as the send it asks for (its campaign's content, its `to`, `data`, `metadata`);
# raises LineRefused.
ParseLine = Callable[[Campaign, bytes], SendCommand]
# The recipient a line names, as the dedup guard sees it (None: the line names none it can read).
RecipientKey = Callable[[str, bytes], bytes | None]
# Sends a chunk's commands in bulk, behind the campaign's gate (`BatchSender.send_many`).
SendChunk = Callable[[Sequence[SendCommand], CampaignGate], list[BatchOutcome]]
# What a send's error would be answered: for a line that is not rendered.
RefuseLine = Callable[[SendonceError], LineRefused]


class CampaignMessages(Protocol):
    """What a cancel's sweep needs of the sending store (`SendingStore`)."""

    def list(self, workspace_id: str, which: MessageFilter, limit: int, cursor: str | None) -> Page: ...

    def cancel(self, workspace_id: str, message_id: str, now: datetime) -> Message: ...

    def release_dedup_lock(self, message: Message) -> None: ...


class _Chunk(Struct):
    outcomes: list[LineOutcome]
    errors: list[LineError]
    stop: GateClosed | QuotaSpent | SmsBudgetSpent | None = None


class FanOut(Struct):
    store: CampaignStore
    files: RecipientFiles
    work: CampaignWork
    pace: CampaignPace
    send: SendChunk
    parse: ParseLine
    recipient_key: RecipientKey
    refusal: RefuseLine
    messages: CampaignMessages
    clock: Clock = utc_now
    sleep: Callable[[float], None] = lambda seconds: None
    time_left: Callable[[], float] = lambda: 900.0

    # ------------------------------------------------------------------ plan
    def plan(self, workspace_id: str, campaign_id: str) -> None:
        """Read the list once: its pages handed to the queue, its size and repeats known."""
        campaign = self.store.get(workspace_id, campaign_id, delivery_counts=False)
        if campaign is None or campaign.status not in (_S.SCHEDULED, _S.SENDING):
            return  # a draft, paused or finished campaign: its resume or start hands the plan again
        now = self.clock()
        if campaign.status is _S.SCHEDULED:
            if campaign.send_at is not None and campaign.send_at > now:
                self.work.plan(workspace_id, campaign_id, delay_until(campaign.send_at, now))
                return
            started = self.store.transition(
                campaign, Transition(_S.SENDING, frozenset({_S.SCHEDULED}), now, gate_open=True)
            )
            if started is None:
                self.plan(workspace_id, campaign_id)
                return
            campaign = started
        if not campaign.planned:
            pages, total = self._pages(campaign)
            self.work.pages(pages)
            self.store.planned(workspace_id, campaign_id, len(pages), total)
            logger.info(
                "campaign.planned",
                extra={
                    "event": "campaign.planned",
                    "campaign_id": campaign_id,
                    "pages": len(pages),
                    "lines": total,
                },
            )
        self._end(workspace_id, campaign_id)

    def _pages(self, campaign: Campaign) -> tuple[list[PageWork], int]:
        seen: set[bytes] = set()
        pages: list[PageWork] = []
        repeats: list[int] = []
        start = end = line = 0
        over: list[LineError] = []
        for offset, raw in self.files.lines(campaign.workspace_id, campaign.id):
            if line == MAX_LINES:
                over.append(
                    LineError(line + 1, "validation_error", f"The list holds more than {MAX_LINES:,} lines.")
                )
                break
            if line % PAGE_LINES == 0 and line:
                pages.append(self._page(campaign, len(pages), (start, end), repeats))
                start, repeats = offset, []
            line += 1
            end = offset + len(raw) + 1
            key = self.recipient_key(campaign.channel, raw)
            if key is not None:
                if key in seen:
                    repeats.append(line)
                else:
                    seen.add(key)
        if line:
            pages.append(self._page(campaign, len(pages), (start, end), repeats))
        if over:
            self.store.add_errors(campaign.workspace_id, campaign.id, over)
        return pages, line

    @staticmethod
    def _page(campaign: Campaign, number: int, span: tuple[int, int], repeats: list[int]) -> PageWork:
        start, end = span
        return PageWork(
            workspace_id=campaign.workspace_id,
            campaign_id=campaign.id,
            number=number,
            start=start,
            end=end,
            first_line=number * PAGE_LINES + 1,
            repeats=tuple(repeats),
        )

    # ------------------------------------------------------------------ a page
    def run_page(self, work: PageWork) -> None:
        """Send the page's lines from its last progress; return once its progress is written."""
        while True:
            campaign = self.store.get(work.workspace_id, work.campaign_id, delivery_counts=False)
            if campaign is None or campaign.status is _S.CANCELED:
                return
            progress = self.store.progress(work)
            if progress.done:
                self._end(work.workspace_id, work.campaign_id)
                return
            if campaign.status is not _S.SENDING:
                if campaign.status is _S.COMPLETED:
                    return
                if self._park(work, progress, progress):
                    return
                continue  # resumed meanwhile: go on
            if progress.parked:
                taken = replace(progress, parked=False, version=progress.version + 1)
                if not self.store.save_progress(work, progress, taken):
                    return  # another worker took the page over
                progress = taken
            if self._send_page(campaign, work, progress):
                return

    def _send_page(self, campaign: Campaign, work: PageWork, progress: PageProgress) -> bool:
        """Send from `progress` on; False when the page must be looked at again (resumed meanwhile)."""
        lines = self._lines(work)
        at, counts = progress.next_line, progress.counts
        errors: list[LineError] = []
        while at < len(lines):
            granted = self._pace(campaign, min(CHUNK_LINES, len(lines) - at))
            if granted == 0:  # out of time: the rest goes to a fresh invocation
                self._flush(work, errors)
                handed = PageProgress(at, counts, version=progress.version + 1)
                if self.store.save_progress(work, progress, handed):
                    self.work.pages([work])
                return True
            chunk = self._chunk(campaign, work, lines, at, granted)
            counts = counts.plus(counted(chunk.outcomes))
            errors.extend(chunk.errors)
            at += len(chunk.outcomes)
            if chunk.stop is not None:
                self._flush(work, errors)
                if isinstance(chunk.stop, QuotaSpent | SmsBudgetSpent):  # paused until resumed
                    self._quota_spent(campaign)
                parked = PageProgress(at, counts, parked=True, version=progress.version + 1)
                return self.store.save_progress(work, progress, parked)
        self._flush(work, errors)
        if self.store.finish_page(work, progress, counts):
            metrics.add_metric(name="CampaignPagesDone", unit="Count", value=1)
            self._end(work.workspace_id, work.campaign_id)
        return True

    def _park(self, work: PageWork, seen: PageProgress, progress: PageProgress) -> bool:
        """The page parked at `progress` while its campaign is not sending; False when it is."""
        if seen.parked and seen.version > 0:
            return True  # parked already: its resume hands it out
        return self.store.save_progress(work, seen, replace(progress, parked=True, version=seen.version + 1))

    def _lines(self, work: PageWork) -> list[bytes]:
        body = self.files.read(work.workspace_id, work.campaign_id, work.start, work.end)
        lines = body.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        return [line.removesuffix(b"\r") for line in lines]

    def _pace(self, campaign: Campaign, wanted: int) -> int:
        """Up to `wanted` tokens of the campaign's rate, waiting for the next window when this one
        is spent; 0 when the invocation has no time left to wait."""
        while True:
            if self.time_left() < HAND_ON_SECONDS:
                return 0
            now = self.clock()
            granted = self.pace.take(campaign.id, campaign.rate_per_second, wanted, now)
            if granted > 0:
                return granted
            wait = Window.at(now).ends_at_epoch - now.timestamp()
            if self.time_left() < wait + HAND_ON_SECONDS:
                return 0
            self.sleep(max(0.01, wait))

    def _chunk(self, campaign: Campaign, work: PageWork, lines: list[bytes], at: int, size: int) -> _Chunk:
        repeats = set(work.repeats)
        outcomes: list[LineOutcome | None] = [None] * size
        errors: dict[int, LineError] = {}
        commands: list[SendCommand] = []
        positions: list[int] = []
        for k in range(size):
            line = work.first_line + at + k
            if line in repeats:
                outcomes[k] = LineOutcome.DUPLICATE
                continue
            try:
                commands.append(self.parse(campaign, lines[at + k]))
                positions.append(k)
            except LineRefused as refused:
                outcomes[k] = LineOutcome.INVALID
                errors[k] = LineError(line, refused.code, refused.message, refused.details)
        results = self.send(commands, CampaignGate(campaign.workspace_id, campaign.id)) if commands else []
        stop_at, stop = size, None
        for k, result in zip(positions, results, strict=True):
            if isinstance(result, GateClosed | QuotaSpent | SmsBudgetSpent):
                if k < stop_at:
                    stop_at, stop = k, result
                continue
            if isinstance(result, NotWritten):
                raise DependencyUnavailable(f"a campaign's create failed: {result.reason}")
            if isinstance(result, Capped):  # a campaign is never capped (`BatchSender._write`)
                raise DependencyUnavailable("a campaign's create met a frequency cap")
            if isinstance(
                result, NotRendered | DestinationRefused
            ):  # the line's error, as a refused render's
                answer = self.refusal(result.error)
                outcomes[k] = LineOutcome.INVALID
                errors[k] = LineError(work.first_line + at + k, answer.code, answer.message, answer.details)
            else:
                outcomes[k] = _outcome(result)
        # Lines after a stop are read again once the campaign goes on: their creates, if any, are met
        # then as the campaign's own (MadeBefore) and counted once.
        kept = [outcome for outcome in outcomes[:stop_at] if outcome is not None]
        return _Chunk(kept, [error for k, error in sorted(errors.items()) if k < stop_at], stop)

    def _flush(self, work: PageWork, errors: list[LineError]) -> None:
        if errors:
            self.store.add_errors(work.workspace_id, work.campaign_id, errors)
            errors.clear()

    def _quota_spent(self, campaign: Campaign) -> None:
        change = Transition(
            _S.PAUSED, frozenset({_S.SENDING}), self.clock(), paused_reason=PausedReason.QUOTA_EXCEEDED
        )
        if self.store.transition(campaign, change) is not None:
            metrics.add_metric(name="CampaignQuotaPaused", unit="Count", value=1)
            logger.info(
                "campaign.quota_paused", extra={"event": "campaign.quota_paused", "campaign_id": campaign.id}
            )

    def _end(self, workspace_id: str, campaign_id: str) -> None:
        completed = self.store.complete_if_done(workspace_id, campaign_id, self.clock())
        if completed is not None:
            metrics.add_metric(name="CampaignsCompleted", unit="Count", value=1)
            logger.info(
                "campaign.completed", extra={"event": "campaign.completed", "campaign_id": campaign_id}
            )

    # ------------------------------------------------------------------ a cancel's sweep
    def sweep(self, workspace_id: str, campaign_id: str, cursor: str | None) -> None:
        """Cancel the canceled campaign's messages still waiting, a listing page at a time; the rest
        handed on to the next run."""
        for _ in range(SWEEP_PAGES):
            page = self.messages.list(
                workspace_id, MessageFilter(campaign_id=campaign_id), SWEEP_PAGE_SIZE, cursor
            )
            for message in page.messages:
                if message.status in (Status.ACCEPTED, Status.SCHEDULED, Status.QUEUED):
                    try:
                        canceled = self.messages.cancel(workspace_id, message.id, self.clock())
                    except (MessageNotCancelable, MessageNotFound):
                        continue  # its delivery started since: it goes on, as a DELETE's would
                    self.messages.release_dedup_lock(canceled)
            cursor = page.next_cursor
            if cursor is None:
                return
        self.work.sweep(workspace_id, campaign_id, cursor)


def _outcome(result: SendResult | Suppressed | MadeBefore) -> LineOutcome:
    if isinstance(result, MadeBefore):
        return LineOutcome.ACCEPTED  # this campaign's message for the recipient, made by an earlier read
    if isinstance(result, Suppressed):
        return LineOutcome.SUPPRESSED
    return LineOutcome.DUPLICATE if result.duplicate else LineOutcome.ACCEPTED
