"""The simulator's port: what it accepted, once per Idempotency-Key, and how often it was called."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from msgspec import Struct

# `GET /v1/test/deliveries` without a message id: the newest this many.
MAX_LISTED = 100


class SimulatedDelivery(Struct, frozen=True):
    """One call the simulator accepted."""

    workspace_id: str
    message_id: str
    channel: str
    to: str
    subject: str | None
    body: str
    at: datetime
    provider_id: str
    idempotency_key: str
    # An email's lists as the call carried them (None: not given); `to` is then its first recipient.
    to_list: tuple[str, ...] | None = None
    cc: tuple[str, ...] | None = None
    bcc: tuple[str, ...] | None = None


class SimulatorStore(Protocol):
    def count_call(self, workspace_id: str, message_id: str, now: datetime) -> int:
        """Count a call for the message; this call's number, from 1."""
        ...

    def accept(self, delivery: SimulatedDelivery) -> tuple[SimulatedDelivery, bool]:
        """Record the delivery unless its Idempotency-Key was accepted before: the delivery on record,
        and whether this call recorded it."""
        ...


class SimulatorDeliveries(Protocol):
    def deliveries(self, workspace_id: str, message_id: str | None) -> list[SimulatedDelivery]:
        """A workspace's deliveries: one message's, or the newest MAX_LISTED, newest first."""
        ...


class NoDeliveries:
    """Where nothing was ever simulated."""

    def deliveries(self, workspace_id: str, message_id: str | None) -> list[SimulatedDelivery]:
        return []
