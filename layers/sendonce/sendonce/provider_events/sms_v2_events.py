"""AWS End User Messaging SMS text events (its configuration set's SNS destination) as provider events.

An event is ours when its `context` names our message (the `Context` the send gave it): that, not
AWS's message id, is how it finds the message, so a message left `unknown` is settled by its events
too. Each event type maps to one provider event or to none: carrier acceptance is `sent`, handset
delivery `delivered`, a final failure `failed` (code `sms_v2_<event type>`), and the in-between
states (queued, pending) and every type this module does not know nothing at all. A failure event
that says it is not final is nothing either: status only moves forward, and a later event may still
say the text was delivered. The same event, delivered again by SNS, has the same id (AWS's message
id and the event type), so it is applied once.

The event's shape (AWS docs, "Example SMS event data" and "Event types for SMS, MMS, and voice"):
`{"eventType": "TEXT_DELIVERED", "eventVersion": "1.0", "eventTimestamp": <ms since the epoch>,
"isFinal": true, "destinationPhoneNumber": "+1…", "messageId": "…", "messageStatus": "DELIVERED",
"messageStatusDescription": "…", "context": {"sendonce_message_id": "msg_…"}, …}`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sendonce.clock import rfc3339
from sendonce.messages.model import MessageFailure
from sendonce.provider_events.model import ProviderEvent, ProviderEventType

PROVIDER = "sms-v2"

# The event types of End User Messaging SMS (text, media and voice): how its events are told apart
# from SES's, which arrive on the same queue through SNS.
_OWN_PREFIXES = ("TEXT_", "MEDIA_", "VOICE_")

_SUCCESSES = {
    # Accepted by the recipient's carrier (in some countries AWS's last word: no DELIVERED follows).
    "TEXT_SUCCESSFUL": ProviderEventType.SENT,
    # Delivered to the handset.
    "TEXT_DELIVERED": ProviderEventType.DELIVERED,
}
# Each the text's end, when final: the recipient, the content, the carrier, or time ran out.
_FAILURES = frozenset(
    {
        "TEXT_BLOCKED",
        "TEXT_CARRIER_BLOCKED",
        "TEXT_CARRIER_UNREACHABLE",
        "TEXT_INVALID",
        "TEXT_INVALID_MESSAGE",
        "TEXT_PROTECT_BLOCKED",
        "TEXT_SPAM",
        "TEXT_TTL_EXPIRED",
        "TEXT_UNKNOWN",
        "TEXT_UNREACHABLE",
    }
)
# TEXT_QUEUED and TEXT_PENDING: on its way, nothing to record.


def is_sms_v2_event(notification: object) -> bool:
    """Whether an SNS notification's message is an End User Messaging SMS event (else SES's)."""
    if not isinstance(notification, dict):
        return False
    kind = notification.get("eventType")
    return isinstance(kind, str) and kind.startswith(_OWN_PREFIXES)


def from_sms_v2_event(event: dict[str, Any], context_key: str) -> ProviderEvent | None:
    """The provider event a text event is; None if it is not about a message of ours, or changes
    nothing (a type in between, a failure not final yet, a type this module does not know)."""
    kind = event.get("eventType")
    context = event.get("context")
    message_id = context.get(context_key) if isinstance(context, dict) else None
    if not isinstance(kind, str) or not isinstance(message_id, str) or not message_id:
        return None
    error = None
    if kind in _SUCCESSES:
        event_type = _SUCCESSES[kind]
    elif kind in _FAILURES:
        if event.get("isFinal") is False:
            return None  # AWS has more to say about this text; its last word decides
        event_type = ProviderEventType.FAILED
        description = event.get("messageStatusDescription") or event.get("messageStatus") or kind
        error = MessageFailure(f"sms_v2_{kind.lower()}", str(description))
    else:
        return None
    # AWS's id for the text, else ours (one sms-v2 text per message): with the type, the event's id.
    provider_id = event.get("messageId") or message_id
    return ProviderEvent(
        provider=PROVIDER,
        event_id=f"{provider_id}:{kind}",
        message_id=message_id,
        type=event_type,
        occurred_at=_occurred_at(event.get("eventTimestamp")),
        error=error,
    )


def _occurred_at(timestamp: object) -> str:
    """AWS's milliseconds since the epoch as RFC 3339; "" when absent or unreadable, as for SES."""
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float):
        return ""
    try:
        return rfc3339(datetime.fromtimestamp(timestamp / 1000, tz=UTC))
    except (OverflowError, OSError, ValueError):
        return ""
