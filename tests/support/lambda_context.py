"""The Lambda context a test hands a handler: what Lambda's runtime passes, with the time left the
test decides. A fixed `remaining_millis`, or `time_left` when the time runs out as the test goes."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

REGION = "us-east-1"


@dataclass
class FakeLambdaContext:
    function_name: str = "sendonce-ApiFunction"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "/aws/lambda/sendonce-ApiFunction"
    log_stream_name: str = "2026/01/01/[$LATEST]0123456789abcdef"
    remaining_millis: int = 15_000
    time_left: Callable[[], int] | None = None  # each reading of the time left, in ms, when given

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return self.time_left() if self.time_left is not None else self.remaining_millis


def readings(*millis: int) -> Callable[[], int]:
    """The time left as a handler reads it: one of `millis` a reading, the last one repeated."""
    left = list(millis)

    def read() -> int:
        return left.pop(0) if len(left) > 1 else left[0]

    return read
