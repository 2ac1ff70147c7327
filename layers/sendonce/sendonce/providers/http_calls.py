"""What every provider called over HTTP with the standard library shares: no redirect is followed,
and an answer's body is read within a deadline and a size cap, or not at all.

A 2xx is the provider's acceptance whatever its body turns out to be, so a body that is too large,
too slow or unreadable is None here, never an error that could be read as a failure to send.
"""

from __future__ import annotations

import http.client
import time
import urllib.request
from typing import Any

CHUNK_BYTES = 8 * 1024


def read_capped(response: Any, deadline: float, cap: int) -> bytes | None:
    """At most `cap` bytes of the body, read before `deadline`; None when it is longer or late."""
    body = bytearray()
    try:
        while len(body) <= cap:
            if time.monotonic() > deadline:
                return None
            chunk = response.read(CHUNK_BYTES)
            if not chunk:
                return bytes(body)
            body.extend(chunk)
    except (OSError, ValueError, http.client.HTTPException):
        return None
    return None  # over the cap: truncated, never parsed


class NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is answered as the error it is: urllib would repeat a POST as a GET elsewhere,
    and send the credentials along."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None
