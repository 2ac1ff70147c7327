"""The HTTP provider (README, "Delivery", its protocol): POST <base>/messages, with the message id as
Idempotency-Key.

Because the provider dedups on that key, a send whose answer was lost may be repeated safely. What
each failure means is `classification`'s table's to say.
A 2xx is the provider's acceptance, and nothing read after it can undo that: its body is read for
the provider's id, at most `MAX_ANSWER_BYTES` of it and within the timeout; a body too large,
too slow or unreadable only leaves the message id standing in for the provider's.
A message with an `expiresAt` carries it (RFC 3339): the provider must not deliver it after then.
The standard library's client keeps it off the cold start.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request
from typing import Any

from sendonce.clock import rfc3339
from sendonce.messages.model import Message
from sendonce.providers.classification import failure, status_signals
from sendonce.providers.http_calls import NoRedirects, read_capped

# The answer is `{"id": ...}`: anything longer is not worth the dispatcher's memory or time.
MAX_ANSWER_BYTES = 64 * 1024
MAX_PROVIDER_ID_CHARS = 256


class HttpProvider:
    name = "http"
    honours_idempotency_key = True

    def __init__(self, base_url: str, token: str, timeout_seconds: float, opener: Any = None) -> None:
        self._url = base_url.rstrip("/") + "/messages"
        self._token = token
        self._timeout = timeout_seconds
        self._opener = opener or urllib.request.build_opener(NoRedirects)

    def send(self, message: Message) -> str:
        payload: dict[str, Any] = {
            "messageId": message.id,
            "channel": message.channel.value,
            # An email's list when the send gave one (its recipients left), as the message shows it.
            "to": message.to if message.to_list is None else list(message.to_list),
            "subject": message.subject,
            "body": message.body,
            # An email's other fields, only when it has them: a message without them is sent as before.
            **message.email_fields(),
            # Its end of validity, only when it has one.
            **({"expiresAt": rfc3339(message.expires_at)} if message.expires_at is not None else {}),
        }
        request = urllib.request.Request(  # noqa: S310 (the URL is the operator's setting)
            self._url,
            data=json.dumps(payload).encode("utf-8"),
            method="POST",
            headers={
                "Authorization": f"Bearer {self._token}",
                "Content-Type": "application/json",
                "Idempotency-Key": message.id,
            },
        )
        started = time.monotonic()
        try:
            response = self._opener.open(request, timeout=self._timeout)
        except urllib.error.HTTPError as error:
            error.close()
            raise failure(
                self.name, status_signals(error.code), f"the provider answered {error.code}"
            ) from None
        except urllib.error.URLError as error:
            # Raised while connecting or sending: the request never reached the provider whole.
            timed_out = isinstance(error.reason, TimeoutError | socket.timeout)
            raise failure(
                self.name,
                ("timeout" if timed_out else "connect_failed",),
                f"the provider could not be reached: {error.reason}",
            ) from None
        except (TimeoutError, ConnectionResetError):
            raise failure(self.name, ("timeout",), "the provider did not answer in time") from None
        except (ValueError, OSError, http.client.HTTPException) as error:
            raise failure(
                self.name, ("unreadable_answer",), f"the provider's answer was unreadable: {error}"
            ) from None
        # A 2xx (urllib raises for any other status): accepted, whatever its body turns out to be.
        with response:
            answer = read_capped(response, started + self._timeout, MAX_ANSWER_BYTES)
        provider_id = _provider_id(answer)
        return provider_id or message.id


def _provider_id(answer: bytes | None) -> str | None:
    if not answer:
        return None
    try:
        parsed = json.loads(answer)
    except ValueError:
        return None
    provider_id = parsed.get("id") if isinstance(parsed, dict) else None
    if isinstance(provider_id, bool) or not isinstance(provider_id, str | int):
        return None
    text = str(provider_id)
    return text if 0 < len(text) <= MAX_PROVIDER_ID_CHARS else None
