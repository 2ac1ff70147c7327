"""The sandbox's record of every message that reached a provider (HTTP, SES or SNS): one entry per
accepted call. An email to several recipients is one call, so one entry, with `to` (a string for
one address, else the list), `cc` and `bcc` as sent."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger("local-stack.sandbox")

Delivery = dict[str, Any]
DeliveryListener = Callable[[Delivery], None]


def now_rfc3339() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class DeliveryLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._deliveries: list[Delivery] = []
        self._listeners: list[DeliveryListener] = []

    def add_listener(self, listener: DeliveryListener) -> None:
        """Called with a copy of each new delivery, after it is recorded; it must not block."""
        with self._lock:
            self._listeners.append(listener)

    def record(
        self,
        *,
        message_id: str | None,
        channel: str | None,
        to: str | list[str] | None,
        subject: str | None,
        body: str | None,
        provider: str,
        email: dict[str, Any] | None = None,
        validity: dict[str, Any] | None = None,
    ) -> None:
        """`email`: an email's `cc`, `bcc`, `replyTo` and `html` as the call carried them, only those
        it carried (an entry without them is as it always was). `validity`: the message's end of
        validity as the call gave it (the HTTP provider's `expiresAt`, Twilio's `validityPeriod` in
        seconds), only when it gave one."""
        entry = {
            "messageId": message_id,
            "channel": channel,
            "to": to,
            "subject": subject,
            "body": body,
            **(email or {}),
            **(validity or {}),
            "provider": provider,
            "at": now_rfc3339(),
        }
        with self._lock:
            self._deliveries.append(entry)
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(dict(entry))
            except Exception:
                log.exception("a delivery listener failed on %s", message_id)

    def all(self) -> list[Delivery]:
        with self._lock:
            return [dict(entry) for entry in self._deliveries]

    def clear(self) -> None:
        with self._lock:
            self._deliveries.clear()
