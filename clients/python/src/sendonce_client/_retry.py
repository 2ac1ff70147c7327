"""When a call is tried again, how long it waits first, and when it gives up.

Invariant: a request is sent again only when sending it again cannot do anything twice:
- it never reached the API (the connection was refused or timed out before it was sent);
- or the API said that nothing was done and asked for a retry (`409 idempotency_in_progress`,
  `429`, `503`);
- or the call is safe to repeat after its answer was lost: a read, or a send under its
  Idempotency-Key (the same key and the same bytes on every attempt, so the API replays the first
  answer instead of sending again).

Any other failure is raised at once. The waits are tenacity's jittered exponential backoff,
never shorter than the answer's `Retry-After`; the call gives up before a wait would carry it past
its deadline, and each attempt's own timeout is cut to what the deadline leaves.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import tenacity

from sendonce_client.errors import IdempotencyInProgress, TooManyRequests, Unavailable

Clock = Callable[[], float]

# Never sent: the connection did not open, or no pooled connection came free in time.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# The API did nothing and asked for a retry.
_NOTHING_DONE = (IdempotencyInProgress, TooManyRequests, Unavailable)


@dataclass(frozen=True)
class Call:
    """One API request, built once: every attempt sends these very bytes and headers."""

    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None  # the JSON body, serialised once
    idempotency_key: str | None = None
    # Repeating it after a lost answer does nothing twice: a read, or a send under its key.
    repeatable: bool = False


def may_retry(call: Call, failure: BaseException) -> bool:
    if isinstance(failure, (*_NOT_SENT, *_NOTHING_DONE)):
        return True
    # Sent, and its answer lost: a timeout while reading, a dropped connection.
    return call.repeatable and isinstance(failure, httpx.TransportError)


def asked_wait(failure: BaseException) -> float:
    """The wait the API asked for (`Retry-After`), 0 if none."""
    retry_after = getattr(failure, "retry_after", None)
    return float(retry_after) if isinstance(retry_after, int | float) else 0.0


@dataclass(frozen=True)
class RetryPolicy:
    """How a client retries. `deadline`: seconds for a whole call, its retries and waits included."""

    deadline: float = 30.0
    attempt_timeout: float = 10.0  # seconds for one attempt's connect, write and read
    wait_initial: float = 0.2
    wait_max: float = 5.0
    clock: Clock = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def __post_init__(self) -> None:
        if self.deadline <= 0 or self.attempt_timeout <= 0:
            raise ValueError("deadline and attempt_timeout must be positive")

    def timeout_left(self, ends_at: float) -> float:
        """This attempt's timeout: its own, cut to what the deadline leaves (never below 10 ms)."""
        return max(0.01, min(self.attempt_timeout, ends_at - self.clock()))

    def _options(self, call: Call, ends_at: float) -> dict[str, Any]:
        backoff = tenacity.wait_random_exponential(multiplier=self.wait_initial, max=self.wait_max)

        def wait(state: tenacity.RetryCallState) -> float:
            failure = state.outcome.exception() if state.outcome else None
            return max(backoff(state), asked_wait(failure) if failure else 0.0)

        def stop(state: tenacity.RetryCallState) -> bool:
            # Give up rather than sleep past the deadline: the next attempt would have no time left.
            return self.clock() + (state.upcoming_sleep or 0.0) >= ends_at

        return {
            "retry": tenacity.retry_if_exception(lambda failure: may_retry(call, failure)),
            "wait": wait,
            "stop": stop,
            "reraise": True,
        }

    def retrying(self, call: Call, ends_at: float) -> tenacity.Retrying:
        return tenacity.Retrying(sleep=self.sleep, **self._options(call, ends_at))

    def async_retrying(self, call: Call, ends_at: float) -> tenacity.AsyncRetrying:
        return tenacity.AsyncRetrying(sleep=self.async_sleep, **self._options(call, ends_at))
