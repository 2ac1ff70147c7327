"""The sandbox's record of every message that reached a provider (HTTP, SES or SNS)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any


def now_rfc3339() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class DeliveryLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._deliveries: list[dict[str, Any]] = []

    def record(
        self,
        *,
        message_id: str | None,
        channel: str | None,
        to: str | None,
        subject: str | None,
        body: str | None,
        provider: str,
    ) -> None:
        entry = {
            "messageId": message_id,
            "channel": channel,
            "to": to,
            "subject": subject,
            "body": body,
            "provider": provider,
            "at": now_rfc3339(),
        }
        with self._lock:
            self._deliveries.append(entry)

    def all(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(entry) for entry in self._deliveries]

    def clear(self) -> None:
        with self._lock:
            self._deliveries.clear()
