"""The API's request paths now against an earlier revision's, side by side, in the same rounds.

`python -m bench.path_compare <revision> [batches] [rounds] [seed]`: not part of `make bench`, whose
figures come from one tree; this one answers "what did this change do to a send?" on a shared,
noisy machine. One bench stack (moto's server, provisioned from this tree's template) serves two
worker processes, one per tree: each loads its own tree's API handler by file path (its `sendonce`
first on the path) beside the unprotected baseline, and runs the bench's latency rounds
(`latency.run_latency`: the five requests of a round in a shuffled order). The workers take turns,
a batch of `rounds` rounds each (one more, unmeasured, before it), in an order shuffled anew for
each pair of batches, so a slow stretch of the machine weighs on both trees alike. It prints, per
tree, each path's AWS calls and pooled p50 and p99, and the ratios that decide targets taken batch
by batch: `send_new` p50 over the baseline's, a duplicate's p99 over a new send's, and each path's
p50 now over then; their medians, and every batch's figure.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from statistics import median
from typing import Any

from bench.cold_compare import checkout, remove_tree
from bench.local_stack import ROOT, start_stack
from bench.paths import API_PATHS, BASELINE
from bench.stats import mode, percentile

WORK = ROOT / "build" / "path_compare"
PATHS = (BASELINE, *API_PATHS)

# The worker: its tree's API handler and the baseline, a batch of latency rounds per line it reads.
WORKER = """
import json, sys
from pathlib import Path
from bench.call_counter import COUNTER
COUNTER.install()
from bench.baseline import BaselineHandler
from bench.latency import run_latency
from sendonce_local.lambda_runtime import FunctionRegistry, LambdaContext
from sendonce_local.template import load_template
tree = Path(sys.argv[1])
api = FunctionRegistry(load_template(tree / "template.yaml").functions)["ApiFunction"]
handlers = {"baseline": BaselineHandler("MessagesTable", sys.argv[2]), "api": api.load()}
for line in sys.stdin:
    rounds, seed = (int(part) for part in line.split())
    run = run_latency(handlers, lambda: LambdaContext(api.spec), rounds=rounds, warmup=1, seed=seed)
    answer = {
        path: {"seconds": s.seconds, "calls": s.calls, "failures": s.failures}
        for path, s in run.paths.items()
    }
    print(json.dumps(answer), flush=True)
"""


def _worker(tree: Path, baseline_queue: str) -> subprocess.Popen[str]:
    # The tree's `sendonce` before any other; the bench and the local stack are this tree's.
    path = os.pathsep.join([str(tree / "layers" / "sendonce"), str(ROOT)])
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(tree), baseline_queue],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _batch(worker: subprocess.Popen[str], rounds: int, seed: int) -> dict[str, Any]:
    assert worker.stdin is not None
    assert worker.stdout is not None
    worker.stdin.write(f"{rounds} {seed}\n")
    worker.stdin.flush()
    line = worker.stdout.readline()
    if not line:
        raise RuntimeError("a worker stopped: its error is above")
    answer: dict[str, Any] = json.loads(line)
    return answer


def _p(seconds: list[float], q: float) -> float:
    """The `q`th percentile in milliseconds."""
    return percentile(seconds, q / 100) * 1000


def report(batches: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per tree: calls, pooled p50/p99; batch by batch: the deciding ratios, and now over then."""
    trees = list(batches)
    out: dict[str, Any] = {}
    for tree in trees:
        pooled = {p: [s for b in batches[tree] for s in b[p]["seconds"]] for p in PATHS}
        out[tree] = {
            "calls": {p: mode([c for b in batches[tree] for c in b[p]["calls"]]) for p in API_PATHS},
            "failures": sum(b[p]["failures"] for b in batches[tree] for p in PATHS),
            "p50_ms": {p: round(_p(pooled[p], 50), 2) for p in PATHS},
            "p99_ms": {p: round(_p(pooled[p], 99), 2) for p in PATHS},
            "send_new_p50_over_baseline": _rounds(
                [_p(b["send_new"]["seconds"], 50) / _p(b[BASELINE]["seconds"], 50) for b in batches[tree]]
            ),
            "duplicate_p99_over_send_new_p99": _rounds(
                [_p(b["duplicate"]["seconds"], 99) / _p(b["send_new"]["seconds"], 99) for b in batches[tree]]
            ),
        }
    now, then = trees
    out["now_over_then_p50"] = {
        p: _rounds(
            [
                _p(a[p]["seconds"], 50) / _p(b[p]["seconds"], 50)
                for a, b in zip(batches[now], batches[then], strict=True)
            ]
        )
        for p in API_PATHS
    }
    return out


def _rounds(values: list[float]) -> dict[str, Any]:
    return {"median": round(median(values), 3), "rounds": [round(v, 3) for v in values]}


def main(argv: list[str]) -> None:
    revision = argv[0]
    count = int(argv[1]) if len(argv) > 1 else 5
    rounds = int(argv[2]) if len(argv) > 2 else 60
    shuffle = random.Random(int(argv[3]) if len(argv) > 3 else 7)
    tree = checkout(revision, WORK)
    stack = start_stack()
    workers: dict[str, subprocess.Popen[str]] = {}
    try:
        baseline_queue = stack.client("sqs").create_queue(QueueName="BenchBaselineQueue")["QueueUrl"]
        workers = {"now": _worker(ROOT, baseline_queue), revision: _worker(tree, baseline_queue)}
        batches: dict[str, list[dict[str, Any]]] = {name: [] for name in workers}
        for number in range(count):
            order = list(workers)
            shuffle.shuffle(order)
            for name in order:
                print(f"batch {number + 1} of {count}: {name}", file=sys.stderr, flush=True)
                batches[name].append(_batch(workers[name], rounds, seed=number))
        print(json.dumps(report(batches), indent=2))
    finally:
        for worker in workers.values():
            worker.kill()
        stack.stop()
        remove_tree(tree)


if __name__ == "__main__":
    main(sys.argv[1:])
