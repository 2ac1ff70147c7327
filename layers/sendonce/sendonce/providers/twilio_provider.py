"""Twilio's Messages REST API as an sms provider: send a message, and ask whether it took one.

Twilio keeps no idempotency key, so a send is never repeated by itself: every failure is named as
signals for the classification table (`classification.failure`), which decides whether the next
provider may have the message. A failure before the request was fully written is `connect_failed`
(nothing can have been taken); once it was written, a lost answer is `timeout` and an answer that
cannot be read is `unreadable_answer` (either may have been taken). A 2xx is Twilio's acceptance,
and nothing read after it can undo that: its body is read for the message's sid, capped and within
the timeout; a body too large, too slow or unreadable only leaves our message id standing in.

`find` asks Twilio's message list, filtered by recipient only (its `DateSent` filter would hide a
message still queued), newest first, and matches the body (and the sender) exactly among the
messages created since the attempt began, give or take the clocks' skew. It answers None only
when it saw every message to that recipient back to that moment; whatever stops it from seeing
them all is `AmbiguousOutcome`, never None: a wrong None would send the message twice.

A message with an `expiresAt` is sent with its time left as `ValidityPeriod` (Twilio's range: 1 to
36,000 seconds); with more than that left, or no expiry, the field is left out (Twilio's default).

The standard library's client keeps it off the cold start (the `twilio` package's client costs
about 100 ms of imports, and some 60 MB of layer).
"""

from __future__ import annotations

import base64
import http.client
import json
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

from msgspec import Struct

from sendonce.clock import Clock, utc_now
from sendonce.errors import AmbiguousOutcome, DispatchFailure, ProviderUnreachable
from sendonce.messages.model import Message
from sendonce.providers import classification
from sendonce.providers.http_calls import NoRedirects, read_capped
from sendonce.providers.validity import seconds_left

PROVIDER = "twilio"
API_VERSION = "2010-04-01"
# A Messaging Service's SID: sent as MessagingServiceSid, and Twilio picks the number.
MESSAGING_SERVICE_PREFIX = "MG"
# A created message's resource is a few KiB; a page of the list holds 50 of them, bodies included.
MAX_ANSWER_BYTES = 64 * 1024
MAX_PAGE_BYTES = 2 * 1024 * 1024
MAX_SID_CHARS = 64
PAGE_SIZE = 50
# Past this many pages of messages to one recipient since the attempt, `find` cannot tell.
MAX_PAGES = 3
# Twilio's `date_created` has whole seconds, and its clock is not ours: a message created just
# before `since` by our clock may be the one. Matching needs the same body to the same recipient,
# which the dedup window already keeps from being sent twice within it.
CLOCK_SKEW = timedelta(seconds=60)
_SUCCESS = range(200, 300)
# The longest `ValidityPeriod` Twilio takes (10 hours, also its default): longer, the field is left out.
MAX_VALIDITY_PERIOD = 36_000


class TwilioCredentials(Struct, frozen=True):
    """The account SID and auth token, from the secret's JSON `{"accountSid", "authToken"}`."""

    account_sid: str
    auth_token: str

    def __repr__(self) -> str:
        return (
            f"TwilioCredentials(account_sid={self.account_sid!r})"  # the token: never in a log or traceback
        )

    @classmethod
    def parse(cls, value: str) -> TwilioCredentials:
        try:
            data = json.loads(value)
        except ValueError:
            data = None
        sid = data.get("accountSid") if isinstance(data, dict) else None
        token = data.get("authToken") if isinstance(data, dict) else None
        if not (isinstance(sid, str) and sid.strip() and isinstance(token, str) and token):
            # The value itself is never quoted: it is a secret, whatever shape it has.
            raise ProviderUnreachable(
                "provider_credentials_unavailable",
                'twilio: the credentials secret is not {"accountSid": ..., "authToken": ...}',
            )
        return cls(sid.strip(), token)

    @property
    def authorization(self) -> str:
        pair = f"{self.account_sid}:{self.auth_token}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")


class TwilioProvider:
    name = PROVIDER
    honours_idempotency_key = False

    def __init__(
        self,
        credentials: TwilioCredentials,
        *,
        base_url: str,
        sender: str,
        status_callback_url: str = "",
        timeout_seconds: float,
        visibility_seconds: float,
        opener: Any = None,
        clock: Clock = utc_now,
    ) -> None:
        self._credentials = credentials
        self._base = base_url.rstrip("/")
        self._messages_path = (
            f"/{API_VERSION}/Accounts/{quote(credentials.account_sid, safe='')}/Messages.json"
        )
        self._sender = sender.strip()
        self._status_callback_url = status_callback_url
        self._timeout = timeout_seconds
        self.visibility_seconds = visibility_seconds
        self._opener = opener or urllib.request.build_opener(NoRedirects)
        self._clock = clock  # a message's time left is counted at the call

    @property
    def _by_service(self) -> bool:
        return self._sender.startswith(MESSAGING_SERVICE_PREFIX)

    def send(self, message: Message) -> str:
        if not self._sender:
            # Nothing is sent without a sender: Twilio would refuse it as a bad request (21603),
            # which would fail the message rather than try the next provider.
            raise classification.failure(PROVIDER, ("connect_failed",), "SENDONCE_TWILIO_FROM is not set")
        form = {"To": message.to, "Body": message.body}
        form["MessagingServiceSid" if self._by_service else "From"] = self._sender
        if self._status_callback_url:
            form["StatusCallback"] = with_query(self._status_callback_url, messageId=message.id)
        left = seconds_left(message, self._clock())
        if left is not None and left <= MAX_VALIDITY_PERIOD:
            form["ValidityPeriod"] = str(left)
        request = self._request(self._messages_path, data=urlencode(form).encode("utf-8"))
        started = time.monotonic()
        try:
            response = self._opener.open(request, timeout=self._timeout)
        except urllib.error.HTTPError as error:
            raise self._refusal(error, deadline=started + self._timeout) from None
        except urllib.error.URLError as error:
            # urllib raises URLError only before the request was fully written (connecting, TLS,
            # sending): Twilio cannot have taken an incomplete request.
            raise classification.failure(PROVIDER, ("connect_failed",), f"{error.reason}") from None
        except (TimeoutError, ConnectionResetError) as error:
            # Written, then no answer in time, or the connection dropped while waiting for it.
            raise classification.failure(PROVIDER, ("timeout",), type(error).__name__) from None
        except (ValueError, OSError, http.client.HTTPException) as error:
            raise classification.failure(PROVIDER, ("unreadable_answer",), type(error).__name__) from None
        # A 2xx (urllib raises for any other status): accepted, whatever its body turns out to be.
        with response:
            answer = read_capped(response, started + self._timeout, MAX_ANSWER_BYTES)
        return _sid(_json(answer)) or message.id

    def find(self, message: Message, since: datetime) -> str | None:
        if since.tzinfo is None:
            since = since.replace(tzinfo=UTC)
        earliest = since - CLOCK_SKEW
        deadline = time.monotonic() + self._timeout  # the whole look-up, every page, in one timeout
        path = self._messages_path + "?" + urlencode({"To": message.to, "PageSize": PAGE_SIZE})
        for _ in range(MAX_PAGES):
            page = self._page(path, deadline)
            entries = page.get("messages")
            if not isinstance(entries, list):
                raise _lookup_failed("the answer holds no message list")
            reached_earlier = False
            for entry in entries:
                if not isinstance(entry, dict):
                    continue
                created = _created(entry)
                if created is not None and created < earliest:
                    reached_earlier = True  # newest first: every entry after it is older still
                    break
                if self._matches(entry, message):
                    sid = _sid(entry)
                    if sid is None:
                        raise _lookup_failed("the matching message has no sid")
                    return sid
            next_path = page.get("next_page_uri")
            if reached_earlier or not next_path:
                return None  # every message to the recipient since the attempt was seen
            if not isinstance(next_path, str) or not next_path.startswith("/") or next_path.startswith("//"):
                # Only a path on the same host: the credentials go nowhere else.
                raise _lookup_failed("the next page is not a path of the API")
            path = next_path
        raise _lookup_failed(f"more than {MAX_PAGES * PAGE_SIZE} messages to the recipient since the attempt")

    def _matches(self, entry: dict[str, Any], message: Message) -> bool:
        # The list is filtered by recipient already; a reply from the recipient is not ours.
        if entry.get("direction") == "inbound" or entry.get("body") != message.body:
            return False
        if self._by_service:
            return entry.get("messaging_service_sid") == self._sender
        return entry.get("from") == self._sender

    def _page(self, path: str, deadline: float) -> dict[str, Any]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _lookup_failed("no time left to read the message list")
        try:
            response = self._opener.open(self._request(path), timeout=remaining)
        except urllib.error.HTTPError as error:
            error.close()
            raise _lookup_failed(f"Twilio answered {error.code}") from None
        except (ValueError, OSError, http.client.HTTPException) as error:
            # URLError, timeouts and resets included: the list was not read, so nothing is known.
            raise _lookup_failed(type(error).__name__) from None
        with response:
            page = _json(read_capped(response, deadline, MAX_PAGE_BYTES))
        if not isinstance(page, dict):
            raise _lookup_failed("the message list could not be read")
        return page

    def _request(self, path: str, data: bytes | None = None) -> urllib.request.Request:
        headers = {"Authorization": self._credentials.authorization, "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        return urllib.request.Request(  # noqa: S310 (the URL is the operator's setting)
            self._base + path, data=data, method="POST" if data is not None else "GET", headers=headers
        )

    def _refusal(self, error: urllib.error.HTTPError, deadline: float) -> DispatchFailure:
        """What a non-2xx answer means: Twilio's error code first, then its status."""
        status = error.code
        with error:
            body = _json(read_capped(error, deadline, MAX_ANSWER_BYTES))
        code = body.get("code") if isinstance(body, dict) else None
        named = (f"code:{code}",) if isinstance(code, int) and not isinstance(code, bool) else ()
        # The fallback matters only for a status the table has no row for (a 1xx): an answer that
        # says nothing of the message.
        signals = (*named, *classification.status_signals(status), "unreadable_answer")
        detail = f"HTTP {status}" + (f", Twilio error {code}" if named else "")
        return classification.failure(PROVIDER, signals, detail)


def with_query(url: str, **parameters: str) -> str:
    """`url` with `parameters` added to its query (after any it has)."""
    parts = urlsplit(url)
    added = urlencode(parameters)
    return urlunsplit(parts._replace(query=f"{parts.query}&{added}" if parts.query else added))


def _lookup_failed(detail: str) -> AmbiguousOutcome:
    return AmbiguousOutcome(
        "provider_lookup_failed", f"twilio: its message list could not be read ({detail})"
    )


def _json(answer: bytes | None) -> Any:
    if not answer:
        return None
    try:
        return json.loads(answer)
    except ValueError:
        return None


def _sid(resource: Any) -> str | None:
    sid = resource.get("sid") if isinstance(resource, dict) else None
    return sid if isinstance(sid, str) and 0 < len(sid) <= MAX_SID_CHARS else None


def _created(entry: dict[str, Any]) -> datetime | None:
    """An entry's `date_created` (RFC 2822, as Twilio writes it); None when absent or unreadable,
    which keeps the entry in the running: it cannot be shown older than the attempt."""
    value = entry.get("date_created")
    if not isinstance(value, str):
        return None
    try:
        created = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return created if created.tzinfo is not None else created.replace(tzinfo=UTC)
