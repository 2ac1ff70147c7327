"""A count of changes that threads wait on: a poller sleeps until the next change, not a fixed time.

The emulator marks one after each request that may change what a poller reads (an SQS send, delete
or visibility change; a DynamoDB write, whose record lands on the table's stream). A poller takes
the count before it reads, and after an empty read waits for the count to move on from it, so a
change made while it was reading is never missed.
"""

from __future__ import annotations

import threading


class Changes:
    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._count = 0

    def mark(self) -> None:
        with self._condition:
            self._count += 1
            self._condition.notify_all()

    def seen(self) -> int:
        with self._condition:
            return self._count

    def wait_after(self, seen: int, timeout: float) -> bool:
        """Wait until a change after the count `seen`, for up to `timeout` seconds; whether one came."""
        with self._condition:
            return self._condition.wait_for(lambda: self._count != seen, max(0.0, timeout))
