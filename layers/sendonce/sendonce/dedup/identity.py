"""The dedup identity of a message.

JSON-encoding the tuple makes the encoding injective: every field is quoted and escaped, so
`("a@b.co", "mhi")` and `("a@b.com", "hi")` can never produce the same bytes, unlike plain
concatenation. The channel is not part of it: the same words to the same human are one message.
"""

from __future__ import annotations

import hashlib
import json

IDENTITY_VERSION = "v1"


def dedup_identity(workspace_id: str, recipient_dedup_form: str, subject: str | None, body: str) -> str:
    encoded = json.dumps(
        [IDENTITY_VERSION, workspace_id, recipient_dedup_form, subject, body],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()
