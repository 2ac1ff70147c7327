"""sendonce_local: what `sendonce run` says at start and how long it waits at its stop."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from sendonce_local.environment import Ports
from sendonce_local.event_sources import SqsPoller
from sendonce_local.template import SqsMapping, load_template

REPO = Path(__file__).resolve().parents[2]
PORTS = Ports(api=3000, aws=5000, sandbox=3001)


def test_a_poller_whose_invocations_all_run_on_waits_its_timeout_once_not_once_a_thread() -> None:
    mapping = SqsMapping("Fn", "Queue", "Queue", batch_size=10, report_batch_item_failures=True)
    poller = SqsPoller(mapping, None, None, "", threading.Event(), workers=5)  # type: ignore[arg-type]
    busy = threading.Event()
    poller._threads = [threading.Thread(target=busy.wait, daemon=True) for _ in range(5)]
    poller.start()
    try:
        started = time.monotonic()
        poller.join(0.3)
        waited = time.monotonic() - started
    finally:
        busy.set()

    assert 0.25 <= waited < 0.3 * 3  # five threads joined one after the other: 1.5 s


def test_the_banner_names_the_buckets_the_stack_made() -> None:
    from sendonce_local.stack import LocalStack  # noqa: PLC0415 - moto and the handlers

    stack = LocalStack(load_template(REPO / "template.yaml"), PORTS)

    (line,) = [line for line in stack.banner().splitlines() if line.strip().startswith("buckets")]
    assert line.split() == ["buckets", "sendonce-local-campaignsbucket"]
