"""bench/cost.py and bench/report.py: what a send costs, and which figures are checked against a target.

A function that takes its queue's records one after another is billed for the whole batch's time;
a provider's delivery report costs its events queue requests and its status function's share; the
cold start is checked as the layer ships, with the API's shape alone checked beside it and the
baseline imported as the functions import shown beside the baseline, and on every runtime the API
function against its shape and every other function against the baseline.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.cold_start import FROZEN_BASELINE, SHAPE_FLOOR
from bench.cost import SQS_USD_PER_MILLION_REQUESTS, LambdaUse, SendCost
from bench.report import (
    API_OVER_SHAPE_TARGET,
    COLD_START_TARGET,
    OTHER_FUNCTIONS_TARGET,
    checks,
    shipped_cold_start_rows,
)


def test_a_batch_of_records_taken_one_after_another_is_billed_for_all_of_them() -> None:
    use = LambdaUse.in_batches(memory_mb=1024, ms_per_item=20.0, batch_size=10)
    assert use.milliseconds == 200.0
    assert use.invocations_per_send == pytest.approx(0.1)
    # Each send pays a tenth of an invocation that lasts ten items: its own 20 ms of 1 GB.
    one_item = LambdaUse(1024, 20.0, 1.0)
    assert use.usd_per_send() == pytest.approx(one_item.usd_per_send() - 0.9 * 0.2 / 1_000_000)


def test_a_delivery_report_adds_its_queue_requests_and_its_status_function() -> None:
    api, dispatcher = LambdaUse(1024, 30.0), LambdaUse.in_batches(512, 20.0, 10)
    without = SendCost(wru=10, rru=2, sqs_message_bytes=100, api=api, dispatcher=dispatcher)
    status = LambdaUse.in_batches(256, 15.0, 10)
    with_report = SendCost(
        wru=14, rru=3, sqs_message_bytes=100, api=api, dispatcher=dispatcher, status=status
    )
    lines, before = with_report.lines(), without.lines()
    # The report's SendMessage, and a share of the mapping's ReceiveMessage and DeleteMessageBatch.
    assert lines["sqs"] - before["sqs"] == pytest.approx(1.2 * SQS_USD_PER_MILLION_REQUESTS)
    assert lines["lambda_status"] == pytest.approx(status.usd_per_send() * 1_000_000)
    assert before["lambda_status"] == 0.0
    assert with_report.usd_per_million() > without.usd_per_million()


def _results(api_ratio: float, floor_ratio: float) -> dict[str, Any]:
    figures = {"ms": 1.0, "ratio": 1.0, "cpu_ms": 1.0, "cpu_ratio": 1.0}
    return {
        "calls": {"send_new": 2, "send_new_with_key": 4, "replay": 1, "duplicate": 3, "dispatch": 4},
        "ratio": {"send_new_p50": 1.0, "replay_p50": 0.5, "duplicate_p99_vs_send_new_p99": 1.0},
        "cold_start_ratio": {"ApiFunction": 9.0},  # the development environment's: reported only
        "cold_start_by_runtime": {
            "deployed": "python3.13",
            "python3.13": {
                "baseline_ms": 300.0,
                "functions": {
                    "ApiFunction": {**figures, "ratio": api_ratio},
                    "StatusFunction": figures,
                },
                SHAPE_FLOOR: {**figures, "ratio": floor_ratio},
                FROZEN_BASELINE: {**figures, "ratio": 0.9},
            },
        },
    }


def test_the_cold_start_is_checked_as_the_layer_ships_with_the_api_shape_beside_it() -> None:
    found = {check.name: check for check in checks(_results(api_ratio=1.9, floor_ratio=1.7))}
    assert not any(name.startswith("cold_start_ratio.") for name in found)
    assert not found["cold_start_by_runtime[python3.13].ApiFunction"].passed
    assert found["cold_start_by_runtime[python3.13].StatusFunction"].passed
    floor = found[f"cold_start_by_runtime[python3.13].{SHAPE_FLOOR}"]
    assert (floor.value, floor.target, floor.passed) == (1.7, f"<= {COLD_START_TARGET}", False)


def test_the_baseline_imported_as_the_functions_import_is_shown_beside_the_baseline_never_checked() -> None:
    results = _results(api_ratio=1.9, floor_ratio=1.7)

    rows = shipped_cold_start_rows(results["cold_start_by_runtime"])

    assert [row[0] for row in rows[:2]] == ["baseline", FROZEN_BASELINE]
    assert rows[1][3] == 0.9
    assert not any(FROZEN_BASELINE in check.name for check in checks(results))


def _lanes(most: float | None, received: int = 40) -> dict[str, Any]:
    return {
        "delivery_function_max_concurrency": 5,
        "hanging_endpoints": 3,
        "healthy_sent_p50_s_alone": 0.2,
        "healthy_sent_p99_s_alone": 0.4,
        "healthy_sent_p50_s_with_hanging": 0.3,
        "healthy_sent_p99_s_with_hanging": most,
        "healthy_sent_max_s_with_hanging": most,
        "healthy_sent_received_with_hanging": received,
        "healthy_sent_expected": 40,
    }


@pytest.mark.parametrize(
    ("lanes", "passed"),
    [(_lanes(2.4), True), (_lanes(5.0), True), (_lanes(5.2), False), (_lanes(1.0, received=39), False)],
    ids=["well within", "at the bound", "one late", "one never arrived"],
)
def test_a_healthy_endpoint_beside_hanging_ones_is_checked_against_the_issues_5_s(
    lanes: dict[str, Any], passed: bool
) -> None:
    results = {**_results(api_ratio=1.0, floor_ratio=1.0), "webhooks": {"lanes": lanes}}

    (check,) = [c for c in checks(results) if c.name == "webhooks.lanes.healthy_sent_max_s_with_hanging"]

    assert check.passed is passed
    assert check.target == "<= 5.0"
    assert "alone 0.4" in check.value


def _by_runtime(api_ms: float, shape_ms: float, status_ratio: float) -> dict[str, Any]:
    figures = {"ms": 300.0, "ratio": 1.0, "cpu_ms": 300.0, "cpu_ratio": 1.0}
    return {
        "functions": {
            "ApiFunction": {**figures, "ms": api_ms, "ratio": api_ms / 300.0},
            "StatusFunction": {**figures, "ratio": status_ratio},
        },
        SHAPE_FLOOR: {**figures, "ms": shape_ms},
    }


def test_on_every_runtime_the_api_is_checked_against_its_shape_and_the_others_against_the_baseline() -> None:
    results = _results(api_ratio=1.0, floor_ratio=1.0)
    results["cold_start_by_runtime"] = {
        "deployed": "python3.13",
        "python3.11": _by_runtime(api_ms=440.0, shape_ms=400.0, status_ratio=1.35),
        "python3.12": _by_runtime(api_ms=441.0, shape_ms=400.0, status_ratio=1.36),
        "python3.13": {"error": "no python3.13 interpreter on this machine"},
    }

    found = {check.name: check for check in checks(results)}

    api = found[f"cold_start_by_runtime[python3.11].ApiFunction/{SHAPE_FLOOR}"]
    assert (api.value, api.target, api.passed) == (1.1, f"<= {API_OVER_SHAPE_TARGET}", True)
    assert not found[f"cold_start_by_runtime[python3.12].ApiFunction/{SHAPE_FLOOR}"].passed  # 1.103
    status = found["cold_start_by_runtime[python3.11].StatusFunction/baseline"]
    assert (status.target, status.passed) == (f"<= {OTHER_FUNCTIONS_TARGET}", True)
    assert not found["cold_start_by_runtime[python3.12].StatusFunction/baseline"].passed
    # A runtime that was not measured fails: the target holds on every runtime.
    missing = found["cold_start_by_runtime[python3.13]"]
    assert (missing.value, missing.passed) == ("no python3.13 interpreter on this machine", False)
