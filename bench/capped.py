"""Sends under a frequency cap against plain sends, in one run, on the in-process stack (issue 33).

Each round makes `PER_ROUND` plain sends (a workspace without send controls) and as many capped
sends (a second workspace, capped at `CAP` messages a recipient an hour, with quiet hours that never
hold these sends), interleaved in a shuffled order (`bench.paired`). The sends go to `RECIPIENTS`
recipients in turn, so most find earlier messages of theirs counted in the window, as a capped
recipient mostly does. A capped send's p50 over a plain send's is the median of the rounds' (kept in
`spread`). AWS calls are counted on the API function's real handler: the cap's frames are items of
the create's one transaction, so a capped send makes the calls a plain send makes. On moto, and on
DynamoDB Local when it is installed.
"""

from __future__ import annotations

import json
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sendonce.limits.model import SendControlsChange

from bench.call_counter import COUNTER
from bench.events import send_event
from bench.local_stack import API_KEY, BenchStack, engines_named, limited_workspace, on_each_engine
from bench.paired import measure_paired
from bench.quiet import silenced_stdout

PER_ROUND = 20
CAP = 1000
RECIPIENTS = 10
CAPPED_WORKSPACE = "ws_bench_capped"
CAPPED_KEY = "sk_bench_capped_key"


def _sms(number: int) -> dict[str, Any]:
    """The n-th send: to one of `RECIPIENTS`, who gather earlier messages in the window as it goes."""
    return {
        "channel": "sms",
        "to": f"+1555010{number % RECIPIENTS:04d}",
        "body": f"Your sendonce code is {number:06d}. It expires in 10 minutes. {uuid.uuid4().hex[:8]}",
    }


def _capped_workspace(stack: BenchStack) -> None:
    # Quiet hours that never contain the bench's run: the two minutes twelve hours away.
    far = datetime.now(UTC) + timedelta(hours=12)
    hours = f"{far:%H:%M}-{far + timedelta(minutes=2):%H:%M}"
    controls = SendControlsChange(
        per_recipient=CAP, per_recipient_window=3600, quiet_hours=hours, timezone="UTC"
    )
    limited_workspace(stack, CAPPED_WORKSPACE, CAPPED_KEY, controls=controls)


def _measure(stack: BenchStack, rounds: int) -> tuple[dict[str, Any], dict[str, Any]]:
    _capped_workspace(stack)
    kinds = {
        "plain": lambda number: send_event(_sms(number), API_KEY),
        "capped": lambda number: send_event(_sms(number), CAPPED_KEY),
    }
    with silenced_stdout():
        return measure_paired(stack, kinds, rounds=rounds, per_round=PER_ROUND, seed=33)


def run_capped_bench(rounds: int) -> tuple[dict[str, Any], dict[str, Any]]:
    print(
        f"send controls: {rounds} rounds of {PER_ROUND} plain and {PER_ROUND} capped sends, on "
        f"{engines_named()} ...",
        file=sys.stderr,
        flush=True,
    )
    return on_each_engine(
        lambda stack: _measure(stack, rounds), {"rounds": rounds, "per_round": PER_ROUND, "cap": CAP}
    )


def main() -> int:
    COUNTER.install()
    figures, details = run_capped_bench(rounds=int(sys.argv[1]) if len(sys.argv) > 1 else 10)
    result = {"send_controls": figures, "details": details}
    (Path(__file__).resolve().parent / "capped.json").write_text(
        json.dumps(result, indent=2) + "\n", encoding="utf-8"
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
