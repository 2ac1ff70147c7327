"""A message's time left, for the providers that take a validity period (Twilio's `ValidityPeriod`,
AWS's `TimeToLive`): what is left of it at the call, in whole seconds.

Counted at the call, with the provider's own clock: rounded down (a provider never holds the message
past its `expiresAt`), and at least 1 (the dispatcher ends a message already past it before any
call, so a call made right at the end still names a period the provider takes).
"""

from __future__ import annotations

import math
from datetime import datetime

from sendonce.messages.model import Message


def seconds_left(message: Message, now: datetime) -> int | None:
    """Whole seconds from `now` to the message's `expiresAt`, at least 1; None when it has none."""
    if message.expires_at is None:
        return None
    return max(1, math.floor((message.expires_at - now).total_seconds()))
