"""The HTTP provider (CONTRACT section 4): POST <base>/messages, with the message id as Idempotency-Key.

Because the provider dedups on that key, a send whose answer was lost may be repeated safely.
The standard library's client keeps it off the cold start.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from typing import Any

from sendonce.errors import AmbiguousOutcome, PermanentFailure, TransientFailure
from sendonce.messages.model import Message

THROTTLED = 429


class HttpProvider:
    name = "http"
    honours_idempotency_key = True

    def __init__(self, base_url: str, token: str, timeout_seconds: float, opener: Any = None) -> None:
        self._url = base_url.rstrip("/") + "/messages"
        self._token = token
        self._timeout = timeout_seconds
        self._opener = opener or urllib.request.build_opener()

    def send(self, message: Message) -> str:
        payload = {
            "messageId": message.id,
            "channel": message.channel.value,
            "to": message.to,
            "subject": message.subject,
            "body": message.body,
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
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                answer = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            status = error.code
            if status == THROTTLED or status >= 500:
                raise TransientFailure("provider_unavailable", f"the provider answered {status}") from None
            raise PermanentFailure(
                "provider_rejected", f"the provider refused the message ({status})"
            ) from None
        except urllib.error.URLError as error:
            if isinstance(error.reason, TimeoutError | socket.timeout):
                raise AmbiguousOutcome("provider_timeout", "the provider did not answer in time") from None
            raise TransientFailure(
                "provider_unreachable", f"the provider could not be reached: {error.reason}"
            ) from None
        except (TimeoutError, ConnectionResetError):
            raise AmbiguousOutcome("provider_timeout", "the provider did not answer in time") from None
        except (ValueError, OSError) as error:
            raise AmbiguousOutcome(
                "provider_bad_answer", f"the provider's answer was unreadable: {error}"
            ) from None
        provider_id = answer.get("id") if isinstance(answer, dict) else None
        return str(provider_id) if provider_id else message.id
