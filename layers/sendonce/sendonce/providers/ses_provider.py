"""Email through Amazon SES (v2). SES has no idempotency key: a 5xx or a lost answer ends `unknown`.

One message is one `SendEmail` carrying every recipient it has left (To, Cc, Bcc), its reply-to
address, and its text and html parts (an email sent with html alone has no text part).

How each failure is read is `aws_errors.classify`'s to say; the client is built with SDK retries off.
"""

from __future__ import annotations

from typing import Any

from sendonce.messages.model import Message
from sendonce.providers.aws_errors import classify

MESSAGE_ID_TAG = "sendonce-message-id"


class SesProvider:
    name = "ses"
    honours_idempotency_key = False

    def __init__(self, client: Any, from_address: str, configuration_set: str = "") -> None:
        self._client = client  # built with SDK retries off: a lost answer must not be re-sent
        self._from = from_address
        # The configuration set publishes delivery, bounce and complaint events back to sendonce.
        self._extra = {"ConfigurationSetName": configuration_set} if configuration_set else {}

    def send(self, message: Message) -> str:
        destination: dict[str, list[str]] = {}
        if message.to_addresses:
            destination["ToAddresses"] = list(message.to_addresses)
        if message.cc:
            destination["CcAddresses"] = list(message.cc)
        if message.bcc:
            destination["BccAddresses"] = list(message.bcc)
        body: dict[str, dict[str, str]] = {}
        if message.body or message.html is None:
            body["Text"] = {"Data": message.body, "Charset": "UTF-8"}
        if message.html is not None:
            body["Html"] = {"Data": message.html, "Charset": "UTF-8"}
        reply_to = {"ReplyToAddresses": [message.reply_to]} if message.reply_to is not None else {}
        try:
            response = self._client.send_email(
                FromEmailAddress=self._from,
                Destination=destination,
                **reply_to,
                Content={
                    "Simple": {
                        "Subject": {"Data": message.subject or "", "Charset": "UTF-8"},
                        "Body": body,
                    }
                },
                EmailTags=[{"Name": MESSAGE_ID_TAG, "Value": message.id}],
                **self._extra,
            )
        except Exception as error:
            raise classify(error, self.name) from error
        return str(response.get("MessageId", message.id))
