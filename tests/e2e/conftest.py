"""One local stack (`sendonce run`) per test session, on free ports, torn down at the end."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

REPO = Path(__file__).resolve().parents[2]
SENDONCE = REPO / ".venv" / "bin" / "sendonce"
START_DEADLINE_SECONDS = 90
API_KEY = "sk_e2e_test_key"
OTHER_API_KEY = "sk_e2e_other_key"


@dataclass(frozen=True)
class LocalStack:
    api: str
    aws: str
    sandbox: str
    env: dict[str, str]
    api_key: str
    other_api_key: str

    def auth(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.api_key}"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    ports = {
        "SENDONCE_API_PORT": free_port(),
        "SENDONCE_AWS_PORT": free_port(),
        "SENDONCE_SANDBOX_PORT": free_port(),
    }
    env = {**os.environ, **{name: str(port) for name, port in ports.items()}}
    env["SENDONCE_LOCAL_API_KEYS"] = f"ws_e2e:{API_KEY},ws_e2e_other:{OTHER_API_KEY}"
    env["SENDONCE_PROVIDER_TIMEOUT_SECONDS"] = "2"
    log = tmp_path_factory.mktemp("stack") / "sendonce-run.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(SENDONCE), "run"], cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT
        )
    try:
        api = f"http://127.0.0.1:{ports['SENDONCE_API_PORT']}"
        _wait_healthy(process, api, log)
        yield LocalStack(
            api=api,
            aws=f"http://127.0.0.1:{ports['SENDONCE_AWS_PORT']}",
            sandbox=f"http://127.0.0.1:{ports['SENDONCE_SANDBOX_PORT']}",
            env=env,
            api_key=API_KEY,
            other_api_key=OTHER_API_KEY,
        )
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
