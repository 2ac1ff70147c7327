"""Settling an `unknown` message: an operator learned its outcome from the provider, and says so.

Only an `unknown` message is settled, and only as `sent` or `failed`; the change is conditional on
the status still being `unknown`, so a known outcome (a provider event, another operator) is never
overridden. `failed` releases the message's dedup lock, as any failure does: a deliberate retry
may then send. `sent` keeps it. It runs in the operator's command, which reports what it did.
"""

from __future__ import annotations

from enum import StrEnum

from msgspec import Struct

from sendonce.clock import Clock, utc_now
from sendonce.dispatch.ports import DispatchStore, SettleRefused
from sendonce.messages.model import Message, Status

SETTLED_AS = frozenset({Status.SENT, Status.FAILED})


class Resolution(StrEnum):
    SETTLED = "settled"
    NOT_FOUND = "not_found"
    NOT_UNKNOWN = "not_unknown"  # its outcome is known already: nothing changed


class Resolved(Struct, frozen=True):
    resolution: Resolution
    message: Message | None  # as settled, or as it stands when refused (None: no such message)


def resolve_unknown(
    store: DispatchStore, message_id: str, status: Status, clock: Clock = utc_now
) -> Resolved:
    if status not in SETTLED_AS:
        raise ValueError(f"an unknown message is settled as sent or failed, not {status.value}")
    settled = store.settle_unknown(message_id, status, clock())
    if isinstance(settled, SettleRefused):
        resolution = Resolution.NOT_FOUND if settled.current is None else Resolution.NOT_UNKNOWN
        return Resolved(resolution, settled.current)
    if status is Status.FAILED:
        store.release_dedup_lock(settled)  # a deliberate retry may send again
    return Resolved(Resolution.SETTLED, settled)
