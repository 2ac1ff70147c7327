"""side_by_side: results in the inputs' order, every call ended before a failure is raised."""

from __future__ import annotations

import threading
import time

import pytest
from sendonce.side_by_side import side_by_side


def test_given_many_inputs_then_the_results_keep_their_order() -> None:
    def slow_square(n: int) -> int:
        time.sleep(0.001 * (10 - n))  # the later inputs finish first
        return n * n

    assert side_by_side(slow_square, list(range(10))) == [n * n for n in range(10)]


def test_given_many_inputs_then_the_calls_overlap() -> None:
    barrier = threading.Barrier(4, timeout=5)

    def meet(_: int) -> bool:
        barrier.wait()  # only returns once four calls are running at once
        return True

    assert side_by_side(meet, [1, 2, 3, 4], workers=4) == [True] * 4


def test_given_one_input_then_it_runs_on_the_callers_thread() -> None:
    assert side_by_side(lambda _: threading.current_thread().name, ["only"]) == [
        threading.current_thread().name
    ]


def test_given_a_failing_call_then_it_is_raised_after_every_call_has_ended() -> None:
    ended: list[int] = []

    def call(n: int) -> int:
        if n == 0:
            raise ValueError("the first one fails")
        time.sleep(0.02)
        ended.append(n)
        return n

    with pytest.raises(ValueError, match="the first one fails"):
        side_by_side(call, [0, 1, 2, 3])
    assert sorted(ended) == [1, 2, 3]
