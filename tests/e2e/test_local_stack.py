"""End to end: the real handlers of template.yaml behind the local stack, over HTTP."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
import requests

from sendonce_local.template import load_template
from tests.e2e.e2e_support import eventually

if TYPE_CHECKING:
    from tests.e2e.conftest import LocalStack

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SENDONCE = REPO / ".venv" / "bin" / "sendonce"
EVENTS = Path(__file__).parent / "events"

CHANNELS = [
    ("sms", "+15550100000", None, "sns"),
    ("imessage", "+15550100001", None, "http"),
    ("email", "someone@example.com", "Hello from the e2e suite", "ses"),
]


def deliveries_of(stack: LocalStack, message_id: str) -> list[dict[str, Any]]:
    answer = requests.get(f"{stack.sandbox}/deliveries", timeout=5)
    assert answer.status_code == 200
    return [entry for entry in answer.json()["deliveries"] if entry["messageId"] == message_id]


def test_health_needs_no_key(stack: LocalStack) -> None:
    answer = requests.get(f"{stack.api}/v1/health", timeout=5)

    assert answer.status_code == 200
    assert answer.json() == {"success": True, "status": "ok"}


def test_a_send_without_a_key_is_unauthorized(stack: LocalStack) -> None:
    answer = requests.post(
        f"{stack.api}/v1/messages",
        json={"channel": "sms", "to": "+15550100000", "body": f"no key {uuid.uuid4()}"},
        timeout=10,
    )

    assert answer.status_code == 401
    assert answer.json()["success"] is False
    assert answer.json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize(("channel", "to", "subject", "provider"), CHANNELS)
def test_a_message_reaches_its_provider_exactly_once(
    stack: LocalStack, channel: str, to: str, subject: str | None, provider: str
) -> None:
    request: dict[str, Any] = {"channel": channel, "to": to, "body": f"e2e {channel} {uuid.uuid4()}"}
    if subject is not None:
        request["subject"] = subject

    created = requests.post(f"{stack.api}/v1/messages", json=request, headers=stack.auth(), timeout=10)

    assert created.status_code == 201, created.text
    message_id = created.json()["message"]["id"]

    def sent() -> dict[str, Any] | None:
        answer = requests.get(f"{stack.api}/v1/messages/{message_id}", headers=stack.auth(), timeout=5)
        assert answer.status_code == 200, answer.text
        message: dict[str, Any] = answer.json()["message"]
        # sms stays `sent`; the sandbox reports imessage (webhook) and email (SES) `delivered`
        return message if message["status"] in ("sent", "delivered") else None

    message = eventually(sent, timeout=30)
    assert message["id"] == message_id
    delivered = deliveries_of(stack, message_id)
    assert len(delivered) == 1, delivered
    assert delivered[0]["provider"] == provider
    assert delivered[0]["channel"] == channel
    assert delivered[0]["to"] == to
    assert delivered[0]["body"] == request["body"]
    assert delivered[0]["subject"] == subject


def test_the_emulator_holds_every_table_by_logical_id(stack: LocalStack) -> None:
    dynamodb = boto3.client(
        "dynamodb",
        endpoint_url=stack.aws,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    expected = {table.logical_id for table in load_template(REPO / "template.yaml").tables}

    assert expected <= set(dynamodb.list_tables()["TableNames"])


def _invoke(stack: LocalStack, logical_id: str, event: dict[str, Any], tmp_path: Path) -> Any:
    event_file = tmp_path / f"{logical_id}.json"
    event_file.write_text(json.dumps(event))
    completed = subprocess.run(
        [str(SENDONCE), "invoke", logical_id, "--event", str(event_file)],
        cwd=REPO,
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = completed.stdout.splitlines()
    assert len(lines) == 1, f"stdout: {completed.stdout!r}\nstderr: {completed.stderr[-3000:]}"
    return json.loads(lines[0])


def test_invoke_runs_one_function_on_an_event_file(stack: LocalStack, tmp_path: Path) -> None:
    event = json.loads((EVENTS / "health.json").read_text())

    result = _invoke(stack, "ApiFunction", event, tmp_path)

    assert result["statusCode"] == 200
    assert json.loads(result["body"]) == {"success": True, "status": "ok"}


def test_invoke_feeds_a_dispatcher_an_sqs_event(stack: LocalStack, tmp_path: Path) -> None:
    event = json.loads((EVENTS / "sqs-receive-message.json").read_text())

    result = _invoke(stack, "DispatchSmsFunction", event, tmp_path)

    assert isinstance(result, dict)
    assert "errorType" not in result, result
