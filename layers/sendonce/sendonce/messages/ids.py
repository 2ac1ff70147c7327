"""Message ids: `msg_` and a ULID, so that ids sort by creation time (newest-first listing)."""

from __future__ import annotations

import secrets
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
PREFIX = "msg_"


def new_message_id(now_ms: int | None = None) -> str:
    timestamp = int(time.time() * 1000) if now_ms is None else now_ms
    value = (timestamp << 80) | secrets.randbits(80)
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return PREFIX + "".join(reversed(chars))


def looks_like_message_id(candidate: str) -> bool:
    body = candidate.removeprefix(PREFIX)
    return candidate.startswith(PREFIX) and len(body) == 26 and all(c in _CROCKFORD for c in body)
