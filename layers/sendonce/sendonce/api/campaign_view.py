"""A campaign as the API shows it, as JSON values: the one mapping from a domain `Campaign` to the
fields of `sendonce.api.routers.campaigns.CampaignModel`, and a `campaign.completed` event's
`data.campaign`. Plain values and no validation library, as `message_view`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sendonce.campaigns.model import Campaign
from sendonce.clock import rfc3339


def campaign_shape(campaign: Campaign) -> dict[str, Any]:
    """The campaign as the API shows it, as JSON values (a `campaign.completed` event's data too)."""

    def when(moment: datetime | None) -> str | None:
        return rfc3339(moment) if moment is not None else None

    return {
        "id": campaign.id,
        "name": campaign.name,
        "channel": campaign.channel,
        "status": campaign.status.value,
        "pausedReason": campaign.paused_reason.value if campaign.paused_reason is not None else None,
        "counts": campaign.counts.as_dict(),
        "createdAt": rfc3339(campaign.created_at),
        "startedAt": when(campaign.started_at),
        "completedAt": when(campaign.completed_at),
    }
