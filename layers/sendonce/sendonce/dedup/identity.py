"""The dedup identity of a message.

JSON-encoding the tuple makes the encoding injective: every field is quoted and escaped, so
`("a@b.co", "mhi")` and `("a@b.com", "hi")` can never produce the same bytes, unlike plain
concatenation. The channel is not part of it: the same words to the same human are one message.
A send from a template has a second identity besides its content's: the template's name and data
to the recipient (`template_identity`), so that a retry across a new version is still caught.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

IDENTITY_VERSION = "v1"
TEMPLATE_IDENTITY_VERSION = "template.v1"


def dedup_identity(workspace_id: str, recipient_dedup_form: str, subject: str | None, body: str) -> str:
    encoded = json.dumps(
        [IDENTITY_VERSION, workspace_id, recipient_dedup_form, subject, body],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


def template_identity(workspace_id: str, recipient_dedup_form: str, template_name: str, data: Any) -> str:
    """The identity of a send from a template, whatever version it renders: the template's name and
    the data (canonical JSON: key order and white space never make two sends differ) to the
    recipient. Its version tag keeps it apart from every `dedup_identity`."""
    encoded = json.dumps(
        [TEMPLATE_IDENTITY_VERSION, workspace_id, recipient_dedup_form, template_name, data],
        ensure_ascii=False,
        separators=(",", ":"),
        sort_keys=True,
    )
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()
