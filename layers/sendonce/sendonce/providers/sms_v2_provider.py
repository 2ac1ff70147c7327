"""Sms through AWS End User Messaging SMS (`pinpoint-sms-voice-v2`, `SendTextMessage`).

SendTextMessage takes no idempotency token, so a call is never repeated by the SDK (the client is
built with retries off) nor, after it may have been taken, by the dispatcher: every failure is read
through `classification`'s table, where a lost answer or a 5xx is `unknown` and only what provably
was not taken moves on. A call is made for one message only, and the message's id rides in its
`Context`, which every text event of it carries back (`provider_events.sms_v2_events`): that, not
the answer's id, is how an event finds its message, so even a message left `unknown` is settled by
its events.

`TimeToLive` is how long the carrier keeps trying: the message's time left when it has an
`expiresAt` (within AWS's 5 seconds to 72 hours), else AWS's maximum.
"""

from __future__ import annotations

from typing import Any

from sendonce.clock import Clock, utc_now
from sendonce.messages.model import Message
from sendonce.providers import aws_errors
from sendonce.providers.classification import failure
from sendonce.providers.validity import seconds_left

# The key of `Context` that names our message; its text events carry it back under `context`.
CONTEXT_MESSAGE_ID = "sendonce_message_id"
# AWS's maximum (72 hours): the carrier keeps trying that long, for a message without an expiry.
TIME_TO_LIVE_SECONDS = 259_200
# AWS's minimum: a message with less left than this is still given it (it is not yet past its expiry).
MIN_TIME_TO_LIVE_SECONDS = 5


class SmsV2Provider:
    name = "sms-v2"
    honours_idempotency_key = False  # SendTextMessage has no idempotency token

    def __init__(
        self,
        client: Any,
        configuration_set: str = "",
        origination_identity: str = "",
        *,
        clock: Clock = utc_now,
    ) -> None:
        self._client = client  # built with SDK retries off: a lost answer must not be re-sent
        # The configuration set publishes the text events back to sendonce; the origination
        # identity (a number, pool or sender id) is AWS's choice when none is given.
        self._extra = {
            **({"ConfigurationSetName": configuration_set} if configuration_set else {}),
            **({"OriginationIdentity": origination_identity} if origination_identity else {}),
        }
        self._clock = clock  # a message's time left is counted at the call

    def send(self, message: Message) -> str:
        try:
            response = self._client.send_text_message(
                DestinationPhoneNumber=message.to,
                MessageBody=message.body,
                MessageType="TRANSACTIONAL",
                TimeToLive=self._time_to_live(message),
                Context={CONTEXT_MESSAGE_ID: message.id},
                **self._extra,
            )
        except Exception as error:
            raise aws_errors.classify(error, self.name) from error
        provider_id = response.get("MessageId") if isinstance(response, dict) else None
        if not isinstance(provider_id, str) or not provider_id:
            # A 200 we cannot read: taken, most likely, but unproven; its events still settle it.
            raise failure(self.name, ("unreadable_answer",), "no MessageId in the answer")
        return provider_id

    def _time_to_live(self, message: Message) -> int:
        left = seconds_left(message, self._clock())
        if left is None:
            return TIME_TO_LIVE_SECONDS
        return min(max(left, MIN_TIME_TO_LIVE_SECONDS), TIME_TO_LIVE_SECONDS)
