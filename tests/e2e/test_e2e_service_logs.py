"""The service's structured logs hold no message content, and no recipient but as a keyed hash.

This test runs last (tests/e2e/conftest.py orders it so): it reads the output of every stack the
run started, once every other test has sent what it sends, and checks each line the functions
logged (Powertools' JSON lines, `"service": "sendonce"`) for every recipient and every piece of
content the tests put in a request (`SENT`), and for anything shaped like a phone number or an
email address at all.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from tests.e2e.conftest import SENT, STACK_LOGS, LocalStack
from tests.e2e.e2e_support import SETTLED, call, unique_phone, wait_status

PHONE = re.compile(r"\+\d{8,15}")
EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
# Shorter content ("hi") is found inside the words of any line: it proves nothing either way.
MIN_CONTENT = 8
OWN_BODY = "Your sendonce log-scan code is 804511"


def _service_lines() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for log in STACK_LOGS:
        for line in log.read_text(errors="replace").splitlines():
            if not line.startswith("{"):
                continue
            try:
                parsed = json.loads(line)
            except ValueError:
                continue
            if isinstance(parsed, dict) and parsed.get("service") == "sendonce":
                found.append((line, parsed))
    return found


def test_the_service_logs_of_the_whole_run_name_no_recipient_and_hold_no_content(stack: LocalStack) -> None:
    # This test's own delivered message: the scan has a send to look for even when run alone.
    own_recipient = unique_phone()
    created = call(stack, "POST", "/v1/messages", {"channel": "sms", "to": own_recipient, "body": OWN_BODY})
    assert created.status_code == 201, created.text
    message_id = created.json()["message"]["id"]
    wait_status(stack, message_id, SETTLED, timeout=60)
    time.sleep(1)  # its last lines written

    lines = _service_lines()
    sent = {value for value in SENT.values if len(value) >= MIN_CONTENT}
    assert OWN_BODY in sent
    assert own_recipient in sent
    assert any(message_id in line for line, _ in lines)  # the message's life was logged, by its id

    leaks = []
    for line, parsed in lines:
        text = f"{line}\n{json.dumps(parsed, ensure_ascii=False)}"
        named = [value for value in sent if value in text]
        shaped = [match.group() for pattern in (PHONE, EMAIL) for match in pattern.finditer(text)]
        if named or shaped:
            leaks.append(f"{parsed.get('event') or parsed.get('message')}: {sorted({*named, *shaped})}")
    assert not leaks, f"{len(leaks)} of {len(lines)} service log lines: " + "; ".join(leaks[:20])
