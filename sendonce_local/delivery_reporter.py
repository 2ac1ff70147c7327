"""The sandbox reports what it delivered, as the real providers would, from a background thread.

- HTTP provider: signed webhooks to the local API's `POST /v1/webhooks/http`
  (`X-Sendonce-Signature`, with the local webhook secret the banner prints), retried on 5xx and
  connection errors like a provider retries its webhooks.
- SES: a `Delivery` event in an SNS envelope, sent to the `EventsQueue` (SES -> SNS -> SQS).
- Twilio: its status callbacks (`sent`, then `delivered`), form-encoded and signed with
  `X-Twilio-Signature` (the local auth token) as Twilio signs them, to the StatusCallback URL the
  dispatcher gave (the local API's `POST /v1/webhooks/twilio`); none when it gave none.
- SNS sms: nothing (no per-message delivery event): those messages stay `sent`.
- A STOP the sandbox receives (`POST /inbound`): the HTTP provider's `opted_out` webhook, posted
  before the sandbox answers (`report_opt_out`), retried like the others.

Each post is journaled for `GET /events` of the sandbox. `SENDONCE_SANDBOX_DELIVERY_EVENTS=false`
turns all of it off.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from sendonce.provider_events.signature import sign

from sendonce_local.delayed_tasks import DelayedTasks
from sendonce_local.deliveries import Delivery, now_rfc3339
from sendonce_local.provider_reports import Report, http_reports, opt_out_report, ses_reports, twilio_reports
from sendonce_local.twilio_sandbox import TwilioMessage, twilio_signature

log = logging.getLogger("local-stack.sandbox")

SWITCH = "SENDONCE_SANDBOX_DELIVERY_EVENTS"
MAX_TRIES = 5
RETRY_BASE_SECONDS = 0.5
POST_TIMEOUT_SECONDS = 10.0
# A post answered with one of these is retried, as a provider retries a webhook its receiver lost.
RETRIED_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


def reporting_enabled(value: str | None) -> bool:
    return (value or "true").strip().lower() not in {"false", "0", "no", "off"}


class ReportLog:
    """Every report the sandbox made, with the answer it got (`GET /events`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[dict[str, Any]] = []

    def record(
        self, provider: str, message_id: str | None, report: Report, attempt: int, answer: int | str
    ) -> None:
        entry = {
            "provider": provider,
            "messageId": message_id,
            "eventId": report.event_id,
            "type": report.type,
            "kind": report.kind,
            "attempt": attempt,
            "answer": answer,
            "at": now_rfc3339(),
        }
        with self._lock:
            self._entries.append(entry)

    def all(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(entry) for entry in self._entries]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def post_webhook(url: str, secret: str, body: dict[str, Any]) -> int:
    """POST a signed webhook; its HTTP status (raises OSError when the API is unreachable)."""
    raw = json.dumps(body, separators=(",", ":")).encode("utf-8")
    request = urllib.request.Request(  # noqa: S310 - the local API's own http:// URL
        url,
        data=raw,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "X-Sendonce-Signature": sign(secret, int(time.time()), raw),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=POST_TIMEOUT_SECONDS) as answer:  # noqa: S310
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def post_twilio_callback(url: str, auth_token: str, params: Mapping[str, str]) -> int:
    """POST a status callback as Twilio does; its HTTP status (raises OSError when unreachable)."""
    raw = urllib.parse.urlencode(sorted(params.items())).encode("utf-8")
    request = urllib.request.Request(  # noqa: S310 - the local API's own http:// URL
        url,
        data=raw,
        method="POST",
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Twilio-Signature": twilio_signature(auth_token, url, params),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=POST_TIMEOUT_SECONDS) as answer:  # noqa: S310
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


class DeliveryReporter:
    """A DeliveryLog listener: plans each delivery's reports and posts them when due."""

    def __init__(
        self,
        tasks: DelayedTasks,
        journal: ReportLog,
        *,
        webhook_url: str,
        webhook_secret: Callable[[], str],
        send_to_events_queue: Callable[[str], None],
        email_source: str,
        post: Callable[[str, str, dict[str, Any]], int] = post_webhook,
        twilio_auth_token: Callable[[], str] | None = None,
        post_twilio: Callable[[str, str, Mapping[str, str]], int] = post_twilio_callback,
    ) -> None:
        """`twilio_auth_token`: the key Twilio's callbacks are signed with (None: none are posted)."""
        self._tasks = tasks
        self._journal = journal
        self._webhook_url = webhook_url
        self._secret = webhook_secret
        self._send_to_queue = send_to_events_queue
        self._email_source = email_source
        self._post = post
        self._twilio_token = twilio_auth_token
        self._post_twilio = post_twilio
        self._lock = threading.Lock()
        self._sequence = {"http": 0, "ses": 0}
        self._twilio_sequence = 0

    def __call__(self, delivery: Delivery) -> None:
        provider, message_id = delivery.get("provider"), delivery.get("messageId")
        if provider not in self._sequence or not message_id:
            return  # SNS sms has no delivery events; a call without our id cannot be reported
        with self._lock:
            self._sequence[provider] += 1
            sequence = self._sequence[provider]
        accepted_at = datetime.now(UTC)
        if provider == "http":
            reports = http_reports(message_id, sequence, accepted_at)
        else:
            reports = ses_reports(message_id, delivery.get("to"), self._email_source, sequence, accepted_at)
        for report in reports:
            self._schedule(provider, message_id, report, 1, report.delay_seconds)

    def report_twilio(self, message: TwilioMessage) -> None:
        """Plan the status callbacks of a message the sandbox's Twilio accepted (it records the
        delivery itself, so `__call__` passes it by: the callbacks need its StatusCallback URL)."""
        if not message.status_callback or self._twilio_token is None:
            return
        with self._lock:
            self._twilio_sequence += 1
            sequence = self._twilio_sequence
        reports = twilio_reports(
            sid=message.sid,
            account_sid=message.account_sid,
            to=message.to,
            sender=message.from_,
            sequence=sequence,
        )
        for report in reports:
            self._schedule(
                "twilio", message.message_id, report, 1, report.delay_seconds, target=message.status_callback
            )

    def report_opt_out(self, to: str) -> Report:
        """The HTTP provider tells of a STOP from `to` (normalised): posted now, retried if it fails."""
        report = opt_out_report(to, datetime.now(UTC))
        self._deliver("http", None, report, 1)
        return report

    def _schedule(
        self,
        provider: str,
        message_id: str | None,
        report: Report,
        attempt: int,
        delay: float,
        *,
        target: str = "",
    ) -> None:
        """`target`: where a Twilio callback goes (the others' destinations are the reporter's)."""
        self._tasks.after(delay, lambda: self._deliver(provider, message_id, report, attempt, target))

    def _deliver(
        self, provider: str, message_id: str | None, report: Report, attempt: int, target: str = ""
    ) -> None:
        answer: int | str
        try:
            if provider == "twilio" and self._twilio_token is not None:
                answer = self._post_twilio(target, self._twilio_token(), report.body)
            elif provider == "http":
                answer = self._post(self._webhook_url, self._secret(), report.body)
            else:
                self._send_to_queue(json.dumps(report.body, separators=(",", ":")))
                answer = "queued"
        except Exception as error:  # connection refused, emulator hiccup: retried like any provider
            answer = f"error: {error}"
        self._journal.record(provider, message_id, report, attempt, answer)
        if (isinstance(answer, str) and answer.startswith("error")) or answer in RETRIED_STATUSES:
            if attempt < MAX_TRIES:
                delay = RETRY_BASE_SECONDS * 2**attempt
                self._schedule(provider, message_id, report, attempt + 1, delay, target=target)
                return
            log.warning("gave up reporting %s %s of %s: %s", report.type, report.event_id, message_id, answer)
            return
        log.info("reported %s %s (%s) of %s: %s", provider, report.type, report.kind, message_id, answer)
