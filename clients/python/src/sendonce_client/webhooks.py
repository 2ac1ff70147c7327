"""Verifying sendonce's status webhooks: the Standard Webhooks signature, then the typed event.

`verify` never returns an event whose signature, or whose timestamp (5 minutes either way, the
Standard Webhooks tolerance), does not hold; it raises `WebhookVerificationError` instead. Receivers
should still deduplicate on the `webhook-id` header: a delivery is at least once.
"""

from __future__ import annotations

from collections.abc import Mapping

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from sendonce_client.models import WebhookEvent

__all__ = ["WebhookVerificationError", "verify"]


def verify(body: bytes | str, headers: Mapping[str, str], secret: str) -> WebhookEvent:
    """The event of a delivery whose signature is the endpoint secret's (`whsec_...`)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    payload = body.decode("utf-8") if isinstance(body, bytes) else body
    Webhook(secret).verify(payload, lowered)
    return WebhookEvent.model_validate_json(payload)
