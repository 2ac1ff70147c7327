"""The suppressions context's ports: the send path's check, and the list a workspace manages."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Protocol

from msgspec import Struct

from sendonce.suppressions.model import Suppression


class SuppressionPage(Struct, frozen=True):
    suppressions: list[Suppression]
    next_cursor: str | None


class SuppressionCheck(Protocol):
    """What a send and a dispatcher ask: is this recipient suppressed for this workspace? A workspace's
    own entry, or an opt-out that names no message (every live workspace's), unless the workspace
    removed it since."""

    def find_many(self, workspace_id: str, keys: Collection[str]) -> dict[str, Suppression]:
        """The entries in force of those `keys` that have one, in one read."""
        ...


class SuppressionStore(SuppressionCheck, Protocol):
    def add(self, workspace_id: str, suppression: Suppression) -> tuple[Suppression, bool]:
        """The entry in force for its recipient, and whether this call created it (an existing one is
        kept as it is, whatever its reason)."""
        ...

    def remove(self, workspace_id: str, key: str, now: datetime) -> bool:
        """Take the recipient off the workspace's list (also an opt-out every workspace shares, for this
        workspace alone); False when it was not on it."""
        ...

    def list(self, workspace_id: str, limit: int, cursor: str | None) -> SuppressionPage:
        """The entries in force, newest first; raise InvalidCursor for a cursor this list never gave."""
        ...


def find(check: SuppressionCheck, workspace_id: str, key: str) -> Suppression | None:
    return check.find_many(workspace_id, [key]).get(key)
