"""sendonce_local: each execution environment runs one invocation at a time, and a function scales out.

The handlers below keep per-invocation state in a module global, as Powertools' resolver does:
only environments that never run two invocations at once keep it from leaking between requests.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from sendonce_local.lambda_runtime import HandlerError, LocalFunction
from sendonce_local.template import FunctionSpec

HANDLER = """
import os, time

CURRENT = None  # what a module-level singleton holds for the invocation it runs


def handler(event, context):
    global CURRENT
    if event.get("raise"):
        raise ValueError("asked to fail")
    if event.get("die"):
        os._exit(3)
    CURRENT = event["n"]
    started = time.monotonic()
    time.sleep(event.get("sleep", 0.05))
    return {"n": CURRENT, "pid": os.getpid(), "started": started, "ended": time.monotonic(),
            "function": context.function_name, "left_ms": context.get_remaining_time_in_millis()}
"""


def _function(tmp_path: Path, source: str = HANDLER, max_environments: int = 4) -> LocalFunction:
    (tmp_path / "app.py").write_text(source)
    spec = FunctionSpec("Probe", tmp_path, "app.handler", timeout_seconds=30, memory_mb=128, environment={})
    return LocalFunction(spec, max_environments=max_environments)


@pytest.fixture
def function(tmp_path: Path) -> Any:
    local = _function(tmp_path)
    yield local
    local.stop()


def test_concurrent_invocations_each_see_their_own_state_in_environments_that_never_overlap(
    function: LocalFunction,
) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda n: function.invoke({"n": n}), range(24)))

    assert [answer["n"] for answer in answers] == list(range(24))
    assert {answer["function"] for answer in answers} == {"Probe"}
    assert all(0 < answer["left_ms"] <= 30_000 for answer in answers)
    by_environment: dict[int, list[tuple[float, float]]] = {}
    for answer in answers:
        by_environment.setdefault(answer["pid"], []).append((answer["started"], answer["ended"]))
    assert 1 < len(by_environment) <= 4  # scaled out, up to the function's limit
    for runs in by_environment.values():
        runs.sort()
        assert all(ended <= next_started for (_, ended), (next_started, _) in itertools.pairwise(runs))


def test_a_warm_environment_is_reused(function: LocalFunction) -> None:
    function.warm()
    first = function.invoke({"n": 1, "sleep": 0})
    second = function.invoke({"n": 2, "sleep": 0})

    assert first["pid"] == second["pid"]
    assert function.environments == 1


def test_a_handler_exception_propagates_with_its_type_name_and_the_environment_lives_on(
    function: LocalFunction,
) -> None:
    before = function.invoke({"n": 0, "sleep": 0})["pid"]

    with pytest.raises(HandlerError) as raised:
        function.invoke({"raise": True})

    assert type(raised.value).__name__ == "ValueError"
    assert "asked to fail" in str(raised.value)
    assert function.invoke({"n": 1, "sleep": 0})["pid"] == before


def test_an_environment_that_dies_is_replaced(function: LocalFunction) -> None:
    before = function.invoke({"n": 0, "sleep": 0})["pid"]

    with pytest.raises(EOFError):
        function.invoke({"die": True})

    assert function.environments == 0
    assert function.invoke({"n": 1, "sleep": 0})["pid"] != before


def test_a_handler_that_cannot_load_fails_its_first_invocation_and_holds_no_environment(
    tmp_path: Path,
) -> None:
    broken = _function(tmp_path, "raise RuntimeError('bad import')\n")

    with pytest.raises(HandlerError, match="bad import"):
        broken.warm()
    assert broken.environments == 0


def test_beyond_its_limit_an_invocation_waits_for_an_idle_environment(tmp_path: Path) -> None:
    limited = _function(tmp_path, max_environments=2)
    try:
        barrier = threading.Barrier(6)

        def call(n: int) -> dict[str, Any]:
            barrier.wait()
            answer: dict[str, Any] = limited.invoke({"n": n, "sleep": 0.1})
            return answer

        with ThreadPoolExecutor(max_workers=6) as pool:
            answers = list(pool.map(call, range(6)))

        assert [answer["n"] for answer in answers] == list(range(6))
        assert len({answer["pid"] for answer in answers}) <= 2
        assert limited.environments <= 2
    finally:
        limited.stop()
