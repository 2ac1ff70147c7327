"""Independent calls made side by side: one function over many inputs on a few threads.

The results come back in the inputs' order, and an exception raised by any call is raised here,
after every call has ended, so no call is left running behind its caller. One input needs no thread.
Only for calls that share nothing but thread-safe clients (boto3's are).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

In = TypeVar("In")
Out = TypeVar("Out")

# Enough to overlap the round trips of a 500-item batch (5 transactions, 50 SQS batches) without
# more threads than a Lambda of one vCPU does well with.
DEFAULT_WORKERS = 8


def side_by_side(
    call: Callable[[In], Out], inputs: Sequence[In], workers: int = DEFAULT_WORKERS
) -> list[Out]:
    if len(inputs) <= 1 or workers <= 1:
        return [call(item) for item in inputs]
    with ThreadPoolExecutor(min(workers, len(inputs)), thread_name_prefix="side-by-side") as pool:
        futures = [pool.submit(call, item) for item in inputs]
    # The pool has joined: every call has ended. The first failure, in input order, is raised.
    return [future.result() for future in futures]
