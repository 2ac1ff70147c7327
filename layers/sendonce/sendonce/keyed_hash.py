"""Keyed hashes: what the stores hold wherever they must find a recipient again without keeping them.

A dedup lock, a key tie, a suppression entry's key and a frequency cap's counter are found by a
hash of what names the recipient. A plain hash is no anonymisation: anyone who guesses an address
(and, for a lock, the words) recomputes it, so an erased person would still be findable in them.
Each is an HMAC-SHA256 under the deployment's hashing key instead: a random secret created with the
stack in Secrets Manager (`HashingKeySecret`), read on first use and kept for the environment's life.

The key never changes: a recipient must hash alike for as long as any lock, tie or suppression
made for them holds, so a new key would forget every suppression (docs/guarantees.md, "Erasure").
A key that cannot be read is `SecretUnavailable`, an outage: nothing is ever hashed under another.
"""

from __future__ import annotations

import hashlib
import hmac

from sendonce.secret_values import Secret


class KeyedHash:
    """`keyed_hash(text)`: the hex HMAC-SHA256 of `text` under the deployment's hashing key."""

    def __init__(self, key: Secret) -> None:
        self._key = key
        self._bytes: bytes | None = None  # read once: the key never changes

    def __call__(self, text: str) -> str:
        key = self._bytes
        if key is None:
            key = self._bytes = self._key().encode("utf-8")
        return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def logged_recipient(keyed: KeyedHash, recipient_key: str) -> str:
    """How a log line names a recipient (its `recipient_key`): a short keyed hash, the same on every
    line and in every function, so an operator holding the key can find one person's lines, and
    nobody else can tell who they are. Logs never hold an address, masked or whole."""
    return keyed(f"log\x00{recipient_key}")[:20]
