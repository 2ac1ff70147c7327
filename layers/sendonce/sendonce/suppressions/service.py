"""The suppression list's use cases: add, read, list and remove entries by hand (the API and the CLI).

Entries also come from provider events (`sendonce.provider_events`), applied once with the event.
A recipient is named in any form its channel accepts; GET and DELETE name no channel, so a phone
number or an address in any form that normalises to the entry finds it.
"""

from __future__ import annotations

from sendonce.channels import normalise_recipient
from sendonce.clock import Clock, utc_now
from sendonce.errors import SuppressionNotFound
from sendonce.observability import logger, metrics
from sendonce.suppressions.model import Reason, Suppression, recipient_of
from sendonce.suppressions.ports import SuppressionPage, SuppressionStore, find


class SuppressionService:
    def __init__(self, store: SuppressionStore, clock: Clock = utc_now) -> None:
        self._store = store
        self._clock = clock

    def add(self, workspace_id: str, channel: str, raw_to: str) -> tuple[Suppression, bool]:
        """A manual entry; raises InvalidRecipient or UnknownChannel for a recipient the channel
        cannot read."""
        recipient = normalise_recipient(channel, raw_to)
        entry, created = self._store.add(
            workspace_id, Suppression(to=recipient.address, reason=Reason.MANUAL, created_at=self._clock())
        )
        if created:
            metrics.add_metric(name="SuppressionAdded", unit="Count", value=1)
            logger.info(
                "suppression.added",
                extra={
                    "event": "suppression.added",
                    "workspace_id": workspace_id,
                    "reason": entry.reason.value,
                },
            )
        return entry, created

    def get(self, workspace_id: str, raw_to: str) -> Suppression:
        entry = find(self._store, workspace_id, recipient_of(raw_to).dedup_form)
        if entry is None:
            raise SuppressionNotFound()
        return entry

    def list(self, workspace_id: str, limit: int, cursor: str | None) -> SuppressionPage:
        return self._store.list(workspace_id, limit, cursor)

    def remove(self, workspace_id: str, raw_to: str) -> None:
        if not self._store.remove(workspace_id, recipient_of(raw_to).dedup_form, self._clock()):
            raise SuppressionNotFound()
        metrics.add_metric(name="SuppressionRemoved", unit="Count", value=1)
        logger.info(
            "suppression.removed", extra={"event": "suppression.removed", "workspace_id": workspace_id}
        )
