"""The synchronous client: `Client(api_key=..., base_url=...)`."""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import httpx

from sendonce_client import _operations as ops
from sendonce_client._retry import Call, RetryPolicy
from sendonce_client.errors import ConnectionFailed
from sendonce_client.models import (
    BatchResult,
    Erasure,
    Event,
    Message,
    PromiseDay,
    SendResult,
    SimulatedDelivery,
    Suppression,
    TimelineEntry,
    Usage,
    WebhookEndpoint,
)

T = TypeVar("T")
LOCAL_STACK = "http://127.0.0.1:3000"
USER_AGENT = "sendonce-client-python/0.1.0"


def http_options(api_key: str | None, base_url: str | None) -> dict[str, Any]:
    """The httpx client's address and headers: the key and URL as given, else `SENDONCE_API_KEY`
    and `SENDONCE_API_URL` (the local stack's address by default)."""
    key = api_key or os.environ.get("SENDONCE_API_KEY")
    if not key:
        raise ValueError("an API key is needed: api_key=..., or SENDONCE_API_KEY")
    url = (base_url or os.environ.get("SENDONCE_API_URL") or LOCAL_STACK).rstrip("/")
    return {"base_url": url, "headers": {"Authorization": f"Bearer {key}", "User-Agent": USER_AGENT}}


def request_of(call: Call, policy: RetryPolicy, ends_at: float) -> dict[str, Any]:
    """One attempt's request: the call's very bytes and key, and the time the deadline leaves it."""
    headers = {"Accept": "application/json"}
    if call.content is not None:
        headers["Content-Type"] = "application/json"
    if call.idempotency_key is not None:
        headers["Idempotency-Key"] = call.idempotency_key
    return {
        "method": call.method,
        "url": call.path,
        "params": call.params,
        "content": call.content,
        "headers": headers,
        "timeout": policy.timeout_left(ends_at),
    }


def no_answer(call: Call, attempts: int, error: httpx.TransportError) -> ConnectionFailed:
    return ConnectionFailed(
        f"{call.method} {call.path}: no answer after {attempts} attempt(s): {error!r}", call.idempotency_key
    )


class Client:
    """sendonce, synchronously. Every send carries an Idempotency-Key; every retry is safe.

    `deadline`: seconds a call may take, retries and waits included. `transport`: an httpx
    transport to send through (a mock in tests).
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        deadline: float = 30.0,
        attempt_timeout: float = 10.0,
        retry_policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.policy = retry_policy or RetryPolicy(deadline=deadline, attempt_timeout=attempt_timeout)
        self._http = httpx.Client(transport=transport, **http_options(api_key, base_url))
        self.messages = Messages(self)
        self.webhook_endpoints = WebhookEndpoints(self)
        self.events = Events(self)
        self.suppressions = Suppressions(self)
        self.erasures = Erasures(self)

    def perform(self, operation: ops.Operation[T]) -> T:
        """Run one operation under the retry policy."""
        call, ends_at, attempts = operation.call, self.policy.clock() + self.policy.deadline, 0
        try:
            for attempt in self.policy.retrying(call, ends_at):
                with attempt:
                    attempts += 1
                    response = self._http.request(**request_of(call, self.policy, ends_at))
                    answer = ops.answer_of(response, attempts)
        except httpx.TransportError as error:
            raise no_answer(call, attempts, error) from error
        return operation.read(answer)

    def test_deliveries(self, message_id: str | None = None) -> list[SimulatedDelivery]:
        """Test mode (a `sk_test_` key): what the simulator accepted, one entry per accepted call."""
        return self.perform(ops.simulated_deliveries(message_id))

    def usage(self) -> Usage:
        """The workspace's rate limit and today's quota."""
        return self.perform(ops.get_usage())

    def promise(self, days: int | None = None) -> list[PromiseDay]:
        """Per UTC day, newest first: new messages, replays, duplicates blocked, refused sends."""
        return self.perform(ops.promise_days(days))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class Messages:
    def __init__(self, client: Client) -> None:
        self._client = client

    def send(
        self,
        channel: str,
        to: str | Sequence[str],
        body: str | None = None,
        *,
        subject: str | None = None,
        send_at: datetime | str | None = None,
        metadata: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        smart_encoding: bool = False,
        cc: Sequence[str] | None = None,
        bcc: Sequence[str] | None = None,
        reply_to: str | None = None,
        html: str | None = None,
        template: str | None = None,
        template_version: int | None = None,
        data: Mapping[str, Any] | None = None,
        priority: str | None = None,
        timezone: str | None = None,
        expires_at: datetime | str | None = None,
        valid_for_seconds: int | None = None,
    ) -> SendResult:
        """Send one message. Without `idempotency_key` the client makes one for this call.

        The content is `body` (and `subject` for email), or `template` rendered with `data` (its
        latest version, or `template_version`). `smart_encoding` (sms): the server replaces
        characters that have a GSM-7 look-alike first.
        Email: `to` may be a list of addresses, with `cc`, `bcc` and `reply_to`; with `html`, `body`
        (the text part) may be left out. Send controls: `priority="critical"` bypasses the
        workspace's quiet hours and frequency cap; `timezone` is the recipient's; `expires_at` or
        `valid_for_seconds`: not handed to a provider by then, the message ends "expired"."""
        document = ops.message_body(
            channel,
            to,
            body,
            subject=subject,
            send_at=send_at,
            metadata=metadata,
            smart_encoding=smart_encoding,
            cc=cc,
            bcc=bcc,
            reply_to=reply_to,
            html=html,
            template=template,
            template_version=template_version,
            data=data,
            priority=priority,
            timezone=timezone,
            expires_at=expires_at,
            valid_for_seconds=valid_for_seconds,
        )
        return self._client.perform(ops.send(document, idempotency_key))

    def send_batch(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        validation: str = "permissive",
        idempotency_key: str | None = None,
    ) -> BatchResult:
        """Send up to 500 messages (each a `POST /v1/messages` body, `idempotencyKey` optional)."""
        return self._client.perform(ops.send_batch(messages, validation, idempotency_key))

    def get(self, message_id: str) -> Message:
        return self._client.perform(ops.get_message(message_id))

    def list(
        self,
        *,
        status: str | None = None,
        campaign_id: str | None = None,
        channel: str | None = None,
        to: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[Message]:
        """Every message of the workspace (or those the filters admit), newest first, page after page."""
        cursor: str | None = None
        while True:
            operation = ops.list_messages(
                status, page_size, cursor, campaign_id=campaign_id, channel=channel, to=to
            )
            page, cursor = self._client.perform(operation)
            yield from page
            if cursor is None:
                return

    def timeline(self, message_id: str) -> builtins.list[TimelineEntry]:
        """Everything that happened to the message, oldest first."""
        return self._client.perform(ops.message_timeline(message_id))

    def cancel(self, message_id: str) -> Message:
        return self._client.perform(ops.cancel_message(message_id))

    def edit(
        self,
        message_id: str,
        *,
        body: str | None = None,
        subject: str | None = None,
        send_at: datetime | str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Message:
        """Edit a scheduled message; what is not given stays as it is."""
        return self._client.perform(ops.edit_message(message_id, body, subject, send_at, metadata))


class WebhookEndpoints:
    def __init__(self, client: Client) -> None:
        self._client = client

    def create(
        self, url: str, *, event_types: Sequence[str] | None = None, description: str | None = None
    ) -> WebhookEndpoint:
        """Register an endpoint; its `secret` is shown here and on rotation only."""
        return self._client.perform(ops.create_endpoint(url, event_types, description))

    def list(self) -> list[WebhookEndpoint]:
        return self._client.perform(ops.list_endpoints())

    def get(self, endpoint_id: str) -> WebhookEndpoint:
        return self._client.perform(ops.get_endpoint(endpoint_id))

    def delete(self, endpoint_id: str) -> None:
        self._client.perform(ops.delete_endpoint(endpoint_id))

    def rotate_secret(self, endpoint_id: str) -> WebhookEndpoint:
        return self._client.perform(ops.rotate_endpoint_secret(endpoint_id))


class Events:
    def __init__(self, client: Client) -> None:
        self._client = client

    def list(
        self, *, message_id: str | None = None, type: str | None = None, page_size: int | None = None
    ) -> Iterator[Event]:
        """Every event, newest first, page after page."""
        cursor: str | None = None
        while True:
            page, cursor = self._client.perform(ops.list_events(message_id, type, page_size, cursor))
            yield from page
            if cursor is None:
                return

    def get(self, event_id: str) -> Event:
        return self._client.perform(ops.get_event(event_id))

    def redeliver(self, event_id: str, *, endpoint_id: str | None = None) -> None:
        self._client.perform(ops.redeliver_event(event_id, endpoint_id))


class Erasures:
    """Erasing a recipient from the workspace: their messages, events, stored answers and test
    deliveries keep no trace of them; their locks, key ties and suppression keep protecting them."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(self, to: str) -> Erasure:
        """Ask for an erasure of `to` (a phone number or an address): pending, done within a minute."""
        return self._client.perform(ops.request_erasure(to))

    def get(self, erasure_id: str) -> Erasure:
        return self._client.perform(ops.get_erasure(erasure_id))


class Suppressions:
    """The workspace's suppression list."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def add(self, channel: str, to: str) -> tuple[Suppression, bool]:
        """Put a recipient on the list: the entry, and whether this call added it."""
        return self._client.perform(ops.add_suppression(channel, to))

    def list(self, *, page_size: int | None = None) -> Iterator[Suppression]:
        """Every entry, newest first, page after page."""
        cursor: str | None = None
        while True:
            page, cursor = self._client.perform(ops.list_suppressions(page_size, cursor))
            yield from page
            if cursor is None:
                return

    def get(self, to: str) -> Suppression:
        return self._client.perform(ops.get_suppression(to))

    def remove(self, to: str) -> None:
        """Take a recipient off the list (after they opted back in): sends work again at once."""
        self._client.perform(ops.remove_suppression(to))
