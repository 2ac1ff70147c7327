"""A message as the API shows it, as JSON values: the one mapping from a domain `Message` to the
fields of `sendonce.api.shapes.MessageModel`, in their order.

Plain values and no validation library: a status webhook's `data.message` is this, so the function
that records the events (MessageChangesFunction) never imports pydantic, and the API's answers are
`MessageModel`s validated from it (`MessageModel.of`), so the two never differ
(`tests/unit/test_response_models.py` holds the model's dump to it, field for field and in order).
"""

from __future__ import annotations

from typing import Any

from sendonce import channels
from sendonce.clock import rfc3339
from sendonce.messages import sms
from sendonce.messages.model import Message, Priority


def sms_count(channel: str, body: str) -> sms.SmsCount | None:
    """How `body` travels on `channel`: counted for a channel that is sms, None on any other."""
    return sms.count(body) if channels.spec(channel).sms else None


def message_shape(message: Message) -> dict[str, Any]:
    """The message as the API shows it, as JSON values: a status webhook's `data.message`. An email's
    `cc`, `bcc`, `replyTo`, `html` and `suppressedRecipients`, a templated message's `template` and
    a campaign's message's `campaignId` are there only when it has them, so a message with none of
    them looks as it did before they existed."""
    error, template = message.error, message.template
    counted = sms_count(message.channel, message.body)
    email: dict[str, Any] = message.email_fields()
    if message.suppressed_recipients:
        email["suppressedRecipients"] = list(message.suppressed_recipients)
    return {
        "id": message.id,
        "channel": message.channel.value,
        "to": message.to if message.to_list is None else list(message.to_list),
        **email,
        "subject": message.subject,
        "body": message.body,
        "encoding": counted.encoding.value if counted is not None else None,
        "segments": counted.segments if counted is not None else None,
        **(
            {"template": {"name": template.name, "version": template.version}} if template is not None else {}
        ),
        **({"campaignId": message.campaign_id} if message.campaign_id is not None else {}),
        "status": message.status.value,
        "sendAt": rfc3339(message.send_at) if message.send_at is not None else None,
        **({"heldFor": message.held_for.value} if message.held_for is not None else {}),
        **({"expiresAt": rfc3339(message.expires_at)} if message.expires_at is not None else {}),
        **({"priority": message.priority.value} if message.priority is not Priority.NORMAL else {}),
        "metadata": dict(message.metadata),
        "idempotencyKey": message.idempotency_key,
        "attempts": message.attempts,
        "provider": message.provider,
        "providerAttempts": [
            {"provider": attempt.provider, "outcome": attempt.outcome.value, "at": rfc3339(attempt.at)}
            for attempt in message.provider_attempts
        ],
        "error": {"code": error.code, "message": error.message} if error is not None else None,
        "createdAt": rfc3339(message.created_at),
        "updatedAt": rfc3339(message.updated_at),
    }
