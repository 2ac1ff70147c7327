"""bench/outbox_peak.py's projection: how long a peak of messages due at once takes on AWS.

From the sweeper's calls and CPU per message (measured on the emulators) and per-call latencies
assumed for AWS: the workers are bound by their round trips or by the one vCPU they share,
whichever is slower, the reads come on top, and what one sweep's time cannot take waits for the
next sweep, a minute later.
"""

from __future__ import annotations

import pytest

from bench.outbox_peak import START_SECONDS, project
from bench.report import OUTBOX_LATE_TARGET_S

MOVES = {"dynamodb.UpdateItem": 1.0, "sqs.SendMessageBatch": 0.3}
READS = {"dynamodb.Query": 256.0}


def test_the_outbox_projection_is_bound_by_the_one_vcpu_its_workers_share() -> None:
    projection = project(10_000, MOVES, READS, 0.0025, memory_mb=1769, timeout_seconds=50)

    # 2.5 ms of CPU a message on one vCPU: 400 a second; 256 reads of 10 ms one after another.
    assert projection.bound == "cpu"
    assert projection.per_second == pytest.approx(400)
    assert projection.seconds == pytest.approx(START_SECONDS + 2.56 + 25.0)
    assert projection.sweeps == 1


def test_the_outbox_projection_is_bound_by_its_calls_when_the_cpu_is_cheap() -> None:
    projection = project(10_000, MOVES, READS, 0.0001, memory_mb=1769, timeout_seconds=50)

    # A chunk: its 3 batches side by side (20 ms), then 10 moves of 10 ms and 1 ms of CPU: 121 ms.
    # 8 workers hand over 80 messages in that time.
    assert projection.bound == "calls"
    assert projection.per_second == pytest.approx(80 / 0.121)
    assert projection.inputs["chunk_seconds"] == pytest.approx(0.121)


def test_a_peak_the_budget_cannot_take_waits_for_the_next_sweep_a_minute_later() -> None:
    # At 512 MB a function has 0.29 of a vCPU: 2.5 ms of CPU take 8.6 ms.
    slow = project(10_000, MOVES, READS, 0.0025, memory_mb=512, timeout_seconds=50)

    work = 2.56 + 10_000 * 0.0025 * 1769 / 512
    assert slow.sweeps == 3  # 40 s of chunks a sweep
    assert slow.seconds == pytest.approx(2 * 60 + START_SECONDS + work - 2 * 40)
    assert slow.seconds > OUTBOX_LATE_TARGET_S
