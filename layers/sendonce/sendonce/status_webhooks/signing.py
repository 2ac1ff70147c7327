"""Standard Webhooks signatures, made by the `standardwebhooks` package: any of its receivers verifies them.

While a secret is rotated, a delivery carries one signature per live secret, space-separated, as
the specification allows: a receiver with either secret verifies it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from standardwebhooks.webhooks import Webhook


def signed_headers(event_id: str, at: datetime, body: str, secrets: Sequence[str]) -> dict[str, str]:
    if not secrets:
        raise ValueError("a delivery needs at least one secret")
    return {
        "content-type": "application/json",
        "webhook-id": event_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": " ".join(Webhook(secret).sign(event_id, at, body) for secret in secrets),
    }
