"""An erasure: a workspace's request that one recipient keep no trace in its stores (GDPR art. 17).

Invariants:
- The erasure's record never keeps the address once it is done: while pending it holds it (so an
  erasure whose job was lost can still be run by the sweep), and the completion removes it in the
  same write that marks it done. What stays, for the operator's audit, is the id, the workspace,
  the times, the status and the counts of what was erased.
- Erasing is replacing: an address or a content field becomes ERASED, in place, so every item keeps
  its shape (a message stays a message, an event an event) and erasing it again changes nothing.
- The keys that let the service keep its promises for that person (dedup locks, key ties,
  suppression keys) are hashes, never the address: they are not erased, so a keyed retry is still a
  replay and a suppressed recipient is still refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any

from msgspec import Struct

from sendonce.messages.ids import looks_like_ulid, ulid
from sendonce.messages.recipients import Recipient, ascii_lower

ERASURE_PREFIX = "era_"
ERASED = "[erased]"

# The fields that name a message's recipients or hold its content, wherever a copy of a message
# is kept (the item, an event's snapshot, a stored answer, a test delivery): erased whole, whatever
# they hold, since an email's lists and an edited body may hold what the address alone does not match.
RECIPIENT_FIELDS = frozenset({"to", "toList", "cc", "bcc", "suppressedRecipients"})
CONTENT_FIELDS = frozenset({"body", "subject", "html"})
ERASED_FIELDS = RECIPIENT_FIELDS | CONTENT_FIELDS


class ErasureStatus(StrEnum):
    PENDING = "pending"
    DONE = "done"


class ErasureCounts(Struct, frozen=True):
    """What an erasure changed, by kind of item: the audit's numbers (no address, no content)."""

    messages: int = 0
    canceled: int = 0
    events: int = 0
    provider_events: int = 0
    stored_answers: int = 0
    test_deliveries: int = 0
    campaign_errors: int = 0
    suppressions: int = 0

    def plus(self, other: ErasureCounts) -> ErasureCounts:
        return ErasureCounts(
            **{name: getattr(self, name) + getattr(other, name) for name in self.__struct_fields__}
        )

    def as_dict(self) -> dict[str, int]:
        return {name: int(getattr(self, name)) for name in self.__struct_fields__}

    @classmethod
    def of(cls, values: Mapping[str, int]) -> ErasureCounts:
        return cls(**{name: int(values.get(name, 0)) for name in cls.__struct_fields__})


class Erasure(Struct, frozen=True):
    """An erasure as its owner and the audit see it: never the address."""

    id: str
    workspace_id: str
    status: ErasureStatus
    created_at: datetime
    completed_at: datetime | None = None
    counts: ErasureCounts = ErasureCounts()


class ErasureWork(Struct, frozen=True):
    """A pending erasure as its job reads it: the address (held only while pending), how far the
    recipient's messages were read (`cursor`; `listed` once all were), and the messages whose
    latest change may still be on its way to an event (`unsettled`, re-erased until it is told)."""

    erasure: Erasure
    to: str
    cursor: str | None = None
    listed: bool = False
    unsettled: frozenset[str] = frozenset()


def new_erasure_id(now: datetime) -> str:
    return ERASURE_PREFIX + ulid(int(now.timestamp() * 1000))


def looks_like_erasure_id(candidate: str) -> bool:
    return candidate.startswith(ERASURE_PREFIX) and looks_like_ulid(candidate.removeprefix(ERASURE_PREFIX))


class Redaction(Struct, frozen=True):
    """What an erasure takes out of a copy: each form the address is written in (matched without
    ASCII case, anywhere in a text), and every field that names a recipient or holds content."""

    forms: tuple[str, ...]

    @classmethod
    def of(cls, recipient: Recipient) -> Redaction:
        forms = {ascii_lower(recipient.address), ascii_lower(recipient.dedup_form)}
        if recipient.address.startswith("+"):
            forms.add(recipient.address[1:])  # a provider's copy may drop the plus of E.164
        return cls(tuple(sorted(form for form in forms if form)))

    def names(self, text: str) -> bool:
        """Whether a text holds the address in any of its forms."""
        folded = ascii_lower(text)
        return any(form in folded for form in self.forms)

    def text(self, text: str) -> str:
        return ERASED if self.names(text) else text

    def value(self, value: Any, *, whole: bool = False) -> Any:
        """A JSON value with the address taken out of every text in it and, `whole`, every text
        erased (a recipient or content field's value); a field of ERASED_FIELDS is erased whole."""
        if isinstance(value, str):
            return ERASED if whole else self.text(value)
        if isinstance(value, list):
            return [self.value(element, whole=whole) for element in value]
        if isinstance(value, dict):
            return {
                name: self.value(element, whole=whole or name in ERASED_FIELDS)
                for name, element in value.items()
            }
        return value  # numbers, booleans and nulls name no one
