"""`X-Sendonce-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`."""

from __future__ import annotations

import hashlib
import hmac

TOLERANCE_SECONDS = 300


class InvalidSignature(ValueError):
    pass


def sign(secret: str, timestamp: int, raw_body: bytes) -> str:
    digest = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode() + raw_body, hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"


def verify(header: str | None, raw_body: bytes, secret: str, now: float) -> None:
    """Raise InvalidSignature unless the header signs this body with this secret, recently."""
    if not secret:
        raise InvalidSignature("no webhook secret is configured")
    if not header:
        raise InvalidSignature("the signature header is missing")
    fields: dict[str, list[str]] = {}
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        fields.setdefault(name, []).append(value)
    try:
        timestamp = int(fields["t"][0])
    except (KeyError, ValueError):
        raise InvalidSignature("the signature has no valid timestamp") from None
    if abs(now - timestamp) > TOLERANCE_SECONDS:
        raise InvalidSignature("the signature is too old, or from the future")
    expected = sign(secret, timestamp, raw_body).partition("v1=")[2]
    # Several v1 values may be sent while a secret is rotated; any valid one is enough.
    if not any(hmac.compare_digest(expected, candidate) for candidate in fields.get("v1", [])):
        raise InvalidSignature("the signature does not match")
