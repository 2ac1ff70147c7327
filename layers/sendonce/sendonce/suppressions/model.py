"""A suppression: one recipient a workspace never sends to again, until it removes the entry.

An entry is keyed by the recipient's dedup form (`recipient_key`), which no channel enters: a phone
number in E.164 is the same key for sms and iMessage, an address (ASCII case folded) the same for
email and iMessage. So one entry covers every channel that can reach that person.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from msgspec import Struct

from sendonce.messages.recipients import Recipient, ascii_lower, normalise_phone_or_email
from sendonce.modes import is_test_workspace


class Reason(StrEnum):
    OPTED_OUT = "opted_out"
    BOUNCED = "bounced"
    COMPLAINED = "complained"
    MANUAL = "manual"


class Suppression(Struct, frozen=True):
    to: str  # the normalised recipient (an email's domain lower-cased, its local part as first seen)
    reason: Reason
    created_at: datetime
    message_id: str | None = None  # the message whose event caused it, if any

    @property
    def key(self) -> str:
        return recipient_key(self.to)


def recipient_key(address: str) -> str:
    """The key of a normalised address: its dedup form (`Recipient.dedup_form`), whatever the channel."""
    return ascii_lower(address)


def recipient_of(raw: str) -> Recipient:
    """Any form of a phone number or an address (GET and DELETE name no channel); InvalidRecipient
    if it is neither."""
    return normalise_phone_or_email(raw)


def shares_opt_outs(workspace_id: str) -> bool:
    """Whether an opt-out that names no message (a STOP to the shared sending number) applies to this
    workspace: every live workspace sends from that number. The one place that says which do. A
    test twin does not: its messages go to the simulator, never through that number."""
    return bool(workspace_id) and not is_test_workspace(workspace_id)


# CTIA's opt-out words, as carriers and Twilio honour them: alone in the body, any case.
STOP_KEYWORDS = frozenset({"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT"})


def is_stop(body: str) -> bool:
    """Whether an inbound text is an opt-out: one keyword alone, any ASCII case, white space around it
    ignored. "Stop it" or "stop." is not one; nor is a word that only folds to one outside ASCII."""
    word = body.strip()
    return word.isascii() and word.upper() in STOP_KEYWORDS
