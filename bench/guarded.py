"""Sends under a destination rule and an sms budget against plain sends, in one run, on the
in-process stack (issue 35).

Each round makes `PER_ROUND` plain sends (a workspace without protections) and as many guarded
sends (a second workspace allowing sms to the United States only, premium numbers refused, and a
daily budget of `BUDGET` segments), interleaved in a shuffled order (`bench.paired`). A guarded
send's country and number type are told from the limits the send reads anyway, and its segments
are counted on a shard of the day's budget inside the create's one transaction: it makes the calls a
plain send makes. A guarded send's p50 over a plain send's is the median of the rounds' (kept in
`spread`). On moto, and on DynamoDB Local when it is installed.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

from sendonce.limits.model import ProtectionChange

from bench.call_counter import COUNTER
from bench.events import send_event
from bench.local_stack import API_KEY, BenchStack, engines_named, limited_workspace, on_each_engine
from bench.paired import measure_paired
from bench.quiet import silenced_stdout

PER_ROUND = 20
# A budget no run reaches: every guarded send is counted, none refused.
BUDGET = 10_000_000
GUARDED_WORKSPACE = "ws_bench_guarded"
GUARDED_KEY = "sk_bench_guarded_key"


def _sms(number: int) -> dict[str, Any]:
    """The n-th send, to a valid United States number (the rule tells its country), one segment."""
    return {
        "channel": "sms",
        "to": f"+1202555{number % 10_000:04d}",
        "body": f"Your sendonce code is {number:06d}. It expires in 10 minutes. {uuid.uuid4().hex[:8]}",
    }


def _guarded_workspace(stack: BenchStack) -> None:
    protection = ProtectionChange(
        sms_countries=("US",), allow_premium_numbers=False, daily_sms_segments=BUDGET
    )
    limited_workspace(stack, GUARDED_WORKSPACE, GUARDED_KEY, protection=protection)


def _measure(stack: BenchStack, rounds: int) -> tuple[dict[str, Any], dict[str, Any]]:
    _guarded_workspace(stack)
    kinds = {
        "plain": lambda number: send_event(_sms(number), API_KEY),
        "guarded": lambda number: send_event(_sms(number), GUARDED_KEY),
    }
    with silenced_stdout():
        return measure_paired(stack, kinds, rounds=rounds, per_round=PER_ROUND, seed=35)


def run_guarded_bench(rounds: int) -> tuple[dict[str, Any], dict[str, Any]]:
    print(
        f"protections: {rounds} rounds of {PER_ROUND} plain and {PER_ROUND} guarded sends, on "
        f"{engines_named()} ...",
        file=sys.stderr,
        flush=True,
    )
    return on_each_engine(
        lambda stack: _measure(stack, rounds), {"rounds": rounds, "per_round": PER_ROUND, "budget": BUDGET}
    )


def main() -> int:
    COUNTER.install()
    figures, details = run_guarded_bench(rounds=int(sys.argv[1]) if len(sys.argv) > 1 else 10)
    result = {"protections": figures, "details": details}
    (Path(__file__).resolve().parent / "guarded.json").write_text(
        json.dumps(result, indent=2) + "\n", encoding="utf-8"
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
