"""SQS in moto at a cost that does not grow with a queue's length on each message sent or received.

To read one attribute of a queue, moto works out all of them (`Queue.attributes`), and with them
its three ApproximateNumberOfMessages* counts: each a pass over every message of the queue that
reads the clock for each message. SendMessage does so once for each message (to learn whether
the queue dedups by content), ReceiveMessage three times for each message it returns (to read the
queue's retention period). A campaign hands thousands of messages to a queue within seconds; with
them waiting, each send and each receive of that queue cost passes over all of them, and the
local stack drained the queue at a few messages a second.

Within those two calls (`SQSBackend.send_message`, which SendMessageBatch calls for each entry, and
`SQSBackend.is_message_valid_based_on_retention_period`), the three counts read 0: neither reads
them. Everywhere else (GetQueueAttributes) they are moto's own. The emulator serialises SQS
requests, and the flag is the calling thread's own besides.

A receive still passes over the queue's messages once, asking each whether it is visible and not
delayed; each answer read the clock through two datetimes. They read `time.time()` instead: the
same epoch milliseconds (moto's clock is the system's, in UTC), a tenth of the cost.

It wraps methods and properties of moto's, so it relies on them staying as they are:
tests/unit/test_local_library_patches.py fails when their source changes.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from moto.sqs.models import Message, Queue, SQSBackend

_INSTALLED = "_sendonce_counts_skipped"
# The counts read 0 within the calls: neither reads them.
COUNTS = (
    "approximate_number_of_messages",
    "approximate_number_of_messages_delayed",
    "approximate_number_of_messages_not_visible",
)
CALLS = ("send_message", "is_message_valid_based_on_retention_period")
# moto's own, kept for the tests (this module is imported before `install` runs).
ORIGINAL: dict[str, Any] = {
    **{f"Queue.{name}": getattr(Queue, name) for name in COUNTS},
    **{f"SQSBackend.{name}": getattr(SQSBackend, name) for name in CALLS},
    "Message.visible": Message.visible,
    "Message.delayed": Message.delayed,
}

_skipping = threading.local()


def skipping_counts() -> bool:
    """Whether this thread is within one of CALLS."""
    return bool(getattr(_skipping, "depth", 0))


def _count(original: property) -> property:
    def count(queue: Queue) -> int:
        if skipping_counts():
            return 0
        value: int = original.fget(queue)  # type: ignore[misc]
        return value

    return property(count)


def _without_counts(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        _skipping.depth = getattr(_skipping, "depth", 0) + 1
        try:
            return original(*args, **kwargs)
        finally:
            _skipping.depth -= 1

    return call


def _visible(message: Message) -> bool:
    return bool(time.time() * 1000 > message.visible_at)


def _delayed(message: Message) -> bool:
    return bool(time.time() * 1000 < message.delayed_until)


def install() -> None:
    """Idempotent: the emulator installs it, and a process may start several emulators."""
    if getattr(Queue, _INSTALLED, False):
        return
    for name in COUNTS:
        setattr(Queue, name, _count(ORIGINAL[f"Queue.{name}"]))
    for name in CALLS:
        setattr(SQSBackend, name, _without_counts(ORIGINAL[f"SQSBackend.{name}"]))
    Message.visible = property(_visible)  # type: ignore[method-assign,assignment]
    Message.delayed = property(_delayed)  # type: ignore[method-assign,assignment]
    setattr(Queue, _INSTALLED, True)
