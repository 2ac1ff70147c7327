"""Exact counts of AWS calls, by botocore `before-call` hooks on every client that boto3 builds.

`sendonce.aws_clients.client` builds its clients through `boto3.session.Session.client`, on a
session of its own (not boto3's default one), so a hook on the default session would miss them.
Instead, `install()` wraps `boto3.session.Session.client` once: every client built afterwards gets the
hooks on its own event emitter. Only calls made inside `counting()` are recorded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3.session

ClientHook = Callable[[Any], None]


@dataclass(frozen=True)
class Call:
    service: str
    operation: str


@dataclass
class CallLog:
    calls: list[Call] = field(default_factory=list)
    attempts: int = 0  # HTTP requests sent, retries included
    aws_seconds: float = 0.0  # wall time inside the calls (from before-call to after-call)

    def __len__(self) -> int:
        return len(self.calls)

    def operations(self) -> list[str]:
        return [f"{call.service}.{call.operation}" for call in self.calls]


class CallCounter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: CallLog | None = None
        self._extra_hooks: list[ClientHook] = []
        self._installed = False

    def install(self) -> None:
        """Hook every boto3 client built from now on (idempotent)."""
        if self._installed:
            return
        original = boto3.session.Session.client
        counter = self

        def client(session: boto3.session.Session, *args: Any, **kwargs: Any) -> Any:
            built = original(session, *args, **kwargs)
            counter.hook(built)
            return built

        boto3.session.Session.client = client  # type: ignore[method-assign]
        self._installed = True

    def add_client_hook(self, hook: ClientHook) -> None:
        """Also run `hook(client)` on every client built from now on."""
        self._extra_hooks.append(hook)

    def hook(self, client: Any) -> None:
        service = client.meta.service_model.service_name
        client.meta.events.register("before-call", self._before_call(service))
        client.meta.events.register("before-send", self._before_send)
        client.meta.events.register("after-call", self._after_call)
        for extra in self._extra_hooks:
            extra(client)

    def _before_call(self, service: str) -> Callable[..., None]:
        def record(model: Any, context: dict[str, Any], **_: Any) -> None:
            with self._lock:
                if self._active is not None:
                    self._active.calls.append(Call(service, model.name))
            context["bench_started"] = time.perf_counter()

        return record

    def _before_send(self, **_: Any) -> None:
        with self._lock:
            if self._active is not None:
                self._active.attempts += 1

    def _after_call(self, context: dict[str, Any], **_: Any) -> None:
        started = context.get("bench_started")
        with self._lock:
            if self._active is not None and started is not None:
                self._active.aws_seconds += time.perf_counter() - started

    @contextmanager
    def counting(self) -> Iterator[CallLog]:
        log = CallLog()
        with self._lock:
            if self._active is not None:
                raise RuntimeError("calls are already being counted")
            self._active = log
        try:
            yield log
        finally:
            with self._lock:
                self._active = None


COUNTER = CallCounter()
