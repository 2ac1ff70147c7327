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
import sys
import uuid
from pathlib import Path
from typing import Any

from bench.call_counter import COUNTER
from bench.events import send_event
from bench.local_stack import API_KEY, BenchStack, engines_named, on_each_engine
from bench.paired import measure_paired
from bench.quiet import silenced_stdout
from sendonce_local.lambda_runtime import LambdaContext

PER_ROUND = 20
TEMPLATE = {
    "name": "bench-otp",
    "channel": "sms",
    "body": "Your sendonce code is {{ code }}. It expires in {{ minutes }} minutes. {{ tag }}",
}


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


def _create_template(handler: Any, context: LambdaContext) -> None:
    with silenced_stdout():
        created = handler(_route(TEMPLATE, "/v1/templates"), context)
    if created.get("statusCode") not in (201, 409):
        raise RuntimeError(f"the bench template was not created: {created}")


def _measure(stack: BenchStack, rounds: int) -> tuple[dict[str, Any], dict[str, Any]]:
    kinds = {
        "plain": lambda number: send_event(_plain(number), API_KEY),
        "templated": lambda number: send_event(_templated(number), API_KEY),
    }
    with silenced_stdout():  # the first round also warms up the renderer's worker and the copy
        return measure_paired(
            stack, kinds, rounds=rounds, per_round=PER_ROUND, seed=17, before=_create_template
        )


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
