"""Issue 4, end to end: the atomic dedup guard, counted with the sandbox's /deliveries."""

from __future__ import annotations

import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import requests

from tests.e2e.e2e_support import (
    SETTLED,
    arm_fault,
    created_id,
    deliveries_with_body,
    email,
    eventually,
    formatted,
    imessage,
    send,
    sms,
    unique_body,
    unique_email,
    unique_phone,
    wait_status,
)

if TYPE_CHECKING:
    from tests.e2e.conftest import LocalStack

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SENDONCE = REPO / ".venv" / "bin" / "sendonce"
SHORT_WINDOW_SECONDS = 3


def assert_duplicate_of(answer: requests.Response, original_id: str) -> None:
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["success"] is True
    assert body["duplicateOnly"] is True
    assert body["message"]["id"] == original_id
    assert " ago" in body["duplicateMessage"]
    assert any(char.isdigit() for char in body["duplicateMessage"])  # the age of the original


def test_formatting_variants_of_one_recipient_are_caught(stack: LocalStack) -> None:
    phone, body = unique_phone(), unique_body("phone variants")
    address, mail_body = unique_email("Ann"), unique_body("email variants")

    original = created_id(send(stack, sms(formatted(phone), body)))
    same_number = send(stack, sms(phone, body))
    other_channel = send(stack, imessage(phone, body))  # the identity has no channel
    mail = created_id(send(stack, email(address.upper(), mail_body)))
    same_address = send(stack, email(address.lower(), mail_body))

    assert_duplicate_of(same_number, original)
    assert_duplicate_of(other_channel, original)
    assert_duplicate_of(same_address, mail)
    wait_status(stack, original, SETTLED)
    wait_status(stack, mail, SETTLED)
    assert len(deliveries_with_body(stack, body)) == 1
    assert len(deliveries_with_body(stack, mail_body)) == 1


def test_another_body_recipient_workspace_or_boundary_is_another_message(stack: LocalStack) -> None:
    phone, body = unique_phone(), unique_body("not caught")
    subject = f"boundaries {uuid.uuid4()}"

    answers = [
        send(stack, sms(phone, body)),
        send(stack, sms(phone, body + " again")),
        send(stack, sms(unique_phone(), body)),
        send(stack, sms(phone, body), key=stack.other_api_key),
        send(stack, email("a@b.co", "mhi", subject)),
        send(stack, email("a@b.com", "hi", subject)),
    ]

    assert [answer.status_code for answer in answers] == [201] * 6, [a.text for a in answers]
    assert all(answer.json()["duplicateOnly"] is False for answer in answers)
    assert len({created_id(answer) for answer in answers}) == 6
    eventually(lambda: len(deliveries_with_body(stack, body)) == 3)


def test_thirty_concurrent_identical_requests_send_once(stack: LocalStack) -> None:
    request = imessage(unique_phone(), unique_body("thirty"))

    with ThreadPoolExecutor(max_workers=30) as pool:
        answers = list(pool.map(lambda _: send(stack, request), range(30)))

    created = [answer for answer in answers if answer.status_code == 201]
    assert len(created) == 1, sorted(answer.status_code for answer in answers)
    original = created_id(created[0])
    for answer in answers:
        if answer is not created[0]:
            assert_duplicate_of(answer, original)
    wait_status(stack, original, SETTLED)
    assert len(deliveries_with_body(stack, request["body"])) == 1


def test_after_the_window_the_same_message_sends_again(short_stack: LocalStack) -> None:
    request = sms(unique_phone(), unique_body("window"))
    started = time.monotonic()
    first = created_id(send(short_stack, request, idempotency_key=f"w1-{uuid.uuid4()}"))
    assert_duplicate_of(send(short_stack, request, idempotency_key=f"w2-{uuid.uuid4()}"), first)

    def sent_again() -> requests.Response | None:
        answer = send(short_stack, request, idempotency_key=f"w3-{uuid.uuid4()}")
        return answer if answer.status_code == 201 else None

    again = eventually(sent_again, timeout=30, interval=0.5)
    assert time.monotonic() - started >= SHORT_WINDOW_SECONDS - 0.5
    assert created_id(again) != first
    wait_status(short_stack, created_id(again), "sent")
    assert len(deliveries_with_body(short_stack, request["body"])) == 2


def test_a_failed_send_does_not_block_its_retry(stack: LocalStack) -> None:
    phone, body = unique_phone(), unique_body("rejected then retried")
    arm_fault(stack, "error_400", to=phone)

    failed_id = created_id(send(stack, imessage(phone, body)))
    failed = wait_status(stack, failed_id, ("failed", *SETTLED))
    retry = send(stack, imessage(phone, body))

    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "provider_rejected"
    retry_id = created_id(retry)
    assert retry_id != failed_id
    wait_status(stack, retry_id, SETTLED)
    assert [entry["messageId"] for entry in deliveries_with_body(stack, body)] == [retry_id]


def release_lock(stack: LocalStack, *args: str) -> str:
    completed = subprocess.run(
        [str(SENDONCE), "release-lock", "--endpoint-url", stack.aws, *args],
        cwd=REPO,
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


def test_release_lock_lets_an_identical_message_through_inside_the_window(stack: LocalStack) -> None:
    phone, body = unique_phone(), unique_body("released")
    first = created_id(send(stack, sms(phone, body)))
    assert_duplicate_of(send(stack, sms(phone, body)), first)
    lock: list[str] = ["--workspace", stack.workspace, "--channel", "sms", "--body", body]

    released = release_lock(stack, *lock, "--to", formatted(phone))
    nothing_left = release_lock(stack, *lock, "--to", phone)
    again = send(stack, sms(phone, body))

    assert f"released the lock of message {first}" in released
    assert "no lock" in nothing_left
    second = created_id(again)
    assert second != first
    wait_status(stack, second, SETTLED)
    messages: list[Any] = [entry["messageId"] for entry in deliveries_with_body(stack, body)]
    assert sorted(messages) == sorted([first, second])
