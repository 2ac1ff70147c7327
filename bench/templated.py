"""Sends from a template against plain sends, in one run, on the in-process stack (issue 30).

Each round makes `PER_ROUND` plain sends and as many sends from one sms template (new data each, so
each is a new message), interleaved in a shuffled order so a noisy neighbour slows both alike. A
templated send's p50 over a plain send's is taken round by round, and its figure is the median of
the rounds (kept in `spread`). AWS calls are counted on the API function's real handler: a warm
templated send renders the version its execution environment read before and checks it in its
create's one transaction, so it makes the calls a plain send makes. On moto, and on DynamoDB Local
when it is installed.
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

PER_ROUND = 20
TEMPLATE = {
    "name": "bench-otp",
    "channel": "sms",
    "body": "Your sendonce code is {{ code }}. It expires in {{ minutes }} minutes. {{ tag }}",
}


@dataclass
class Samples:
    seconds: list[float] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    operations: list[str] = field(default_factory=list)


def _route(body: dict[str, Any], path: str) -> dict[str, Any]:
    event = send_event(body, API_KEY)
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["routeKey"] = event["requestContext"]["routeKey"] = f"POST {path}"
    return event


def _plain(number: int) -> dict[str, Any]:
    return {
        "channel": "sms",
        "to": f"+1555{number % 10_000_000:07d}",
        "body": f"Your sendonce code is {number:06d}. It expires in 10 minutes. {uuid.uuid4().hex[:8]}",
    }


def _templated(number: int) -> dict[str, Any]:
    return {
        "channel": "sms",
        "to": f"+1555{number % 10_000_000:07d}",
        "template": {"name": TEMPLATE["name"]},
        "data": {"code": f"{number:06d}", "minutes": 10, "tag": uuid.uuid4().hex[:8]},
    }


def _measure(stack: BenchStack, rounds: int) -> tuple[dict[str, Any], dict[str, Any]]:
    api = stack.functions["ApiFunction"]
    handler, context = api.load(), LambdaContext(api.spec)
    sqs, queue = stack.client("sqs"), stack.queue_urls["SmsQueue"]
    samples = {"plain": Samples(), "templated": Samples()}
    ratios: list[float] = []
    numbers = iter(range(10**9))
    shuffle = random.Random(17)
    with silenced_stdout():
        created = handler(_route(TEMPLATE, "/v1/templates"), context)
        if created.get("statusCode") not in (201, 409):
            raise RuntimeError(f"the bench template was not created: {created}")
        for round_number in range(rounds + 1):
            measured = round_number >= 1  # the first round warms up (the renderer's worker, the copy)
            drain(sqs, queue)  # moto's SQS slows down as a queue grows; no dispatcher drains it here
            order = ["plain", "templated"] * PER_ROUND
            shuffle.shuffle(order)
            this_round: dict[str, list[float]] = {"plain": [], "templated": []}
            for kind in order:
                number = next(numbers)
                event = send_event(_plain(number) if kind == "plain" else _templated(number), API_KEY)
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
                ratios.append(percentile(this_round["templated"], 0.5) / percentile(this_round["plain"], 0.5))
    figures = {
        "plain_calls": mode(samples["plain"].calls),
        "templated_calls": mode(samples["templated"].calls),
        "plain_p50_ms": round(percentile(samples["plain"].seconds, 0.5) * 1000, 2),
        "templated_p50_ms": round(percentile(samples["templated"].seconds, 0.5) * 1000, 2),
        "templated_p50_over_plain": median_of_rounds(ratios, 3),
        "spread": {"templated_p50_over_plain": spread(ratios)},
    }
    details = {
        kind: {
            "calls_seen": sorted(set(s.calls)),
            "operation_counts": {op: s.operations.count(op) for op in sorted(set(s.operations))},
        }
        for kind, s in samples.items()
    }
    return figures, details


def run_templated_bench(rounds: int) -> tuple[dict[str, Any], dict[str, Any]]:
    print(
        f"templates: {rounds} rounds of {PER_ROUND} plain and {PER_ROUND} templated sends, on "
        f"{engines_named()} ...",
        file=sys.stderr,
        flush=True,
    )
    return on_each_engine(lambda stack: _measure(stack, rounds), {"rounds": rounds, "per_round": PER_ROUND})


def main() -> int:
    COUNTER.install()
    figures, details = run_templated_bench(rounds=int(sys.argv[1]) if len(sys.argv) > 1 else 10)
    result = {"templates": figures, "details": details}
    (Path(__file__).resolve().parent / "templated.json").write_text(
        json.dumps(result, indent=2) + "\n", encoding="utf-8"
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
