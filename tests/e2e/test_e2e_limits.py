"""Per-workspace limits through `sendonce run`: the CLI's override, /v1/usage, the 429s and their
fields. The second workspace is narrowed here and given back the local defaults at the end."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.e2e.conftest import SENDONCE, LocalStack
from tests.e2e.e2e_support import error_code, send, sms, unique_body, unique_phone

WINDOW_SECONDS = 2


def set_limits(stack: LocalStack, *arguments: str) -> subprocess.CompletedProcess[str]:
    """The CLI's override, returning once it is in effect (a few seconds: every execution
    environment must be able to have read it)."""
    return subprocess.run(
        [str(SENDONCE), "workspace", "set-limits", stack.other_workspace, "--wait", *arguments],
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def usage(stack: LocalStack) -> requests.Response:
    return requests.get(f"{stack.api}/v1/usage", headers=stack.auth(stack.other_api_key), timeout=30)


def next_window() -> None:
    """Sleep into a fresh rate window, so a test's few requests are counted from zero."""
    time.sleep(WINDOW_SECONDS - time.time() % WINDOW_SECONDS + 0.05)


@pytest.fixture
def narrowed(stack: LocalStack) -> Iterator[LocalStack]:
    yield stack
    restored = set_limits(stack, "--rate", "1000", "--daily-quota", "1000000")
    assert restored.returncode == 0, restored.stderr


def test_the_cli_override_the_usage_and_the_quota(narrowed: LocalStack) -> None:
    stack = narrowed
    used = usage(stack).json()["quota"]["usedToday"]  # what the other tests sent from it today
    done = set_limits(stack, "--daily-quota", str(used + 1))
    assert done.returncode == 0, done.stderr
    assert "in effect from" in done.stdout

    before = usage(stack)
    first = send(stack, sms(unique_phone(), unique_body("within the quota")), key=stack.other_api_key)
    again = send(stack, sms(unique_phone(), unique_body("past the quota")), key=stack.other_api_key)
    after = usage(stack)

    assert before.status_code == 200, before.text
    assert before.json()["rateLimit"] == {"perSecond": 1000}
    assert before.json()["quota"] == {**before.json()["quota"], "daily": used + 1, "usedToday": used}
    assert "T00:00:00" in before.json()["quota"]["resetsAt"]  # the next UTC midnight
    assert first.status_code == 201, first.text
    assert again.status_code == 429
    assert error_code(again) == "quota_exceeded"
    assert 1 <= int(again.headers["Retry-After"]) <= 86_400
    assert after.json()["quota"]["usedToday"] == before.json()["quota"]["usedToday"] + 1
    for answer in (before, first, again, after):  # on every authenticated answer
        assert answer.headers["RateLimit-Policy"] == '"workspace";q=2000;w=2'
        assert answer.headers["RateLimit"].startswith('"workspace";r=')


def test_the_request_rate_answers_429_with_retry_after(narrowed: LocalStack) -> None:
    stack = narrowed
    assert set_limits(stack, "--rate", "1").returncode == 0

    # Six requests at once, from the start of a window: more than its 2, however slow each answer.
    answers: list[requests.Response] = []
    for _ in range(3):  # a burst that straddled two windows anyway is tried again
        next_window()
        with ThreadPoolExecutor(max_workers=6) as pool:
            answers = list(pool.map(lambda _: usage(stack), range(6)))
        if any(answer.status_code == 429 for answer in answers):
            break

    statuses = [answer.status_code for answer in answers]
    assert 429 in statuses
    assert set(statuses) <= {200, 429}
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert error_code(refused) == "rate_limited"
    assert 1 <= int(refused.headers["Retry-After"]) <= WINDOW_SECONDS
    assert refused.headers["RateLimit-Policy"] == '"workspace";q=2;w=2'
    assert "r=0;" in refused.headers["RateLimit"]
    mine = requests.get(f"{stack.api}/v1/usage", headers=stack.auth(), timeout=30)
    assert mine.status_code == 200  # another workspace's rate is its own


@pytest.mark.parametrize(
    "arguments",
    [("--rate", "-5"), ("--rate", "0"), ("--daily-quota", "-1"), ("--rate", "100000000"), ()],
)
def test_bad_limits_are_refused_by_the_cli_and_change_nothing(
    narrowed: LocalStack, arguments: tuple[str, ...]
) -> None:
    stack = narrowed
    assert set_limits(stack, "--rate", "1000", "--daily-quota", "7").returncode == 0

    refused = set_limits(stack, *arguments)

    assert refused.returncode == 2
    assert "sendonce workspace set-limits:" in refused.stderr
    report = usage(stack).json()
    assert (report["rateLimit"]["perSecond"], report["quota"]["daily"]) == (1000, 7)


def test_a_lowered_quota_keeps_the_days_usage_and_admits_only_what_is_left(narrowed: LocalStack) -> None:
    stack = narrowed
    before = usage(stack).json()["quota"]["usedToday"]
    for _ in range(3):
        answer = send(stack, sms(unique_phone(), unique_body("before the change")), key=stack.other_api_key)
        assert answer.status_code == 201, answer.text
    assert set_limits(stack, "--daily-quota", str(before + 4)).returncode == 0

    kept = usage(stack).json()["quota"]
    with ThreadPoolExecutor(max_workers=10) as pool:
        answers = list(
            pool.map(
                lambda i: send(
                    stack, sms(unique_phone(), unique_body(f"after {i}")), key=stack.other_api_key
                ),
                range(10),
            )
        )

    assert kept["usedToday"] == before + 3
    assert sorted(answer.status_code for answer in answers) == [201] + [429] * 9
    assert usage(stack).json()["quota"]["usedToday"] == before + 4


def test_the_cli_sets_destination_rules_and_an_sms_budget(narrowed: LocalStack) -> None:
    """CONTRACT section 18 through the CLI: a country outside the list and a premium-rate number are
    422 destination_not_allowed, and a UTC day's sms take at most the budget's segments."""
    stack = narrowed
    done = set_limits(stack, "--sms-countries", "US,CA", "--daily-sms-segments", "3")
    assert done.returncode == 0, done.stderr
    assert "sms to US,CA" in done.stdout
    assert "3 sms segments a day" in done.stdout
    try:
        france = send(stack, sms("+33612345678", unique_body("to France")), key=stack.other_api_key)
        premium = send(stack, sms("+19002345678", unique_body("premium")), key=stack.other_api_key)
        two_segments = unique_body("two segments").ljust(161, ".")  # GSM-7, over 160 septets
        first = send(stack, sms("+14155550100", two_segments), key=stack.other_api_key)
        past = send(
            stack, sms("+16135550123", unique_body("two more").ljust(161, ".")), key=stack.other_api_key
        )
        last = send(stack, sms("+16135550123", unique_body("the last segment")), key=stack.other_api_key)
    finally:
        restored = set_limits(stack, "--sms-countries", "all", "--daily-sms-segments", "0")
        assert restored.returncode == 0, restored.stderr

    assert (france.status_code, error_code(france)) == (422, "destination_not_allowed")
    assert france.json()["error"]["details"] == {"reason": "country_not_allowed"}
    assert (premium.status_code, error_code(premium)) == (422, "destination_not_allowed")
    assert premium.json()["error"]["details"] == {"reason": "premium_rate"}
    assert first.status_code == 201, first.text
    assert (past.status_code, error_code(past)) == (429, "sms_budget_exceeded")
    assert 1 <= int(past.headers["Retry-After"]) <= 86_400
    assert last.status_code == 201, last.text
