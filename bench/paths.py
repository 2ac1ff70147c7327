"""The request paths the bench measures, each as a fresh API Gateway event and its expected answer."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.events import send_event
from bench.local_stack import API_KEY

API_PATHS = ("send_new", "send_new_with_key", "replay", "duplicate")
BASELINE = "baseline"


@dataclass(frozen=True)
class Request:
    event: dict[str, Any]
    check: Callable[[dict[str, Any]], bool]


def _status(expected: int, duplicate: bool, replayed: bool) -> Callable[[dict[str, Any]], bool]:
    def check(response: dict[str, Any]) -> bool:
        if response.get("statusCode") != expected:
            return False
        body = json.loads(response.get("body") or "{}")
        headers = {name.lower(): value for name, value in (response.get("headers") or {}).items()}
        is_replayed = headers.get("idempotency-replayed") == "true"
        return bool(body.get("duplicateOnly", False)) is duplicate and is_replayed is replayed

    return check


class Workload:
    """Unique messages for new sends; the previous round's sends for replays and duplicates."""

    def __init__(self) -> None:
        self._numbers = itertools.count()
        self._last_new: dict[str, Any] | None = None
        self._last_keyed: tuple[dict[str, Any], str] | None = None

    def _body(self) -> dict[str, Any]:
        n = next(self._numbers)
        return {
            "channel": "sms",
            "to": f"+1 (555) {n // 10_000 % 1000:03d}-{n % 10_000:04d}",
            "body": f"Your sendonce code is {n:06d}. It expires in 10 minutes. {uuid.uuid4().hex[:8]}",
            "metadata": {"bench": "latency"},
        }

    def baseline(self) -> Request:
        return Request(send_event(self._body(), API_KEY), _status(201, False, False))

    def send_new(self) -> Request:
        body = self._body()
        self._last_new = body
        return Request(send_event(body, API_KEY), _status(201, False, False))

    def send_new_with_key(self) -> Request:
        body, key = self._body(), f"bench-{uuid.uuid4()}"
        self._last_keyed = (body, key)
        return Request(send_event(body, API_KEY, key), _status(201, False, False))

    def replay(self) -> Request:
        assert self._last_keyed is not None, "a replay needs an earlier keyed send"
        body, key = self._last_keyed
        return Request(send_event(body, API_KEY, key), _status(201, False, True))

    def duplicate(self) -> Request:
        assert self._last_new is not None, "a duplicate needs an earlier send"
        return Request(send_event(self._last_new, API_KEY), _status(200, True, False))

    def make(self, path: str) -> Request:
        builders: dict[str, Callable[[], Request]] = {
            BASELINE: self.baseline,
            "send_new": self.send_new,
            "send_new_with_key": self.send_new_with_key,
            "replay": self.replay,
            "duplicate": self.duplicate,
        }
        return builders[path]()
