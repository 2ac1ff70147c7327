"""bench/campaigns.py and its checks in bench/report.py: what the campaign run checks, and how.

The fan-out's calls a recipient are checked against a plain send's calls a send plus 0.2, and
"every recipient exactly once" holds only when the campaign completed, its messages are as many as
its list's recipients, each once and none missing, and its counts agree with them. A figure that is
missing (a failed run) fails its check; with several runs, a figure is the runs' median and the
exactly-once check holds only if it held in every run.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.campaigns import (
    _median_of_runs,
    api_event,
    exactly_once,
    family,
    recipient,
    recipients_file,
)
from bench.report import CAMPAIGN_CALLS_BEYOND_PLAIN_TARGET, campaign_checks, checks


def _figures(beyond: float | None = 0.05, once: bool | None = True, **extra: Any) -> dict[str, Any]:
    return {
        "recipients": 100_000,
        "status": "completed",
        "fanout_calls_per_recipient": 1.07 if beyond is None else round(1.02 + beyond, 4),
        "plain_calls_per_send": 1.02,
        "calls_beyond_plain_per_recipient": beyond,
        "messages": 100_000,
        "distinct_recipients": 100_000,
        "every_recipient_once": once,
        **extra,
    }


def _results(campaigns: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "calls": {"send_new": 1, "send_new_with_key": 3, "replay": 1, "duplicate": 2, "dispatch": 3},
        "ratio": {"send_new_p50": 1.0, "replay_p50": 0.5, "duplicate_p99_vs_send_new_p99": 1.0},
        "campaigns": campaigns,
    }


@pytest.mark.parametrize(
    ("beyond", "passed"),
    [(-0.9, True), (0.05, True), (CAMPAIGN_CALLS_BEYOND_PLAIN_TARGET, True), (0.21, False), (None, False)],
    ids=["fewer than a plain send", "within", "at the bound", "over", "missing"],
)
def test_the_calls_beyond_a_plain_send_are_checked_against_the_issues_0_2(beyond: Any, passed: bool) -> None:
    (check,) = [
        c for c in campaign_checks(_figures(beyond)) if c.name.endswith("calls_beyond_plain_per_recipient")
    ]

    assert check.passed is passed
    assert check.target == "<= 0.2"
    assert "a plain send 1.02" in check.value


@pytest.mark.parametrize(("once", "passed"), [(True, True), (False, False), (None, False)])
def test_every_recipient_once_holds_only_when_the_run_says_true(once: Any, passed: bool) -> None:
    (check,) = [c for c in campaign_checks(_figures(once=once)) if c.name == "campaigns.every_recipient_once"]

    assert check.passed is passed
    assert "100000 messages to 100000 recipients of 100000" in check.value


def test_the_campaign_checks_are_among_the_bench_checks_on_each_engine_it_ran_on() -> None:
    figures = {**_figures(), "dynamodb-local": _figures(beyond=0.3)}

    found = {c.name: c.passed for c in checks(_results(figures)) if c.name.startswith("campaigns.")}

    assert found == {
        "campaigns.calls_beyond_plain_per_recipient": True,
        "campaigns.every_recipient_once": True,
        "campaigns.dynamodb-local.calls_beyond_plain_per_recipient": False,
        "campaigns.dynamodb-local.every_recipient_once": True,
    }


def test_a_failed_campaign_run_fails_both_checks_and_a_skipped_one_has_none() -> None:
    failed = {c.name: c.passed for c in checks(_results({"error": "RuntimeError('boom')"}))}
    skipped = [c.name for c in checks(_results(None)) if c.name.startswith("campaigns.")]

    assert failed["campaigns.calls_beyond_plain_per_recipient"] is False
    assert failed["campaigns.every_recipient_once"] is False
    assert skipped == []


def _sent(count: int) -> list[str]:
    return [recipient(number) for number in range(count)]


def _counts(total: int, accepted: int, **others: int) -> dict[str, int]:
    return {"total": total, "accepted": accepted, "duplicates": 0, "suppressed": 0, "invalid": 0, **others}


def test_a_completed_campaign_with_one_message_each_and_agreeing_counts_holds() -> None:
    once = exactly_once(_sent(1000), _sent(1000), _counts(1000, 1000), "completed")

    assert once == {
        "messages": 1000,
        "distinct_recipients": 1000,
        "missing": 0,
        "unlisted": 0,
        "repeated": 0,
        "counts_consistent": True,
        "every_recipient_once": True,
    }


@pytest.mark.parametrize(
    ("sent", "counts", "status", "broken"),
    [
        (_sent(999), _counts(1000, 999, invalid=1), "completed", "missing"),
        ([*_sent(1000), recipient(7)], _counts(1000, 1000), "completed", "repeated"),
        ([*_sent(999), "+15559999999"], _counts(1000, 1000), "completed", "unlisted"),
        (_sent(1000), _counts(1000, 999, duplicates=1), "completed", "counts_consistent"),
        (_sent(1000), _counts(1000, 1000, invalid=1), "completed", "counts_consistent"),
        (_sent(1000), _counts(1000, 1000), "sending", "every_recipient_once"),
    ],
    ids=[
        "one recipient without a message",
        "one recipient twice",
        "a message to someone not on the list",
        "counts short of the messages",
        "counts over the total",
        "not completed",
    ],
)
def test_anything_short_of_exactly_once_fails(
    sent: list[str], counts: dict[str, int], status: str, broken: str
) -> None:
    once = exactly_once(_sent(1000), sent, counts, status)

    assert once["every_recipient_once"] is False
    assert once[broken] is False or once[broken] >= 1


def test_the_list_holds_distinct_recipients_one_json_object_a_line() -> None:
    lines = recipients_file(3, first=10).splitlines()

    assert [json.loads(line)["to"] for line in lines] == [recipient(n) for n in (10, 11, 12)]
    assert [json.loads(line)["metadata"]["line"] for line in lines] == ["1", "2", "3"]
    assert len(set(_sent(100_000))) == 100_000


def test_a_partition_key_is_named_by_its_family() -> None:
    campaign = "cmp_01KBGZ2Y4JZ3N8X7V6Q5R4T3S2"

    assert family(f"RATE#campaign:{campaign}#882341#17", campaign) == "RATE#campaign:<campaign>#<n>#<n>"
    assert family(f"ws_bench#{campaign}#12", campaign) == "<ws>#<campaign>#<n>"
    assert family("DEDUP#0123456789abcdef0123", campaign) == "DEDUP#<hash>"
    assert family("CAMPAIGNS#ws_bench", campaign) == "CAMPAIGNS#<ws>"


def test_a_request_without_a_body_is_a_bodyless_post_of_its_route() -> None:
    event = api_event("POST", "/v1/campaigns/cmp_1/start")

    assert event["body"] is None
    assert event["routeKey"] == "POST /v1/campaigns/cmp_1/start"
    assert event["requestContext"]["http"]["method"] == "POST"
    assert event["headers"]["authorization"].startswith("Bearer ")


def test_several_runs_give_each_figure_its_median_and_exactly_once_only_if_every_run_held() -> None:
    runs = [
        _figures(beyond=0.1, seconds_to_complete=600.0),
        _figures(beyond=0.3, seconds_to_complete=700.0, once=False),
        _figures(beyond=0.2, seconds_to_complete=650.0),
    ]

    merged = _median_of_runs(runs)

    assert merged["calls_beyond_plain_per_recipient"] == 0.2
    assert merged["seconds_to_complete"] == 650.0
    assert merged["every_recipient_once"] is False
    assert merged["status"] == "completed"
