"""The asynchronous client: `AsyncClient(api_key=..., base_url=...)`, the same calls awaited.

It runs the very operations of the synchronous client (`_operations`), under the same retry
policy; only the waiting differs.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import httpx

from sendonce_client import _operations as ops
from sendonce_client._retry import RetryPolicy
from sendonce_client._sync import http_options, no_answer, request_of
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


class AsyncClient:
    """sendonce, asynchronously. Every send carries an Idempotency-Key; every retry is safe."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        deadline: float = 30.0,
        attempt_timeout: float = 10.0,
        retry_policy: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.policy = retry_policy or RetryPolicy(deadline=deadline, attempt_timeout=attempt_timeout)
        self._http = httpx.AsyncClient(transport=transport, **http_options(api_key, base_url))
        self.messages = AsyncMessages(self)
        self.webhook_endpoints = AsyncWebhookEndpoints(self)
        self.events = AsyncEvents(self)
        self.suppressions = AsyncSuppressions(self)
        self.erasures = AsyncErasures(self)

    async def perform(self, operation: ops.Operation[T]) -> T:
        """Run one operation under the retry policy."""
        call, ends_at, attempts = operation.call, self.policy.clock() + self.policy.deadline, 0
        try:
            async for attempt in self.policy.async_retrying(call, ends_at):
                with attempt:
                    attempts += 1
                    response = await self._http.request(**request_of(call, self.policy, ends_at))
                    answer = ops.answer_of(response, attempts)
        except httpx.TransportError as error:
            raise no_answer(call, attempts, error) from error
        return operation.read(answer)

    async def test_deliveries(self, message_id: str | None = None) -> list[SimulatedDelivery]:
        """Test mode (a `sk_test_` key): what the simulator accepted, one entry per accepted call."""
        return await self.perform(ops.simulated_deliveries(message_id))

    async def usage(self) -> Usage:
        return await self.perform(ops.get_usage())

    async def promise(self, days: int | None = None) -> list[PromiseDay]:
        return await self.perform(ops.promise_days(days))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()


class AsyncMessages:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def send(
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
        return await self._client.perform(ops.send(document, idempotency_key))

    async def send_batch(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        validation: str = "permissive",
        idempotency_key: str | None = None,
    ) -> BatchResult:
        return await self._client.perform(ops.send_batch(messages, validation, idempotency_key))

    async def get(self, message_id: str) -> Message:
        return await self._client.perform(ops.get_message(message_id))

    async def list(
        self,
        *,
        status: str | None = None,
        campaign_id: str | None = None,
        channel: str | None = None,
        to: str | None = None,
        page_size: int | None = None,
    ) -> AsyncIterator[Message]:
        cursor: str | None = None
        while True:
            operation = ops.list_messages(
                status, page_size, cursor, campaign_id=campaign_id, channel=channel, to=to
            )
            page, cursor = await self._client.perform(operation)
            for message in page:
                yield message
            if cursor is None:
                return

    async def timeline(self, message_id: str) -> builtins.list[TimelineEntry]:
        return await self._client.perform(ops.message_timeline(message_id))

    async def cancel(self, message_id: str) -> Message:
        return await self._client.perform(ops.cancel_message(message_id))

    async def edit(
        self,
        message_id: str,
        *,
        body: str | None = None,
        subject: str | None = None,
        send_at: datetime | str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Message:
        return await self._client.perform(ops.edit_message(message_id, body, subject, send_at, metadata))


class AsyncWebhookEndpoints:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(
        self, url: str, *, event_types: Sequence[str] | None = None, description: str | None = None
    ) -> WebhookEndpoint:
        return await self._client.perform(ops.create_endpoint(url, event_types, description))

    async def list(self) -> list[WebhookEndpoint]:
        return await self._client.perform(ops.list_endpoints())

    async def get(self, endpoint_id: str) -> WebhookEndpoint:
        return await self._client.perform(ops.get_endpoint(endpoint_id))

    async def delete(self, endpoint_id: str) -> None:
        await self._client.perform(ops.delete_endpoint(endpoint_id))

    async def rotate_secret(self, endpoint_id: str) -> WebhookEndpoint:
        return await self._client.perform(ops.rotate_endpoint_secret(endpoint_id))


class AsyncEvents:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def list(
        self, *, message_id: str | None = None, type: str | None = None, page_size: int | None = None
    ) -> AsyncIterator[Event]:
        cursor: str | None = None
        while True:
            page, cursor = await self._client.perform(ops.list_events(message_id, type, page_size, cursor))
            for event in page:
                yield event
            if cursor is None:
                return

    async def get(self, event_id: str) -> Event:
        return await self._client.perform(ops.get_event(event_id))

    async def redeliver(self, event_id: str, *, endpoint_id: str | None = None) -> None:
        await self._client.perform(ops.redeliver_event(event_id, endpoint_id))


class AsyncErasures:
    """Erasing a recipient from the workspace: their messages, events, stored answers and test
    deliveries keep no trace of them; their locks, key ties and suppression keep protecting them."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(self, to: str) -> Erasure:
        """Ask for an erasure of `to` (a phone number or an address): pending, done within a minute."""
        return await self._client.perform(ops.request_erasure(to))

    async def get(self, erasure_id: str) -> Erasure:
        return await self._client.perform(ops.get_erasure(erasure_id))


class AsyncSuppressions:
    """The workspace's suppression list."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def add(self, channel: str, to: str) -> tuple[Suppression, bool]:
        """Put a recipient on the list: the entry, and whether this call added it."""
        return await self._client.perform(ops.add_suppression(channel, to))

    async def list(self, *, page_size: int | None = None) -> AsyncIterator[Suppression]:
        """Every entry, newest first, page after page."""
        cursor: str | None = None
        while True:
            page, cursor = await self._client.perform(ops.list_suppressions(page_size, cursor))
            for entry in page:
                yield entry
            if cursor is None:
                return

    async def get(self, to: str) -> Suppression:
        return await self._client.perform(ops.get_suppression(to))

    async def remove(self, to: str) -> None:
        """Take a recipient off the list (after they opted back in): sends work again at once."""
        await self._client.perform(ops.remove_suppression(to))
