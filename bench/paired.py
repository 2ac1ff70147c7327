"""Two kinds of send measured side by side on the API function's real handler: each round makes
`per_round` of each, interleaved in a shuffled order so a noisy neighbour slows both alike; the
first round warms up. The second kind's p50 over the first's is taken round by round, and its figure
is the median of the rounds (kept in `spread`); AWS calls are counted on every measured send."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from bench.call_counter import COUNTER
from bench.local_stack import BenchStack, drain
from bench.probes import Invocations
from bench.stats import median_of_rounds, mode, percentile, spread
from sendonce_local.lambda_runtime import LambdaContext

# A kind's request event for its n-th send.
MakeEvent = Callable[[int], dict[str, Any]]


def measure_paired(
    stack: BenchStack,
    kinds: dict[str, MakeEvent],
    *,
    rounds: int,
    per_round: int,
    seed: int,
    before: Callable[[Any, LambdaContext], None] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`kinds`: the plain kind first, the one compared with it second. `before`: run once with the
    handler and its context, before the first round (what the second kind needs made first)."""
    (plain, other), api = list(kinds), stack.functions["ApiFunction"]
    handler, context = api.load(), LambdaContext(api.spec)
    sqs, queue = stack.client("sqs"), stack.queue_urls["SmsQueue"]
    samples = {kind: Invocations() for kind in kinds}
    ratios: list[float] = []
    numbers, shuffle = iter(range(10**9)), random.Random(seed)
    if before is not None:
        before(handler, context)
    for round_number in range(rounds + 1):
        measured = round_number >= 1
        drain(sqs, queue)  # moto's SQS slows down as a queue grows; no dispatcher drains it here
        order = [plain, other] * per_round
        shuffle.shuffle(order)
        this_round: dict[str, list[float]] = {kind: [] for kind in kinds}
        for kind in order:
            event = kinds[kind](next(numbers))
            with COUNTER.counting() as log:
                started = time.perf_counter()
                answer = handler(event, context)
                elapsed = time.perf_counter() - started
            if answer.get("statusCode") != 201:
                raise RuntimeError(f"a {kind} send was not created: {answer}")
            this_round[kind].append(elapsed)
            if measured:
                samples[kind].seconds.append(elapsed)
                samples[kind].calls.append(len(log))
                samples[kind].operations = log.operations()
        if measured:
            ratios.append(percentile(this_round[other], 0.5) / percentile(this_round[plain], 0.5))
    figures = {
        f"{plain}_calls": mode(samples[plain].calls),
        f"{other}_calls": mode(samples[other].calls),
        f"{plain}_p50_ms": round(percentile(samples[plain].seconds, 0.5) * 1000, 2),
        f"{other}_p50_ms": round(percentile(samples[other].seconds, 0.5) * 1000, 2),
        f"{other}_p50_over_{plain}": median_of_rounds(ratios, 3),
        "spread": {f"{other}_p50_over_{plain}": spread(ratios)},
    }
    details = {
        kind: {
            "calls_seen": sorted(set(s.calls)),
            "operation_counts": {op: s.operations.count(op) for op in sorted(set(s.operations))},
        }
        for kind, s in samples.items()
    }
    return figures, details
