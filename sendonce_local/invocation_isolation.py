"""One invocation per execution environment, as in Lambda, for handlers called from threads of one process.

Lambda never runs two invocations in one execution environment at once, so handler code may keep
per-invocation state in module-level singletons. The local stack keeps that true by running each
execution environment in its own process (`sendonce_local.lambda_runtime`). The integration tests
call the handlers in-process, from many threads at once, so that state must be per thread there, or
a request reads another request's event (its body, its workspace, its path parameters). Powertools'
event handler keeps:
- the current event and Lambda context as class attributes of `BaseRouter`
  (`BaseRouter.current_event = ...` in `resolve`);
- the routing context (path parameters of the matched route, among others) in a dict on the
  resolver instance.
`isolate_invocations()` makes both per thread. Everything else those singletons hold (routes,
middlewares, configuration) is set once at import and shared, as in Lambda.

This swaps a library's internals, so tests/unit/test_local_library_patches.py pins it: it fails when
the installed Powertools is not the pinned version, when the source of its event handler module
changes, or when an isolated resolver answers one thread differently from Powertools' own.
"""

from __future__ import annotations

import threading
from abc import ABCMeta
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import api_gateway


class PerThread:
    """A data descriptor whose value is per thread (and per instance, when `per_instance`)."""

    def __init__(
        self, name: str, factory: Callable[[], Any] | None = None, per_instance: bool = False
    ) -> None:
        self.name = name
        self._factory = factory
        self._per_instance = per_instance
        self._local = threading.local()

    def _values(self) -> dict[int | None, Any]:
        values: dict[int | None, Any] | None = getattr(self._local, "values", None)
        if values is None:
            values = self._local.values = {}
        return values

    def _key(self, instance: object | None) -> int | None:
        return id(instance) if self._per_instance and instance is not None else None

    def get(self, instance: object | None = None) -> Any:
        values, key = self._values(), self._key(instance)
        if key not in values:
            if self._factory is None:
                raise AttributeError(f"{self.name} is not set in this thread")
            values[key] = self._factory()
        return values[key]

    def set(self, instance: object | None, value: Any) -> None:
        self._values()[self._key(instance)] = value

    def __get__(self, instance: object | None, owner: type | None = None) -> Any:
        return self.get(instance)

    def __set__(self, instance: object, value: Any) -> None:
        self.set(instance, value)


_CURRENT_EVENT = PerThread("current_event")
_LAMBDA_CONTEXT = PerThread("lambda_context")
_ROUTING_CONTEXT = PerThread("context", factory=dict, per_instance=True)


class _PerThreadRouterMeta(ABCMeta):
    """`BaseRouter.current_event = event` (class-level) stores the event for this thread only."""

    @property
    def current_event(cls) -> Any:
        return _CURRENT_EVENT.get()

    @current_event.setter
    def current_event(cls, value: Any) -> None:
        _CURRENT_EVENT.set(None, value)

    @property
    def lambda_context(cls) -> Any:
        return _LAMBDA_CONTEXT.get()

    @lambda_context.setter
    def lambda_context(cls, value: Any) -> None:
        _LAMBDA_CONTEXT.set(None, value)


_lock = threading.Lock()


def isolate_invocations() -> None:
    """Idempotent; call before any handler runs."""
    base = api_gateway.BaseRouter
    with _lock:
        if isinstance(base, _PerThreadRouterMeta):
            return
        # Instance access (`app.current_event`) finds these in the class dict ...
        type.__setattr__(base, "current_event", _CURRENT_EVENT)
        type.__setattr__(base, "lambda_context", _LAMBDA_CONTEXT)
        type.__setattr__(api_gateway.ApiGatewayResolver, "context", _ROUTING_CONTEXT)
        # ... and class access (`BaseRouter.current_event = ...`) goes through the metaclass.
        base.__class__ = _PerThreadRouterMeta
