"""Batches: a 100-item batch of new messages against 100 single sends, in one run, on the in-process stack.

Rounds alternate in a shuffled order between one batch of 100 new messages and 100 single sends
of 100 other new messages (the same shape of message), so a noisy neighbour slows both alike.
The batch's share of the singles is taken round by round, and its figure is the median of the
rounds (kept in `spread`). AWS calls are counted on the API function's real handler. A 500-item
batch is measured once per round too, for its calls and latency.
"""

from __future__ import annotations

import json
import random
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.call_counter import COUNTER
from bench.events import send_event
from bench.local_stack import API_KEY, BenchStack, drain, engines_named, on_each_engine
from bench.quiet import silenced_stdout
from bench.stats import median_of_rounds, mode, percentile, spread
from sendonce_local.lambda_runtime import LambdaContext

SIZES = (100, 500)


@dataclass
class Samples:
    seconds: list[float] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    operations: list[str] = field(default_factory=list)


def _item(number: int) -> dict[str, Any]:
    return {
        "channel": "sms",
        "to": f"+1555{number % 10_000_000:07d}",
        "body": f"Your sendonce code is {number:06d}. {uuid.uuid4().hex[:8]}",
        "metadata": {"bench": "batch"},
    }


def _batch_event(items: list[dict[str, Any]]) -> dict[str, Any]:
    event = send_event({"messages": items}, API_KEY)
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/v1/messages/batch"
    event["routeKey"] = event["requestContext"]["routeKey"] = "POST /v1/messages/batch"
    return event


def _created(answer: dict[str, Any], size: int) -> bool:
    if answer.get("statusCode") != 200:
        return False
    results = json.loads(answer["body"])["results"]
    return len(results) == size and all(result["status"] == 201 for result in results)


def _measure(stack: BenchStack, rounds: int) -> tuple[dict[str, Any], dict[str, Any]]:
    batches = {size: Samples() for size in SIZES}
    singles = Samples()  # the time of 100 single sends, one sample a round
    shares: list[float] = []  # each round's 100-item batch over its 100 single sends
    numbers = iter(range(10**9))
    api = stack.functions["ApiFunction"]
    handler, context = api.load(), LambdaContext(api.spec)
    sqs, queue = stack.client("sqs"), stack.queue_urls["SmsQueue"]
    shuffle = random.Random(13)
    with silenced_stdout():
        for round_number in range(rounds + 2):
            measured = round_number >= 2  # the first two rounds warm up
            steps = ["batch100", "singles", "batch500"]
            shuffle.shuffle(steps)
            this_round: dict[str, float] = {}
            for step in steps:
                # moto's SQS slows down as a queue grows, and no dispatcher drains it here: start each
                # step empty (PurgeQueue is allowed once a minute).
                drain(sqs, queue)
                if step == "singles":
                    events = [send_event(_item(next(numbers)), API_KEY) for _ in range(100)]
                    started = time.perf_counter()
                    for event in events:
                        answer = handler(event, context)
                        if answer.get("statusCode") != 201:
                            raise RuntimeError(f"a single send failed: {answer}")
                    this_round["singles"] = time.perf_counter() - started
                    if measured:
                        singles.seconds.append(this_round["singles"])
                    continue
                size = 100 if step == "batch100" else 500
                event = _batch_event([_item(next(numbers)) for _ in range(size)])
                with COUNTER.counting() as log:
                    started = time.perf_counter()
                    answer = handler(event, context)
                    elapsed = time.perf_counter() - started
                if not _created(answer, size):
                    raise RuntimeError(f"the {size}-item batch did not create every message: {answer}")
                this_round[step] = elapsed
                if measured:
                    batches[size].seconds.append(elapsed)
                    batches[size].calls.append(len(log))
                    batches[size].operations = log.operations()
            if measured:
                shares.append(this_round["batch100"] / this_round["singles"])
    p50 = {size: percentile(samples.seconds, 0.5) for size, samples in batches.items()}
    singles_p50 = percentile(singles.seconds, 0.5)
    figures = {
        "batch100_calls": mode(batches[100].calls),
        "batch100_p50_ms": round(p50[100] * 1000, 1),
        "singles100_p50_ms": round(singles_p50 * 1000, 1),
        "batch100_share_of_singles": median_of_rounds(shares, 3),
        "batch500_calls": mode(batches[500].calls),
        "batch500_p50_ms": round(p50[500] * 1000, 1),
        "spread": {"batch100_share_of_singles": spread(shares)},
    }
    details = {
        "batch100_operation_counts": {
            op: batches[100].operations.count(op) for op in sorted(set(batches[100].operations))
        },
        "batch500_operation_counts": {
            op: batches[500].operations.count(op) for op in sorted(set(batches[500].operations))
        },
        "calls_seen": {size: sorted(set(samples.calls)) for size, samples in batches.items()},
    }
    return figures, details


def run_batch_bench(rounds: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The batch figures on moto, and the same rounds with the tables on DynamoDB Local when it is
    installed: moto's cost grows with a transaction's items far faster than DynamoDB's does, so the
    share a batch takes of 100 single sends is known on AWS's own engine too (SQS stays on moto)."""
    print(
        f"batch: {rounds} rounds of a 100-item batch against 100 single sends, on {engines_named()} ...",
        file=sys.stderr,
        flush=True,
    )
    return on_each_engine(lambda stack: _measure(stack, rounds), {"rounds": rounds})


def main() -> int:
    COUNTER.install()
    figures, details = run_batch_bench(rounds=int(sys.argv[1]) if len(sys.argv) > 1 else 10)
    result = {"batch": figures, "details": details}
    (Path(__file__).resolve().parent / "batch.json").write_text(
        json.dumps(result, indent=2) + "\n", encoding="utf-8"
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
