"""The storm: many concurrent sends through `sendonce run`, half of them duplicates, then the tally.

Half the requests are unique messages across the three channels (half of those with an
Idempotency-Key); the other half repeat them: the same request again (a replay when keyed), the
same content without a key, and the same content under a new key. All are shuffled, so
duplicates race their originals. A 409, 429 or 503 is retried as docs/api.md allows.

It reports the local stack's own throughput (requests a second over the sending phase, retries
included), and how long each new message took from its `201` to its provider call (the sandbox's
delivery time against the wall clock when the answer arrived; one machine, one clock): first for
PACED_SENDS sent one after another at a steady pace (the path's own latency), then for the storm's
(the local stack saturated, its one process running every function and the emulator).
"""

from __future__ import annotations

import json
import random
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.local_stack import ORIGINAL_ENVIRONMENT, ROOT, free_ports
from bench.stats import summary_ms

API_KEY = "sk_local_dev"
CHANNELS = ("sms", "imessage", "email")
RETRIABLE = (409, 429, 503)
MAX_TRIES = 6
# Longer than the queues' 90-second visibility timeout, so a redelivered record is waited for.
QUIET_SECONDS = 120
# Before the storm: new messages one after another, each waited for no longer than this.
PACED_SENDS = 40
PACED_INTERVAL_SECONDS = 0.25


@dataclass(frozen=True)
class Send:
    body: dict[str, Any]
    key: str | None
    kind: str  # original, same_request, same_content_no_key, same_content_new_key


@dataclass
class StormResult:
    requests: int
    unique: int
    delivered: int
    distinct_delivered: int
    by_channel: dict[str, int]
    seconds: float
    sending_seconds: float = 0.0  # from the first request to the last answer
    statuses: dict[str, int] = field(default_factory=dict)
    unexpected: list[dict[str, Any]] = field(default_factory=list)  # answers other than 200/201
    to_provider_seconds: list[float] = field(default_factory=list)  # per new message: 201 -> provider
    paced_to_provider_seconds: list[float] = field(default_factory=list)  # the same, sent one by one

    def figures(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "unique": self.unique,
            "delivered": self.delivered,
            "seconds": round(self.seconds, 1),
            "requests_per_second": round(self.requests / max(self.sending_seconds, 1e-9), 1),
            "created_to_provider_ms": summary_ms(self.to_provider_seconds),
            "paced_created_to_provider_ms": summary_ms(self.paced_to_provider_seconds),
        }


def _message(number: int) -> dict[str, Any]:
    channel = CHANNELS[number % 3]
    text = f"Storm message {number}: your order has shipped. {uuid.uuid4().hex[:6]}"
    if channel == "email":
        return {"channel": "email", "to": f"User{number}@Example.com", "subject": "Shipped", "body": text}
    if channel == "imessage" and number % 2:
        return {"channel": "imessage", "to": f"friend{number}@example.com", "body": text}
    return {"channel": channel, "to": f"+1 555 01{number % 100_000:05d}", "body": text}


def plan(requests: int, seed: int = 7) -> tuple[list[Send], int]:
    unique = requests // 2
    sends = []
    for number in range(unique):
        body = _message(number)
        original = Send(body, f"storm-{uuid.uuid4()}" if number % 2 == 0 else None, "original")
        again = (
            Send(body, original.key, "same_request"),
            Send(body, None, "same_content_no_key"),
            Send(body, f"storm-{uuid.uuid4()}", "same_content_new_key"),
        )[number % 3]
        sends += [original, again]
    random.Random(seed).shuffle(sends)
    return sends, unique


def _request(
    url: str, method: str, payload: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def _to_provider_seconds(
    answers: list[tuple[int, Any, float]], deliveries: list[dict[str, Any]]
) -> list[float]:
    """Per new message: from the wall-clock moment its 201 arrived to its first provider call."""
    answered = {
        answer["message"]["id"]: at
        for status, answer, at in answers
        if status == 201 and isinstance(answer, dict) and answer.get("message")
    }
    delivered: dict[str, float] = {}
    for entry in deliveries:
        at = datetime.fromisoformat(str(entry["at"]).replace("Z", "+00:00")).timestamp()
        delivered[entry["messageId"]] = min(at, delivered.get(entry["messageId"], at))
    return [max(0.0, delivered[key] - at) for key, at in answered.items() if key in delivered]


def _send(api: str, send: Send) -> tuple[int, Any, float]:
    headers = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
    if send.key is not None:
        headers["Idempotency-Key"] = send.key
    status, answer = 0, None
    for attempt in range(MAX_TRIES):
        try:
            status, answer = _request(f"{api}/v1/messages", "POST", send.body, headers)
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            status, answer = 599, str(error)
        if status not in (*RETRIABLE, 599):
            break
        time.sleep(0.5 * (attempt + 1))
    return status, answer, time.time()


class LocalStackProcess:
    def __init__(self, settings: dict[str, str] | None = None) -> None:
        """`settings`: more environment for `sendonce run` (its SENDONCE_* settings, parameter overrides)."""
        self.ports = free_ports()
        self._log = tempfile.NamedTemporaryFile(prefix="bench-storm-", suffix=".log", delete=False)  # noqa: SIM115
        env = {
            **ORIGINAL_ENVIRONMENT,
            **(settings or {}),
            "SENDONCE_API_PORT": str(self.ports.api),
            "SENDONCE_AWS_PORT": str(self.ports.aws),
            "SENDONCE_SANDBOX_PORT": str(self.ports.sandbox),
        }
        env.pop("SENDONCE_LOCAL_API_KEYS", None)
        self._process = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "sendonce"), "run"],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def log_path(self) -> str:
        return self._log.name

    def wait_healthy(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"sendonce run exited {self._process.returncode}; see {self.log_path}")
            try:
                if _request(f"{self.ports.api_url}/v1/health", "GET")[0] == 200:
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.5)
        raise TimeoutError(f"sendonce run was not healthy within {timeout}s; see {self.log_path}")

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._log.close()


def _deliveries(sandbox: str) -> list[dict[str, Any]]:
    status, body = _request(f"{sandbox}/deliveries", "GET")
    return list(body["deliveries"]) if status == 200 else []


def _settle(sandbox: str, unique: int, quiet_seconds: float, timeout: float) -> list[dict[str, Any]]:
    """Wait until every unique message is delivered, then a little longer to catch any extra one."""
    deadline = time.monotonic() + timeout
    seen, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        deliveries = _deliveries(sandbox)
        if len(deliveries) != seen:
            seen, since = len(deliveries), time.monotonic()
        if len(deliveries) >= unique or time.monotonic() - since > quiet_seconds:
            return deliveries
        time.sleep(0.25)
    return _deliveries(sandbox)


def _paced(stack: LocalStackProcess) -> list[float]:
    """PACED_SENDS new messages, one every PACED_INTERVAL_SECONDS: each one's 201 to its provider call."""
    answers = []
    for number in range(PACED_SENDS):
        body = {**_message(1_000_000 + number), "channel": "sms", "to": f"+1 555 02{number:05d}"}
        answers.append(_send(stack.ports.api_url, Send(body, None, "paced")))
        time.sleep(PACED_INTERVAL_SECONDS)
    deliveries = _settle(stack.ports.sandbox_url, PACED_SENDS, quiet_seconds=QUIET_SECONDS, timeout=120)
    return _to_provider_seconds(answers, deliveries)


def run_storm(requests: int, concurrency: int, settle_timeout: float = 420) -> StormResult:
    stack = LocalStackProcess()
    try:
        stack.wait_healthy()
        paced = _paced(stack)
        _request(f"{stack.ports.sandbox_url}/deliveries", "DELETE")
        sends, unique = plan(requests)
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            answers = list(pool.map(lambda send: _send(stack.ports.api_url, send), sends))
        sending_seconds = time.perf_counter() - started
        statuses = Counter(status for status, _, _ in answers)
        unexpected = [
            {"kind": send.kind, "keyed": send.key is not None, "status": status, "answer": answer}
            for send, (status, answer, _) in zip(sends, answers, strict=True)
            if status not in (200, 201)
        ]
        deliveries = _settle(
            stack.ports.sandbox_url, unique, quiet_seconds=QUIET_SECONDS, timeout=settle_timeout
        )
        seconds = time.perf_counter() - started
        time.sleep(2)  # anything still in flight would show up now
        deliveries = _deliveries(stack.ports.sandbox_url)
        return StormResult(
            requests=len(sends),
            unique=unique,
            delivered=len(deliveries),
            distinct_delivered=len({entry["messageId"] for entry in deliveries}),
            by_channel=dict(Counter(str(entry["channel"]) for entry in deliveries)),
            seconds=seconds,
            sending_seconds=sending_seconds,
            to_provider_seconds=_to_provider_seconds(answers, deliveries),
            paced_to_provider_seconds=paced,
            statuses={str(status): count for status, count in sorted(statuses.items())},
            unexpected=unexpected[:20],
        )
    finally:
        stack.stop()
        Path(stack.log_path).unlink(missing_ok=True)
