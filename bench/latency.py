"""Latency and AWS calls of the API paths, interleaved with the baseline in one run.

Every round builds one request of each path (replays and duplicates refer to the round before,
so their originals have completed), then runs the five in a shuffled order: a noisy neighbour
slows all of them alike, and the ratios hold. `python -m bench` runs it in several rounds,
alternating with the same paths on DynamoDB Local and with the limits off; `merged` pools a
path's rounds for its percentiles.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.call_counter import COUNTER
from bench.paths import API_PATHS, BASELINE, Request, Workload
from bench.quiet import silenced_stdout

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
PATHS = (BASELINE, *API_PATHS)
FIRST_ROUND_ORDER = (BASELINE, "send_new", "send_new_with_key")


@dataclass
class PathSamples:
    seconds: list[float] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    aws_seconds: list[float] = field(default_factory=list)  # of each request, inside its AWS calls
    operations: list[str] = field(default_factory=list)  # of the last request
    failures: int = 0
    unexpected: list[dict[str, Any]] = field(default_factory=list)  # the first few such answers


@dataclass
class LatencyRun:
    paths: dict[str, PathSamples]
    rounds: int


def _timed(handler: Handler, context: Callable[[], Any], request: Request, samples: PathSamples) -> None:
    ctx = context()
    with COUNTER.counting() as log:
        started = time.perf_counter()
        response = handler(request.event, ctx)
        elapsed = time.perf_counter() - started
    if not request.check(response):
        samples.failures += 1
        if len(samples.unexpected) < 3:
            samples.unexpected.append(
                {"statusCode": response.get("statusCode"), "body": response.get("body")}
            )
        return
    samples.seconds.append(elapsed)
    samples.calls.append(len(log))
    samples.aws_seconds.append(log.aws_seconds)
    samples.operations = log.operations()


def run_latency(
    handlers: dict[str, Handler], context: Callable[[], Any], rounds: int, warmup: int, seed: int = 5
) -> LatencyRun:
    """`handlers` maps "baseline" and "api" to their handlers."""
    shuffle = random.Random(seed)
    workload = Workload()
    measured = {path: PathSamples() for path in PATHS}
    discarded = {path: PathSamples() for path in PATHS}
    with silenced_stdout():
        for number in range(warmup + rounds):
            order = list(PATHS) if number > 0 else list(FIRST_ROUND_ORDER)
            requests = {path: workload.make(path) for path in order if path in ("replay", "duplicate")}
            requests.update({path: workload.make(path) for path in order if path not in requests})
            shuffle.shuffle(order)
            target = measured if number >= warmup else discarded
            for path in order:
                handler = handlers[BASELINE] if path == BASELINE else handlers["api"]
                _timed(handler, context, requests[path], target[path])
    return LatencyRun(paths=measured, rounds=rounds)


def merged(runs: Sequence[LatencyRun]) -> LatencyRun:
    """Every round's samples of each path, in the rounds' order (the last request's operations)."""
    paths: dict[str, PathSamples] = {}
    for run in runs:
        for path, samples in run.paths.items():
            into = paths.setdefault(path, PathSamples())
            into.seconds += samples.seconds
            into.calls += samples.calls
            into.aws_seconds += samples.aws_seconds
            into.operations = samples.operations or into.operations
            into.failures += samples.failures
            into.unexpected += samples.unexpected[: max(0, 3 - len(into.unexpected))]
    return LatencyRun(paths=paths, rounds=sum(run.rounds for run in runs))
