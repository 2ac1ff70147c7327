"""The one way a validated message body becomes a send: `POST /v1/messages` and each batch item alike.

The recipient is normalised for its channel here and only here, and a keyed send carries the
fingerprint of its parsed body, which is what the key's record and tie compare.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sendonce import channels
from sendonce.api.schemas import SendMessageRequest
from sendonce.idempotency.keys import payload_fingerprint
from sendonce.messages.model import Channel
from sendonce.messages.service import SendCommand


def command_of(
    message: SendMessageRequest, workspace: str, key: str | None, payload: Any = None
) -> SendCommand:
    """The send of a validated body; with a key, `payload` is the parsed body it was sent with."""
    channel = Channel(message.channel)
    command = SendCommand(
        workspace_id=workspace,
        channel=channel,
        recipient=channels.normalise_recipient(channel, message.to),
        subject=message.subject,
        body=message.body,
        send_at=message.send_at(),
        metadata=message.metadata or {},
        idempotency_key=key,
    )
    if key is None:
        return command
    return replace(command, payload_fingerprint=payload_fingerprint(payload))
