"""bench/cost.py, bench/report.py, bench/stats.py and the outbox's projection: what a send costs,
which figures are checked against a target, and how.

A function that takes its queue's records one after another is billed for the whole batch's time;
a provider's delivery report costs its events queue requests and its status function's share; a
status-webhook endpoint costs its deliveries, their queue and their function; the cold start is
checked as the layer ships, with the API's shape alone checked beside it and the baseline imported
as the functions import shown beside the baseline. A ratio that decides a target is the median of
its rounds, which the check carries. The outbox peak is checked on AWS by its projection from the
sweeper's calls and CPU (tests/unit/test_bench_outbox.py), and on the emulators for every message
handed over once. The README's cost figures are the committed run's. On every runtime the API
function is checked against its shape, and every other function against the baseline.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bench.cold_start import FROZEN_BASELINE, SHAPE_FLOOR
from bench.cost import (
    SQS_BATCH_SIZE,
    SQS_USD_PER_MILLION_REQUESTS,
    STREAM_BATCH_SIZE,
    LambdaUse,
    SendCost,
    delivery_queue_requests,
)
from bench.report import (
    API_OVER_SHAPE_TARGET,
    CALL_TARGETS,
    COLD_START_TARGET,
    OTHER_FUNCTIONS_TARGET,
    OUTBOX_LATE_TARGET_S,
    checks,
    shipped_cold_start_rows,
)
from bench.stats import in_rounds, median_of_rounds, spread

ROOT = Path(__file__).resolve().parents[2]


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


def test_the_call_targets_are_one_call_a_new_send_with_the_suppression_check_inside_it() -> None:
    assert CALL_TARGETS == {"send_new": 1, "send_new_with_key": 3, "replay": 1, "duplicate": 2, "dispatch": 3}
    results = {**_results(api_ratio=1.0, floor_ratio=1.0), "calls": dict(CALL_TARGETS, dispatch=4)}

    found = {check.name: check.passed for check in checks(results) if check.name.startswith("calls.")}

    assert found == {f"calls.{path}": path != "dispatch" for path in CALL_TARGETS}


def test_a_ratio_is_checked_as_the_median_of_its_rounds_which_the_check_carries() -> None:
    rounds = [0.8, 1.3, 0.9]
    results = {
        **_results(api_ratio=1.0, floor_ratio=1.0),
        "ratio": {
            "send_new_p50": 1.0,
            "replay_p50": 0.5,
            "duplicate_p99_vs_send_new_p99": median_of_rounds(rounds),
        },
        "ratio_dynamodb_local": {"send_new_p50": 0.7, "duplicate_p99_vs_send_new_p99": 1.2},
        "spread": {"ratio.duplicate_p99_vs_send_new_p99": spread(rounds)},
    }

    found = {check.name: check for check in checks(results)}

    duplicate = found["ratio.duplicate_p99_vs_send_new_p99"]
    assert (duplicate.value, duplicate.rounds, duplicate.passed) == (0.9, rounds, True)
    assert found["ratio.send_new_p50"].rounds is None  # no rounds kept: none shown
    # A duplicate's p99 against a new send's is checked on DynamoDB's own engine too.
    assert not found["ratio_dynamodb_local.duplicate_p99_vs_send_new_p99"].passed
    assert found["ratio_dynamodb_local.send_new_p50"].passed


def test_rounds_are_consecutive_parts_of_the_samples_and_their_spread_is_kept() -> None:
    assert in_rounds(list(range(10)), 3) == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    with pytest.raises(ValueError, match="cannot make 3 rounds"):
        in_rounds([1, 2], 3)
    assert median_of_rounds([1.31, 1.0, 2.5]) == 1.31
    assert spread([1.2345, 0.9, 1.1]) == {"rounds": [1.234, 0.9, 1.1], "min": 0.9, "max": 1.234}


def test_the_webhook_endpoints_ratio_and_the_batch_share_are_checked_with_their_rounds() -> None:
    results = {
        **_results(api_ratio=1.0, floor_ratio=1.0),
        "webhooks": {"send_new_p50_ratio_10_endpoints": 1.02},
        "batch": {
            "batch100_calls": 5,
            "batch100_share_of_singles": 0.12,
            "dynamodb-local": {"batch100_share_of_singles": 0.2},
        },
        "spread": {"batch.dynamodb-local.batch100_share_of_singles": spread([0.2, 0.19, 0.3])},
    }

    found = {check.name: check for check in checks(results)}

    assert found["webhooks.send_new_p50_ratio_10_endpoints"].passed
    assert found["batch.batch100_share_of_singles"].passed
    local = found["batch.dynamodb-local.batch100_share_of_singles"]
    assert (local.passed, local.rounds) == (False, [0.2, 0.19, 0.3])


def test_a_templated_send_is_checked_for_a_plain_sends_calls_and_its_p50_rounds() -> None:
    results = {
        **_results(api_ratio=1.0, floor_ratio=1.0),
        "templates": {
            "plain_calls": 1,
            "templated_calls": 1,
            "templated_p50_over_plain": 1.05,
            "dynamodb-local": {"plain_calls": 1, "templated_calls": 2, "templated_p50_over_plain": 1.3},
        },
        "spread": {"templates.dynamodb-local.templated_p50_over_plain": spread([1.3, 1.2, 1.4])},
    }

    found = {check.name: check for check in checks(results)}

    assert found["templates.templated_calls"].passed
    assert found["templates.templated_p50_over_plain"].passed
    assert not found["templates.dynamodb-local.templated_calls"].passed
    local = found["templates.dynamodb-local.templated_p50_over_plain"]
    assert (local.passed, local.rounds) == (False, [1.3, 1.2, 1.4])


@pytest.mark.parametrize(("per_message", "passed"), [(1.0, True), (1.03, False), (0.97, False)])
def test_a_failover_run_is_checked_for_one_delivery_per_message_its_figures_reported(
    per_message: float, passed: bool
) -> None:
    failover = {"plain_calls": 2, "failover_calls": 4, "failover_p50_over_plain": 2.2}
    results = {
        **_results(api_ratio=1.0, floor_ratio=1.0),
        "failover": {**failover, "deliveries_per_message": per_message},
    }

    (check,) = [check for check in checks(results) if check.name.startswith("failover.")]

    assert (check.name, check.passed) == ("failover.deliveries_per_message", passed)


def _peak(**figures: Any) -> dict[str, Any]:
    return {
        "messages": 1000,
        "handed_off": 1000,
        "records": 1000,
        "calls_per_message": 1.5,
        "cpu_ms_per_message": 2.5,
        "projected_aws_seconds": 30.0,
        "projected_aws_bound": "cpu",
        **figures,
    }


@pytest.mark.parametrize(
    ("peak", "handed", "projected"),
    [
        (_peak(), True, True),
        (_peak(max_late_s=184.0), True, True),  # the emulators' lateness is reported, not checked
        (_peak(records=1001), False, True),  # one handed over twice
        (_peak(handed_off=999, records=999), False, True),
        (_peak(projected_aws_seconds=61.0), True, False),
        (_peak(projected_aws_seconds=None), True, False),
    ],
    ids=["holds", "late on the emulators", "one twice", "one missing", "too slow on AWS", "no projection"],
)
def test_the_outbox_peak_is_checked_by_its_projection_and_by_every_message_once(
    peak: dict[str, Any], handed: bool, projected: bool
) -> None:
    found = {check.name: check for check in checks({**_results(1.0, 1.0), "outbox_peak": peak})}

    assert found["outbox_peak.handed_off"].passed is handed
    assert found["outbox_peak.projected_aws_seconds"].passed is projected
    assert found["outbox_peak.projected_aws_seconds"].target == f"<= {OUTBOX_LATE_TARGET_S}"
    assert not any(name == "outbox_peak.max_late_s" for name in found)


def test_an_endpoint_adds_its_deliveries_their_queue_and_its_events_telling() -> None:
    api, dispatcher = LambdaUse(512, 20.0), LambdaUse.in_batches(512, 20.0, 10)
    changes = LambdaUse.stream_share(512, 25.0, records_per_send=4)
    assert changes.milliseconds == 25.0 * STREAM_BATCH_SIZE
    assert changes.invocations_per_send == pytest.approx(4 / STREAM_BATCH_SIZE)
    without = SendCost(wru=50, rru=9, sqs_message_bytes=300, api=api, dispatcher=dispatcher, changes=changes)
    deliveries = LambdaUse.in_batches(512, 30.0, SQS_BATCH_SIZE).times(3)
    one_endpoint = SendCost(
        wru=56,
        rru=18,
        sqs_message_bytes=300,
        api=api,
        dispatcher=dispatcher,
        changes=changes,
        deliveries=deliveries,
        webhook_sqs_requests=delivery_queue_requests(queue_calls=3, deliveries=3),
    )

    lines, before = one_endpoint.lines(), without.lines()

    # Three tasks queued, and the mapping's receive and delete, a tenth of each a delivery.
    assert lines["sqs"] - before["sqs"] == pytest.approx(3.6 * SQS_USD_PER_MILLION_REQUESTS)
    assert before["lambda_message_changes"] == lines["lambda_message_changes"] > 0
    assert before["lambda_webhook_delivery"] == 0.0
    # Each of the three deliveries a tenth of an invocation of ten: 0.02 of a request and its 30 ms.
    each = 0.02 + 0.5 * 0.030 * 0.0000166667 * 1_000_000
    assert lines["lambda_webhook_delivery"] == pytest.approx(3 * each)
    assert one_endpoint.usd_per_million() > without.usd_per_million()


def _performance_section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return readme.split("\n## Performance\n", 1)[1].split("\n## ", 1)[0]


def test_the_readmes_cost_figures_are_the_committed_runs() -> None:
    results = json.loads((ROOT / "bench" / "results.json").read_text(encoding="utf-8"))
    stated = re.findall(r"\$(\d+\.\d\d)", _performance_section())

    assert f"{results['cost_usd_per_million_sends']:.2f}" in stated
    one_endpoint = results.get("cost_usd_per_million_sends_one_endpoint")
    if one_endpoint is not None:  # a run before the figure with an endpoint had none
        assert f"{one_endpoint:.2f}" in stated


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
