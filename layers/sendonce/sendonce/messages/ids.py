"""Message ids: `msg_` and a ULID, so that ids sort by creation time (newest-first listing)."""

from __future__ import annotations

import secrets
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
PREFIX = "msg_"


def ulid(now_ms: int, randomness: int | None = None) -> str:
    """A ULID: 48 bits of milliseconds, then 80 of `randomness` (random when not given)."""
    value = (now_ms << 80) | (secrets.randbits(80) if randomness is None else randomness & ((1 << 80) - 1))
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_message_id(now_ms: int | None = None) -> str:
    return PREFIX + ulid(int(time.time() * 1000) if now_ms is None else now_ms)


def looks_like_ulid(candidate: str) -> bool:
    return len(candidate) == 26 and all(c in _CROCKFORD for c in candidate)


def looks_like_message_id(candidate: str) -> bool:
    return candidate.startswith(PREFIX) and looks_like_ulid(candidate.removeprefix(PREFIX))
