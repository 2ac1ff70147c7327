"""Composition roots: each function's dependencies, built once from its settings, in one object.

A function has one `Root`, in its entry point (`sendonce.entrypoints`), whose build function reads
the settings and gets its clients from `sendonce.aws_clients`. `get()` builds its object on first
use, so a cold start pays only for what the first request needs, and keeps it for the life of the
execution environment, as Lambda keeps module state. Tests replace the object with `use(...)`, one
call, and `reset_all()` forgets every root, as a redeploy with new settings would.

A root may be declared where its users read it and given its build function by its entry point
(`build_with`): the API's handlers read theirs from `sendonce.api.dependencies`, which composes
nothing, and the API function's entry point alone says how it is built.

Built on a first request, a root is built after Lambda SnapStart resumed its environment from a
snapshot (taken after the imports): nothing built there is shared between resumed environments.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

_ROOTS: list[Root[Any]] = []


class Root(Generic[T]):
    def __init__(self, build: Callable[[], T] | None = None) -> None:
        self._build = build
        self._value: T | None = None
        self._lock = threading.Lock()
        _ROOTS.append(self)

    def get(self) -> T:
        value = self._value
        if value is None:
            with self._lock:  # concurrent first requests (locally, threads) build it once
                if self._value is None:
                    # Environments resumed from one snapshot would share its `random` sequence
                    # (retry jitter, quota shards): each draws its own from the OS first.
                    random.seed()
                    if self._build is None:
                        raise LookupError("this root has no build function: its entry point gives it")
                    self._value = self._build()
                value = self._value
        return value

    def build_with(self, build: Callable[[], T]) -> Root[T]:
        """Build with `build` from now on (the entry point's, given when it is imported)."""
        self._build = build
        return self

    def use(self, value: T) -> None:
        self._value = value

    def reset(self) -> None:
        self._value = None


def reset_all() -> None:
    for root in _ROOTS:
        root.reset()


def on_first_call(build: Callable[[], F]) -> F:
    """Stands for the callable `build()` returns, which it builds (once, whichever thread calls
    first) on its first call: what a function's first request may never need (a batch's sender,
    and the modules it imports) stays off its cold start."""
    built: list[F] = []
    lock = threading.Lock()

    def call(*args: Any, **kwargs: Any) -> Any:
        if not built:
            with lock:
                if not built:
                    built.append(build())
        return built[0](*args, **kwargs)

    return cast(F, call)
