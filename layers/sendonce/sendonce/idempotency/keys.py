"""Idempotency-Key values and the payload they are compared on."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from typing import Any

MAX_KEY_LENGTH = 255


class InvalidIdempotencyKey(ValueError):
    pass


def parse_idempotency_key(raw: str) -> str:
    """The key a header value names: 1-255 visible ASCII characters, or the same as an RFC 8941 string."""
    value = raw.strip(" \t")
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        value = _unquote_sf_string(value[1:-1])
    if not 1 <= len(value) <= MAX_KEY_LENGTH:
        raise InvalidIdempotencyKey(f"must be 1 to {MAX_KEY_LENGTH} characters long")
    if any(not "!" <= char <= "~" for char in value):
        raise InvalidIdempotencyKey("may contain only visible ASCII characters ('!' to '~')")
    return value


def _unquote_sf_string(inner: str) -> str:
    # RFC 8941 sf-string: printable ASCII; `\` escapes only `"` and `\`.
    result: list[str] = []
    chars = iter(inner)
    for char in chars:
        if char == "\\":
            escaped = next(chars, "")
            if escaped not in ('"', "\\"):
                raise InvalidIdempotencyKey("is not a valid quoted string")
            result.append(escaped)
        elif char == '"':
            raise InvalidIdempotencyKey("is not a valid quoted string")
        else:
            result.append(char)
    return "".join(result)


def canonical_json(payload: Any) -> str:
    """The parsed body, re-encoded: key order and white space never change it."""
    return json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def payload_fingerprint(payload: Any) -> str:
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def tie_identity(workspace_id: str, key: str, destination: str | Collection[str]) -> str:
    """Which (workspace, key, destination) a message is tied to, forever. The destination of a message
    to several recipients is their set (dedup forms, in any order): a `v2` value, which no
    single-recipient (`v1`) tie can equal; a set of one is that recipient's `v1` tie, as before lists."""
    if not isinstance(destination, str):
        recipients = sorted(set(destination))
        if len(recipients) != 1:
            encoded = json.dumps(["v2", workspace_id, key, recipients], separators=(",", ":"))
            return hashlib.sha256(encoded.encode("utf-8")).hexdigest()
        destination = recipients[0]
    encoded = json.dumps(["v1", workspace_id, key, destination], separators=(",", ":"))
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()
