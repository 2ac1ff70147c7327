"""What the API states about status webhooks without loading their model: the event types an
endpoint subscribes to, and how long and how many replaced secrets keep signing.

Declared here once; `status_webhooks.model` names them for its users. The API's webhooks router
imports this module alone, so a cold start that serves a send never loads the model.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

# While a secret is rotated, deliveries are signed with the old one too for this long.
ROTATION_OVERLAP = timedelta(hours=24)
# At most this many replaced secrets sign at once; a rotation past it is refused until the oldest
# stops. Each costs about 48 bytes of every delivery's `webhook-signature` and 90 of each of the
# endpoint's copies, while the request rate would allow millions of rotations a day: 24 (one an
# hour) keeps the header near 1.2 KB and every copy a few KB (docs/architecture.md).
MAX_REPLACED_SECRETS = 24


class EventType(StrEnum):
    QUEUED = "message.queued"
    SCHEDULED = "message.scheduled"
    SENT = "message.sent"
    DELIVERED = "message.delivered"
    FAILED = "message.failed"
    CANCELED = "message.canceled"
    UNKNOWN = "message.unknown"
    EXPIRED = "message.expired"  # not handed to a provider before its expiresAt: never delivered
    DUPLICATE_BLOCKED = "message.duplicate_blocked"
    CAMPAIGN_COMPLETED = "campaign.completed"
