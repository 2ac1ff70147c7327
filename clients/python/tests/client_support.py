"""The client against httpx's mock transport, on a clock that only its own waits move."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from sendonce_client import AsyncClient, Client, RetryPolicy

Reply = Callable[[httpx.Request], httpx.Response]


@dataclass
class FakeTime:
    now: float = 1000.0
    slept: list[float] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


@dataclass
class Api:
    """Answers each request with the next reply of its script; records what it was sent."""

    time: FakeTime
    script: list[Reply] = field(default_factory=list)
    requests: list[httpx.Request] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        if not self.script:
            raise AssertionError(f"unexpected request {request.method} {request.url}")
        return self.script.pop(0)(request)

    def then(self, *replies: Reply) -> Api:
        self.script.extend(replies)
        return self

    def client(self, deadline: float = 30.0) -> Client:
        return Client(
            "sk_test",
            "https://api.test",
            retry_policy=self.policy(deadline),
            transport=httpx.MockTransport(self),
        )

    def async_client(self, deadline: float = 30.0) -> AsyncClient:
        return AsyncClient(
            "sk_test",
            "https://api.test",
            retry_policy=self.policy(deadline),
            transport=httpx.MockTransport(self),
        )

    def policy(self, deadline: float) -> RetryPolicy:
        return RetryPolicy(
            deadline=deadline,
            attempt_timeout=10.0,
            clock=self.time.clock,
            sleep=self.time.sleep,
            async_sleep=self.time.async_sleep,
        )


MESSAGE: dict[str, Any] = {
    "id": "msg_1",
    "channel": "sms",
    "to": "+15550100000",
    "subject": None,
    "body": "hi",
    "status": "queued",
    "sendAt": None,
    "metadata": {},
    "idempotencyKey": None,
    "attempts": 0,
    "error": None,
    "createdAt": "2026-11-30T00:00:00.000Z",
    "updatedAt": "2026-11-30T00:00:00.000Z",
}


def answer(status: int, body: dict[str, Any], **headers: str) -> Reply:
    return lambda request: httpx.Response(status, json=body, headers=headers)


def created(**headers: str) -> Reply:
    return answer(
        201, {"success": True, "status": "queued", "duplicateOnly": False, "message": MESSAGE}, **headers
    )


def error(status: int, code: str, details: Any = None, **headers: str) -> Reply:
    body: dict[str, Any] = {"success": False, "error": {"code": code, "message": f"{code}!"}}
    if details is not None:
        body["error"]["details"] = details
    return answer(status, body, **headers)


def lost(time: FakeTime | None = None, after: float = 0.0) -> Reply:
    """The request reached the API; its answer never came back (the read timed out)."""

    def reply(request: httpx.Request) -> httpx.Response:
        if time is not None:
            time.now += after
        raise httpx.ReadTimeout("the answer was lost", request=request)

    return reply


def refused(request: httpx.Request) -> httpx.Response:
    """The connection never opened: the request was not sent."""
    raise httpx.ConnectError("connection refused", request=request)
