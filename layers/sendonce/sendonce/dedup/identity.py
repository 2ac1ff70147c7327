"""The dedup identity of a message.

JSON-encoding the tuple makes the encoding injective: every field is quoted and escaped, so
`("a@b.co", "mhi")` and `("a@b.com", "hi")` can never produce the same bytes, unlike plain
concatenation. The channel is not part of it: the same words to the same human are one message.
An email may go to several recipients and carry an html part: its identity is the *set* of its
recipients' dedup forms (in any order, in any of to, cc and bcc) with its subject, text and html
(`message_identity`). One recipient and no html is exactly the single-recipient identity (`v1`), so
the locks of messages already written still match; anything else is encoded as `v2`, with the
recipients sorted, which no `v1` value can equal (its second element is a list, not a string).

A send from a template has a second identity besides its content's: the template's name and data
to its recipients (`template_identity`), so that a retry across a new version is still caught.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from typing import Any

IDENTITY_VERSION = "v1"
SET_IDENTITY_VERSION = "v2"
TEMPLATE_IDENTITY_VERSION = "template.v1"


def dedup_identity(workspace_id: str, recipient_dedup_form: str, subject: str | None, body: str) -> str:
    encoded = json.dumps(
        [IDENTITY_VERSION, workspace_id, recipient_dedup_form, subject, body],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


def message_identity(
    workspace_id: str,
    recipient_dedup_forms: Collection[str],
    subject: str | None,
    body: str,
    html: str | None = None,
) -> str:
    """The identity of a message to a set of recipients (their dedup forms; order and repeats do not
    matter): `dedup_identity` itself for one recipient and no html."""
    recipients = sorted(set(recipient_dedup_forms))
    if not recipients:
        raise ValueError("a message has at least one recipient")
    if len(recipients) == 1 and html is None:
        return dedup_identity(workspace_id, recipients[0], subject, body)
    encoded = json.dumps(
        [SET_IDENTITY_VERSION, workspace_id, recipients, subject, body, html],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


def template_identity(
    workspace_id: str, recipient_dedup_forms: Collection[str], template_name: str, data: Any
) -> str:
    """The identity of a send from a template, whatever version it renders: the template's name and
    the data (canonical JSON: key order and white space never make two sends differ) to the set of
    its recipients. Its version tag keeps it apart from every `dedup_identity` and set identity."""
    encoded = json.dumps(
        [TEMPLATE_IDENTITY_VERSION, workspace_id, sorted(set(recipient_dedup_forms)), template_name, data],
        ensure_ascii=False,
        separators=(",", ":"),
        sort_keys=True,
    )
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


CAMPAIGN_IDENTITY_VERSION = "campaign.v1"


def campaign_identity(workspace_id: str, campaign_id: str, recipient_dedup_forms: Collection[str]) -> str:
    """The identity of a campaign's message to a recipient (the set of its dedup forms), whatever its
    data: a campaign holds one message per recipient, so a page read again finds it taken."""
    encoded = json.dumps(
        [CAMPAIGN_IDENTITY_VERSION, workspace_id, campaign_id, sorted(set(recipient_dedup_forms))],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()
