"""What the end-to-end tests do through the local stack: HTTP to the API and to the sandbox, only."""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import requests
from sendonce.provider_events.signature import sign

if TYPE_CHECKING:
    from tests.e2e.conftest import LocalStack

DEADLINE = 45.0  # generous: 2 noisy cores, SQS pollers, retries with backoff
SETTLED = ("sent", "delivered")


def eventually(check: Callable[[], Any], timeout: float = DEADLINE, interval: float = 0.2) -> Any:
    """Poll `check` until it returns something truthy, or fail at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"not true within {timeout}s (last value: {last!r})")


def unique_phone() -> str:
    """A fictional +1 555 number, E.164."""
    return f"+1555{random.randint(0, 9_999_999):07d}"


def formatted(phone: str) -> str:
    """+15551234567 as '+1 (555) 123-4567'."""
    digits = phone[2:]
    return f"+1 ({digits[:3]}) {digits[3:6]}-{digits[6:]}"


def unique_email(local: str = "someone") -> str:
    return f"{local}.{uuid.uuid4().hex[:10]}@example.com"


def unique_body(label: str) -> str:
    return f"{label} {uuid.uuid4()}"


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# ---------------------------------------------------------------- the API
def send(
    stack: LocalStack,
    request: dict[str, Any],
    *,
    key: str | None = None,
    idempotency_key: str | None = None,
    raw: str | None = None,
) -> requests.Response:
    headers = {**stack.auth(key), "Content-Type": "application/json"}
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    data = raw if raw is not None else json.dumps(request)
    return requests.post(f"{stack.api}/v1/messages", data=data.encode("utf-8"), headers=headers, timeout=30)


def call(stack: LocalStack, method: str, path: str, body: dict[str, Any] | None = None) -> requests.Response:
    """Any route of the API, with the stack's key and a JSON body."""
    headers = {**stack.auth(None), "Content-Type": "application/json"}
    return requests.request(method, f"{stack.api}{path}", json=body, headers=headers, timeout=30)


def sms(to: str, body: str) -> dict[str, Any]:
    return {"channel": "sms", "to": to, "body": body}


def imessage(to: str, body: str) -> dict[str, Any]:
    return {"channel": "imessage", "to": to, "body": body}


def email(to: str, body: str, subject: str = "Hello from the e2e suite") -> dict[str, Any]:
    return {"channel": "email", "to": to, "subject": subject, "body": body}


def message(stack: LocalStack, message_id: str, key: str | None = None) -> dict[str, Any]:
    answer = requests.get(f"{stack.api}/v1/messages/{message_id}", headers=stack.auth(key), timeout=10)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()["message"]
    return found


def wait_status(
    stack: LocalStack,
    message_id: str,
    statuses: tuple[str, ...] | str,
    key: str | None = None,
    timeout: float = DEADLINE,
) -> dict[str, Any]:
    wanted = (statuses,) if isinstance(statuses, str) else statuses

    def reached() -> dict[str, Any] | None:
        current = message(stack, message_id, key)
        return current if current["status"] in wanted else None

    found: dict[str, Any] = eventually(reached, timeout)
    return found


def created_id(answer: requests.Response) -> str:
    assert answer.status_code == 201, answer.text
    message_id: str = answer.json()["message"]["id"]
    return message_id


def error_code(answer: requests.Response) -> str:
    code: str = answer.json()["error"]["code"]
    return code


# ---------------------------------------------------------------- the sandbox
def deliveries(stack: LocalStack) -> list[dict[str, Any]]:
    answer = requests.get(f"{stack.sandbox}/deliveries", timeout=10)
    assert answer.status_code == 200
    found: list[dict[str, Any]] = answer.json()["deliveries"]
    return found


def deliveries_of(stack: LocalStack, message_id: str) -> list[dict[str, Any]]:
    return [entry for entry in deliveries(stack) if entry["messageId"] == message_id]


def deliveries_with_body(stack: LocalStack, body: str) -> list[dict[str, Any]]:
    return [entry for entry in deliveries(stack) if entry["body"] == body]


def reports(stack: LocalStack) -> list[dict[str, Any]]:
    answer = requests.get(f"{stack.sandbox}/events", timeout=10)
    assert answer.status_code == 200
    found: list[dict[str, Any]] = answer.json()["events"]
    return found


def arm_fault(
    stack: LocalStack, mode: str, to: str, count: int = 1, channel: str = "imessage", provider: str = "http"
) -> None:
    answer = requests.put(
        f"{stack.sandbox}/faults",
        json={"provider": provider, "channel": channel, "to": to, "mode": mode, "count": count},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text


# ---------------------------------------------------------------- provider webhooks
def http_body(message_id: str, kind: str, event_id: str | None = None) -> dict[str, Any]:
    return {
        "eventId": event_id or f"evt_e2e_{uuid.uuid4().hex}",
        "messageId": message_id,
        "type": kind,
        "occurredAt": rfc3339(datetime.now(UTC)),
    }


def post_webhook(
    stack: LocalStack,
    raw: bytes,
    *,
    signature: str | None = None,
    secret: str | None = None,
    timestamp: int | None = None,
) -> requests.Response:
    """POST raw bytes to /v1/webhooks/http, signed (unless a signature is given)."""
    if signature is None:
        signature = sign(secret or stack.webhook_secret, timestamp or int(time.time()), raw)
    return requests.post(
        f"{stack.api}/v1/webhooks/http",
        data=raw,
        headers={"Content-Type": "application/json", "X-Sendonce-Signature": signature},
        timeout=30,
    )


def as_raw(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def settle_events(stack: LocalStack) -> None:
    """A barrier: an event posted now is applied only once those queued before it were taken."""
    control = created_id(send(stack, sms(unique_phone(), unique_body("barrier"))))
    wait_status(stack, control, "sent")
    assert post_webhook(stack, as_raw(http_body(control, "delivered"))).status_code == 200
    wait_status(stack, control, "delivered")
