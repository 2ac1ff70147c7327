"""Sms through Amazon SNS. SNS has no idempotency key: a 5xx or a lost answer ends `unknown`.

How each failure is read is `aws_errors.classify`'s to say; the client is built with SDK retries off.
"""

from __future__ import annotations

from typing import Any

from sendonce.messages.model import Message
from sendonce.providers.aws_errors import classify

MESSAGE_ID_ATTRIBUTE = "sendonce.message_id"


class SnsProvider:
    name = "sns"
    honours_idempotency_key = False

    def __init__(self, client: Any) -> None:
        self._client = client  # built with SDK retries off: a lost answer must not be re-sent

    def send(self, message: Message) -> str:
        try:
            response = self._client.publish(
                PhoneNumber=message.to,
                Message=message.body,
                MessageAttributes={
                    "AWS.SNS.SMS.SMSType": {"DataType": "String", "StringValue": "Transactional"},
                    MESSAGE_ID_ATTRIBUTE: {"DataType": "String", "StringValue": message.id},
                },
            )
        except Exception as error:
            raise classify(error, self.name) from error
        return str(response.get("MessageId", message.id))
