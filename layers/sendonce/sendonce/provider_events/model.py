"""A provider's word on a message, whatever provider said it."""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any

from msgspec import Struct

from sendonce.messages.model import Message, MessageFailure, Status
from sendonce.modes import Mode
from sendonce.suppressions.model import Reason

# The provider of every test message (sendonce.simulator): its events speak of test messages only.
SIMULATOR = "simulator"


class ProviderEventType(StrEnum):
    SENT = "sent"
    DELIVERED = "delivered"
    FAILED = "failed"
    # The recipient asked not to be sent to again (a STOP reply): no status of a message changes.
    OPTED_OUT = "opted_out"


# Status only moves forward: each event applies from these statuses, and from no others.
APPLIES_FROM: dict[ProviderEventType, frozenset[Status]] = {
    ProviderEventType.SENT: frozenset({Status.SENDING, Status.UNKNOWN}),
    ProviderEventType.DELIVERED: frozenset({Status.SENDING, Status.SENT, Status.UNKNOWN}),
    ProviderEventType.FAILED: frozenset({Status.SENDING, Status.SENT, Status.UNKNOWN}),
    ProviderEventType.OPTED_OUT: frozenset(),
}
RESULTING_STATUS = {
    ProviderEventType.SENT: Status.SENT,
    ProviderEventType.DELIVERED: Status.DELIVERED,
    ProviderEventType.FAILED: Status.FAILED,
}


class ProviderEvent(Struct, frozen=True):
    """`message_id`: None only for an opt-out that names no message (a STOP to the shared number).
    `suppress`: the suppression reason the event puts the recipient on the list for, if any (in the
    named message's workspace; in every workspace when no message is named). `to`: the recipient
    it speaks of, normalised, when the provider names one (else the message's); `also`: the other
    recipients it speaks of (an SES bounce or complaint naming several of an email's recipients)."""

    provider: str
    event_id: str
    message_id: str | None
    type: ProviderEventType
    occurred_at: str
    error: MessageFailure | None = None
    suppress: Reason | None = None
    to: str | None = None
    also: tuple[str, ...] = ()

    @property
    def suppression_reason(self) -> Reason | None:
        """What the event puts its recipient on the suppression list for: an opt-out always does."""
        return Reason.OPTED_OUT if self.type is ProviderEventType.OPTED_OUT else self.suppress

    @property
    def changes_status(self) -> bool:
        return self.type in RESULTING_STATUS

    def concerns(self, message: Message) -> bool:
        """Whether the event can be about `message`: the simulator's about a test message, a real
        provider's about a live one. Any other is no event of that message's, and changes nothing."""
        return (self.provider == SIMULATOR) == (message.mode is Mode.TEST)

    def to_json(self) -> str:
        return json.dumps(
            {
                "provider": self.provider,
                "eventId": self.event_id,
                "messageId": self.message_id,
                "type": self.type.value,
                "occurredAt": self.occurred_at,
                "error": {"code": self.error.code, "message": self.error.message} if self.error else None,
                "suppress": self.suppress.value if self.suppress else None,
                "to": self.to,
                **({"also": list(self.also)} if self.also else {}),
            },
            separators=(",", ":"),
        )


def from_json(text: str) -> ProviderEvent:
    """The inverse of ProviderEvent.to_json (our own queue records)."""
    data = json.loads(text)
    error = data.get("error")
    message_id, suppress, to = data.get("messageId"), data.get("suppress"), data.get("to")
    return ProviderEvent(
        provider=str(data["provider"]),
        event_id=str(data["eventId"]),
        message_id=str(message_id) if message_id is not None else None,
        type=ProviderEventType(data["type"]),
        occurred_at=str(data["occurredAt"]),
        error=MessageFailure(str(error["code"]), str(error["message"])) if error else None,
        suppress=Reason(suppress) if suppress else None,
        to=str(to) if to is not None else None,
        also=tuple(str(address) for address in data.get("also") or ()),
    )


_SES_TYPES = {
    "Delivery": ProviderEventType.DELIVERED,
    "Bounce": ProviderEventType.FAILED,
    "Complaint": ProviderEventType.DELIVERED,
    "Reject": ProviderEventType.FAILED,
    "Send": ProviderEventType.SENT,
}


def from_ses_notification(notification: dict[str, Any], message_id_tag: str) -> ProviderEvent | None:
    """An SES event (from its configuration set, through SNS) as a provider event; None if not ours.

    A complaint means the mail was delivered (and unwanted): it never undoes `delivered`. A permanent
    bounce and a complaint also put the recipient on its workspace's suppression list.
    """
    kind = notification.get("eventType") or notification.get("notificationType")
    mail = notification.get("mail") or {}
    tags = mail.get("tags") or {}
    message_ids = tags.get(message_id_tag) or []
    if kind not in _SES_TYPES or not message_ids:
        return None
    event_type = _SES_TYPES[kind]
    error = None
    suppress = None
    if kind == "Bounce":
        bounce = notification.get("bounce") or {}
        error = MessageFailure(
            "bounced", f"{bounce.get('bounceType', 'Bounce')}: {bounce.get('bounceSubType', '')}"
        )
        # A transient bounce (mailbox full, out of office) may go through next time: no suppression.
        suppress = Reason.BOUNCED if bounce.get("bounceType") == "Permanent" else None
    elif kind == "Complaint":
        suppress = Reason.COMPLAINED
    elif kind == "Reject":
        error = MessageFailure("rejected", str((notification.get("reject") or {}).get("reason", "rejected")))
    detail = notification.get(kind[0].lower() + kind[1:]) or {}
    # The recipients it names: an email to several may bounce for some of them only, and only those
    # are suppressed (none named: the message's own recipient).
    named = detail.get("bouncedRecipients") or detail.get("complainedRecipients")
    addresses = [str(r["emailAddress"]) for r in named or [] if isinstance(r, dict) and r.get("emailAddress")]
    occurred_at = str(detail.get("timestamp") or mail.get("timestamp") or "")
    # SES gives no event id: the same notification always hashes to the same one.
    event_id = hashlib.sha256(
        json.dumps([kind, mail.get("messageId"), occurred_at], separators=(",", ":")).encode()
    ).hexdigest()
    return ProviderEvent(
        provider="ses",
        event_id=event_id,
        message_id=str(message_ids[0]),
        type=event_type,
        occurred_at=occurred_at,
        error=error,
        suppress=suppress,
        to=addresses[0] if addresses else None,
        also=tuple(addresses[1:]),
    )
