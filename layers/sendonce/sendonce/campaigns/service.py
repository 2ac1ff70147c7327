"""The campaigns' use cases the API serves: create, start, pause, resume, cancel, read.

A status change writes the campaign and its gate together (`Transition`): the gate is open exactly
while the campaign is sending, and every create of its fan-out checks it in its own transaction, so
no message of a campaign is created once a pause or a cancel has been answered. Whatever a change
hands to the fan-out (the plan, parked pages, a cancel's sweep) is handed again by the same call
repeated: a start, resume or cancel answered after a crash mid-way is safe to send again.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from msgspec import Struct

from sendonce.campaigns.model import (
    MAX_FILE_BYTES,
    Campaign,
    CampaignStatus,
    Counts,
    PausedReason,
    new_campaign_id,
)
from sendonce.campaigns.ports import (
    CampaignPage,
    CampaignStore,
    CampaignWork,
    ErrorPage,
    RecipientFiles,
    Upload,
)
from sendonce.campaigns.ports import Transition as Change
from sendonce.clock import Clock, utc_now
from sendonce.errors import CampaignFinished, CampaignNotFound, RecipientsNotReady
from sendonce.observability import logger

# SQS holds a message back at most 15 minutes: a later sendAt is reached in hops of it.
MAX_DELAY_SECONDS = 900
# A cancel's sweep starts once the listing index has caught up with the last creates.
SWEEP_DELAY_SECONDS = 2

_S = CampaignStatus
_LIVE = frozenset({_S.DRAFT, _S.SCHEDULED, _S.SENDING, _S.PAUSED})


def delay_until(send_at: datetime | None, now: datetime) -> int:
    """The hand-off delay of a plan due at `send_at`: at most one SQS hop."""
    if send_at is None or send_at <= now:
        return 0
    return min(MAX_DELAY_SECONDS, int((send_at - now).total_seconds()) + 1)


class CampaignService(Struct):
    store: CampaignStore
    files: RecipientFiles
    work: CampaignWork
    clock: Clock = utc_now

    def create(
        self,
        workspace_id: str,
        *,
        name: str,
        channel: str,
        content: Mapping[str, Any],
        rate_per_second: int,
        send_at: datetime | None,
        recipients: bytes | None,
        inline_count: int = 0,
    ) -> tuple[Campaign, Upload | None]:
        """A draft; its list stored now (`recipients`, as JSON Lines) or to be uploaded (`Upload`)."""
        now = self.clock()
        campaign = Campaign(
            id=new_campaign_id(now),
            workspace_id=workspace_id,
            name=name,
            channel=channel,
            status=CampaignStatus.DRAFT,
            content=dict(content),
            rate_per_second=rate_per_second,
            created_at=now,
            send_at=send_at,
            inline=recipients is not None,
            counts=Counts(total=inline_count),
        )
        upload = None
        if recipients is not None:
            self.files.put(workspace_id, campaign.id, recipients)
        else:
            upload = self.files.upload_url(workspace_id, campaign.id, now)
        self.store.create(campaign)
        logger.info(
            "campaign.created",
            extra={"event": "campaign.created", "campaign_id": campaign.id, "workspace_id": workspace_id},
        )
        return campaign, upload

    def get(self, workspace_id: str, campaign_id: str) -> Campaign:
        campaign = self.store.get(workspace_id, campaign_id)
        if campaign is None:
            raise CampaignNotFound(campaign_id)
        return campaign

    def page(self, workspace_id: str, limit: int, cursor: str | None) -> CampaignPage:
        return self.store.page(workspace_id, limit, cursor)

    def errors(self, workspace_id: str, campaign_id: str, limit: int, cursor: str | None) -> ErrorPage:
        self.get(workspace_id, campaign_id)
        return self.store.errors(workspace_id, campaign_id, limit, cursor)

    def start(self, workspace_id: str, campaign_id: str) -> tuple[Campaign, bool]:
        """The campaign sending (scheduled until its sendAt), and whether this call started it."""
        campaign = self._live(workspace_id, campaign_id)
        now = self.clock()
        if campaign.status is not _S.DRAFT:
            if campaign.status is _S.SENDING and not campaign.planned:
                self.work.plan(workspace_id, campaign_id)  # a start answered after a crash mid-way
            return campaign, False
        if not campaign.inline:
            size = self.files.size(workspace_id, campaign_id)
            if size is None:
                raise RecipientsNotReady("The campaign's recipients were not uploaded yet.")
            if size > MAX_FILE_BYTES:
                raise RecipientsNotReady(f"The recipients file is {size:,} bytes, over {MAX_FILE_BYTES:,}.")
        scheduled = campaign.send_at is not None and campaign.send_at > now
        status = _S.SCHEDULED if scheduled else _S.SENDING
        started = self.store.transition(
            campaign, Change(status, frozenset({_S.DRAFT}), now, gate_open=not scheduled)
        )
        if started is None:  # started (or canceled) meanwhile
            return self.start(workspace_id, campaign_id)
        self.work.plan(workspace_id, campaign_id, delay_until(campaign.send_at, now))
        logger.info("campaign.started", extra={"event": "campaign.started", "campaign_id": campaign_id})
        return started, True

    def pause(self, workspace_id: str, campaign_id: str) -> Campaign:
        campaign = self._live(workspace_id, campaign_id)
        if campaign.status not in (_S.SENDING, _S.SCHEDULED):
            return campaign
        change = Change(
            _S.PAUSED, frozenset({_S.SENDING, _S.SCHEDULED}), self.clock(), paused_reason=PausedReason.PAUSED
        )
        paused = self.store.transition(campaign, change)
        return paused if paused is not None else self.pause(workspace_id, campaign_id)

    def resume(self, workspace_id: str, campaign_id: str) -> Campaign:
        campaign = self._live(workspace_id, campaign_id)
        now = self.clock()
        if campaign.status is _S.PAUSED:
            scheduled = campaign.send_at is not None and campaign.send_at > now and not campaign.planned
            status = _S.SCHEDULED if scheduled else _S.SENDING
            resumed = self.store.transition(
                campaign, Change(status, frozenset({_S.PAUSED}), now, gate_open=not scheduled)
            )
            if resumed is None:
                return self.resume(workspace_id, campaign_id)
            campaign = resumed
        if campaign.status is _S.SENDING:
            self._hand_out_again(campaign)
        return campaign

    def cancel(self, workspace_id: str, campaign_id: str) -> Campaign:
        campaign = self._live(workspace_id, campaign_id)
        canceled = self.store.transition(campaign, Change(_S.CANCELED, _LIVE, self.clock()))
        if canceled is None:
            return self.cancel(workspace_id, campaign_id)
        # The gate is closed: no create of it commits from now on. Its waiting messages are canceled
        # by the sweep, once the listing index holds the last ones created before.
        self.work.sweep(workspace_id, campaign_id, None, SWEEP_DELAY_SECONDS)
        logger.info("campaign.canceled", extra={"event": "campaign.canceled", "campaign_id": campaign_id})
        return canceled

    def _hand_out_again(self, campaign: Campaign) -> None:
        """A sending campaign's parked pages handed out again, its plan if it has none, its end if
        every page is done."""
        parked = self.store.parked(campaign.workspace_id, campaign.id)
        if parked:
            self.work.pages(parked)
        if not campaign.planned:
            self.work.plan(campaign.workspace_id, campaign.id)
        elif campaign.pages_done >= campaign.pages:
            self.store.complete_if_done(campaign.workspace_id, campaign.id, self.clock())

    def _live(self, workspace_id: str, campaign_id: str) -> Campaign:
        campaign = self.get(workspace_id, campaign_id)
        if campaign.finished:
            raise CampaignFinished(campaign.status.value)
        return campaign


def default_rate(workspace_rate_per_second: int) -> int:
    """Half the workspace's request rate: transactional sends keep the other half."""
    return max(1, workspace_rate_per_second // 2)
