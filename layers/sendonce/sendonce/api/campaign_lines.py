"""A campaign's content and lines read as sends: the one way a campaign's recipient becomes a send.

A line is `{"to", "data"?, "metadata"?}`; with its campaign's content it is validated as a body of
`POST /v1/messages` is (`SendMessageRequest`), so a line a send would refuse is refused with the
same code, message and details. The plan reads each line's recipient as the dedup guard does
(`recipient_key`) to tell the repeats of a list apart.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from msgspec.structs import replace
from pydantic import ValidationError

from sendonce import channels
from sendonce.api.commands import SendMessageRequest, command_of
from sendonce.api.errors import details_from_pydantic, from_domain_error
from sendonce.campaigns.fanout import LineRefused
from sendonce.campaigns.model import Campaign
from sendonce.errors import SendonceError
from sendonce.messages.recipients import InvalidRecipient
from sendonce.messages.service import SendCommand

LINE_FIELDS = frozenset({"to", "data", "metadata"})
_INVALID = "The request body is not valid."


def line_body(content: dict[str, Any], channel: str, line: Any) -> dict[str, Any]:
    """The send a line asks for, as a request body: its campaign's content with the line's fields."""
    if not isinstance(line, dict):
        raise LineRefused(
            "validation_error", _INVALID, [{"field": "line", "message": "must be a JSON object"}]
        )
    unknown = sorted(set(line) - LINE_FIELDS)
    if unknown:
        raise LineRefused(
            "validation_error",
            _INVALID,
            [{"field": name, "message": "Extra inputs are not permitted"} for name in unknown],
        )
    return {**content, "channel": channel, **line}


def parse_line(campaign: Campaign, raw: bytes) -> SendCommand:
    """The send of one line of a campaign's list; LineRefused as a send would be refused."""
    try:
        line = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise LineRefused(
            "validation_error", _INVALID, [{"field": "line", "message": "is not valid JSON"}]
        ) from None
    body = line_body(campaign.content, campaign.channel, line)
    try:
        request = SendMessageRequest.model_validate(body)
    except ValidationError as error:
        raise LineRefused("validation_error", _INVALID, details_from_pydantic(error.errors())) from None
    return replace(command_of(request, campaign.workspace_id, None), campaign_id=campaign.id)


def refusal(error: SendonceError) -> LineRefused:
    """What a send refused with `error` is answered, as a line's error."""
    answer = from_domain_error(error)
    return LineRefused(answer.code, answer.message, answer.details)


def recipient_key(channel: str, raw: bytes) -> bytes | None:
    """The recipients a line names, as the dedup guard sees them, hashed (None: none it can read)."""
    try:
        to = json.loads(raw).get("to")
        addresses = [to] if isinstance(to, str) else to
        if not isinstance(addresses, list) or not addresses:
            return None
        forms = sorted({channels.normalise_recipient(channel, address).dedup_form for address in addresses})
    except (ValueError, AttributeError, TypeError, InvalidRecipient, UnicodeDecodeError):
        return None
    return hashlib.blake2b("\x00".join(forms).encode("utf-8"), digest_size=16).digest()
