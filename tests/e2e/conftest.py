"""Local stacks (`sendonce run`) on free ports, one per settings profile, torn down at the end.

- `stack`: the default settings (24 h idempotency window, 15 min dedup window), two workspaces,
  a 2 s provider timeout, the sandbox reporting deliveries (webhooks, SES notifications), and
  status webhooks retried every second, three times.
  Its webhook secret is the random one the stack made at start: the tests read it from the banner.
- `failover_stack`: sms through the sandbox's Twilio, then its HTTP provider
  (`SmsProviders=twilio,http`), delivery events on.
- `short_stack`: 3 s idempotency and dedup windows, `SENDONCE_REQUIRE_IDEMPOTENCY_KEY=true`, two
  workspaces (`ws_a`, `ws_b`), and the sandbox's delivery events off, so a lost provider answer is
  observably retried (a `delivered` event would otherwise end the message before the retry).
Each is started once per session, on first use.

Every stack's output is kept (`STACK_LOGS`), and every recipient and every piece of content the
tests send to an API (`SENT`, recorded from each request the tests' HTTP clients make): the last
test of the run, `test_e2e_service_logs`, reads the service's log lines of the whole run for them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests

from tests.support.ports import free_port

# The output of every stack started in this run, and what the tests sent (`Sent`).
STACK_LOGS: list[Path] = []
# The request fields that carry a recipient or a message's content.
SENT_FIELDS = frozenset({"to", "cc", "bcc", "body", "subject", "html", "text", "replyTo"})


@dataclass
class Sent:
    """Every recipient and piece of content the tests put in a request body, however nested."""

    values: set[str] = field(default_factory=set)

    def record(self, content: bytes | str | None) -> None:
        if not content:
            return
        try:
            parsed = json.loads(content)
        except (ValueError, UnicodeDecodeError):
            return
        self._walk(parsed, None)

    def _walk(self, value: object, name: str | None) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                self._walk(inner, str(key))
        elif isinstance(value, list):
            for inner in value:
                self._walk(inner, name)
        elif isinstance(value, str) and name in SENT_FIELDS:
            self.values.add(value)


SENT = Sent()


@pytest.fixture(scope="session", autouse=True)
def _record_what_is_sent() -> Iterator[None]:
    """Wrap the tests' HTTP clients (requests, and httpx under the Python client) to record `SENT`."""
    sends = requests.Session.send, httpx.Client.send, httpx.AsyncClient.send

    def send(self: requests.Session, request: requests.PreparedRequest, **kwargs: Any) -> Any:
        SENT.record(request.body)
        return sends[0](self, request, **kwargs)

    def client_send(self: httpx.Client, request: httpx.Request, **kwargs: Any) -> Any:
        SENT.record(request.content)
        return sends[1](self, request, **kwargs)

    async def async_send(self: httpx.AsyncClient, request: httpx.Request, **kwargs: Any) -> Any:
        SENT.record(request.content)
        return await sends[2](self, request, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(requests.Session, "send", send)
        patch.setattr(httpx.Client, "send", client_send)
        patch.setattr(httpx.AsyncClient, "send", async_send)
        yield


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The scan of the service's logs runs last: after every other test has sent what it sends."""
    items.sort(key=lambda item: item.path.name == "test_e2e_service_logs.py")


REPO = Path(__file__).resolve().parents[2]
SENDONCE = REPO / ".venv" / "bin" / "sendonce"
START_DEADLINE_SECONDS = 90
BANNER_DEADLINE_SECONDS = 15
API_KEY = "sk_e2e_test_key"
OTHER_API_KEY = "sk_e2e_other_key"
# The first workspace's test twin (README, "Test mode"): a key starting with sk_test_.
TEST_API_KEY = "sk_test_e2e_key"
WEBHOOK_SECRET_LINE = re.compile(r"^\s+webhook secret\s+(\S+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class LocalStack:
    api: str
    aws: str
    sandbox: str
    env: dict[str, str]
    api_key: str
    other_api_key: str
    workspace: str = "ws_e2e"
    other_workspace: str = "ws_e2e_other"
    test_api_key: str = ""  # of the first workspace's test twin, where the stack has one
    webhook_secret: str = field(default="", repr=False)  # the one the banner printed

    def auth(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.api_key}"}


def _wait_healthy(process: subprocess.Popen[bytes], api: str, log: Path) -> None:
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"sendonce run exited with {process.returncode}:\n{log.read_text()[-5000:]}")
        try:
            if requests.get(f"{api}/v1/health", timeout=2).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.2)
    pytest.fail(
        f"the local stack was not healthy within {START_DEADLINE_SECONDS}s:\n{log.read_text()[-5000:]}"
    )


def _printed_webhook_secret(process: subprocess.Popen[bytes], log: Path) -> str:
    """The webhook secret of the banner `sendonce run` prints once it is up."""
    deadline = time.monotonic() + BANNER_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        found = WEBHOOK_SECRET_LINE.search(log.read_text(errors="replace"))
        if found:
            return found.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.1)
    pytest.fail(f"the banner printed no webhook secret:\n{log.read_text()[-5000:]}")


@contextmanager
def running_stack(
    log: Path, settings: dict[str, str], keys: tuple[tuple[str, str], ...]
) -> Iterator[LocalStack]:
    """`keys`: (workspace, key) pairs, the first two live, then any test key (sk_test_…)."""
    ports = {
        "SENDONCE_API_PORT": free_port(),
        "SENDONCE_AWS_PORT": free_port(),
        "SENDONCE_SANDBOX_PORT": free_port(),
        # The sandbox's providers on ports of their own (a `refused` fault closes one).
        "SENDONCE_SANDBOX_TWILIO_PORT": free_port(),
        "SENDONCE_SANDBOX_HTTP_PROVIDER_PORT": free_port(),
    }
    env = {**os.environ, **{name: str(port) for name, port in ports.items()}, **settings}
    env["SENDONCE_LOCAL_API_KEYS"] = ",".join(f"{workspace}:{key}" for workspace, key in keys)
    STACK_LOGS.append(log)
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(SENDONCE), "run"], cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT
        )
    try:
        api = f"http://127.0.0.1:{ports['SENDONCE_API_PORT']}"
        _wait_healthy(process, api, log)
        webhook_secret = _printed_webhook_secret(process, log)
        yield LocalStack(
            api=api,
            aws=f"http://127.0.0.1:{ports['SENDONCE_AWS_PORT']}",
            sandbox=f"http://127.0.0.1:{ports['SENDONCE_SANDBOX_PORT']}",
            env=env,
            api_key=keys[0][1],
            other_api_key=keys[1][1],
            workspace=keys[0][0],
            other_workspace=keys[1][0],
            test_api_key=next((key for _, key in keys[2:] if key.startswith("sk_test_")), ""),
            webhook_secret=webhook_secret,
        )
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    log = tmp_path_factory.mktemp("stack") / "sendonce-run.log"
    settings = {
        "SENDONCE_PROVIDER_TIMEOUT_SECONDS": "2",
        "SENDONCE_SANDBOX_DELIVERY_EVENTS": "true",
        # Status webhooks retried after a second, not after 5 s, 5 min, ...: the schedule's shape, quickly.
        "SENDONCE_WEBHOOK_RETRY_SCHEDULE": "1,1,1",
    }
    keys = (("ws_e2e", API_KEY), ("ws_e2e_other", OTHER_API_KEY), ("ws_e2e", TEST_API_KEY))
    with running_stack(log, settings, keys) as local:
        yield local


@pytest.fixture(scope="session")
def failover_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """sms through Twilio, then the HTTP provider (both the sandbox's), with delivery events on."""
    log = tmp_path_factory.mktemp("failover-stack") / "sendonce-run.log"
    settings = {
        "SENDONCE_LOCAL_PARAMETER_OVERRIDES": "SmsProviders=twilio,http",
        "SENDONCE_PROVIDER_TIMEOUT_SECONDS": "2",
        "SENDONCE_SANDBOX_DELIVERY_EVENTS": "true",
    }
    with running_stack(log, settings, (("ws_f", "sk_f"), ("ws_g", "sk_g"))) as local:
        yield local


@pytest.fixture(scope="session")
def short_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    log = tmp_path_factory.mktemp("short-stack") / "sendonce-run.log"
    settings = {
        "SENDONCE_DEDUP_WINDOW_SECONDS": "3",
        "SENDONCE_IDEMPOTENCY_TTL_SECONDS": "3",
        "SENDONCE_REQUIRE_IDEMPOTENCY_KEY": "true",
        "SENDONCE_PROVIDER_TIMEOUT_SECONDS": "2",
        "SENDONCE_SANDBOX_DELIVERY_EVENTS": "false",
    }
    with running_stack(log, settings, (("ws_a", "sk_a"), ("ws_b", "sk_b"))) as local:
        yield local
