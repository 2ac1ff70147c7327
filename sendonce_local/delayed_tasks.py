"""One background thread that runs small tasks at a given time (a heap, not a Timer per task)."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("local-stack.sandbox")

Task = Callable[[], None]


class DelayedTasks:
    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._heap: list[tuple[float, int, Task]] = []
        self._order = itertools.count()
        self._condition = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, join_seconds: float = 3.0) -> None:
        with self._condition:
            self._stopped = True
            self._condition.notify_all()
        if self._thread.is_alive():
            self._thread.join(join_seconds)

    def after(self, delay_seconds: float, task: Task) -> None:
        with self._condition:
            heapq.heappush(self._heap, (self._clock() + delay_seconds, next(self._order), task))
            self._condition.notify_all()

    def pending(self) -> int:
        with self._condition:
            return len(self._heap)

    def run_due(self) -> int:
        """Run every task that is due now, in time order (the worker's step; also for tests)."""
        ran = 0
        while True:
            with self._condition:
                if not self._heap or self._heap[0][0] > self._clock():
                    return ran
                _, _, task = heapq.heappop(self._heap)
            try:
                task()
            except Exception:
                log.exception("a delayed sandbox task failed")
            ran += 1

    def _run(self) -> None:
        while True:
            with self._condition:
                if self._stopped:
                    return
                wait = self._heap[0][0] - self._clock() if self._heap else None
                if wait is None or wait > 0:
                    self._condition.wait(wait)
                    continue
            self.run_due()
