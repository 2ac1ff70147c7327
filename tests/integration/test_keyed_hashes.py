"""What stands for a recipient in the stores, against moto through the real handlers: every dedup
lock, key tie and suppression key is a keyed hash under the stack's HashingKeySecret, so no item's
key holds an address, nor a hash anyone without that secret could recompute from one."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sendonce.dedup.identity import dedup_identity
from sendonce.idempotency.keys import canonical_json, payload_fingerprint, tie_identity

from tests.integration.conftest import WORKSPACE, ApiAnswer, Stack, send

PHONE = "+15550100123"
SUPPRESSED = "+15550100124"
BODY = "Your keyed-hash code is 220431"
# The items that exist to find a recipient again: none may name one.
FINDERS = ("DEDUP#", "KEYTIE#", "SUPPRESSION#", "CAP#")


def _strings(value: Any) -> list[str]:
    """Every string in an item (its attributes' values, however nested)."""
    if isinstance(value, dict):
        return [text for inner in value.values() for text in _strings(inner)]
    if isinstance(value, list):
        return [text for inner in value for text in _strings(inner)]
    return [value] if isinstance(value, str) else []


def _api(stack: Stack, method: str, path: str, body: Any) -> ApiAnswer:
    return stack.call(stack.event("api_send_sms.json", method=method, path=path, body=body))


def test_no_lock_tie_or_suppression_key_holds_an_address_or_a_plain_hash_of_one(stack: Stack) -> None:
    payload = {"channel": "sms", "to": PHONE, "body": BODY}
    assert send(body=payload, key="order-keyed-1").status == 201
    added = _api(stack, "POST", "/v1/suppressions", {"channel": "sms", "to": SUPPRESSED})
    assert added.status == 201, added.body

    # What anyone who guesses the address (and the words) could compute without the key.
    plain = {
        dedup_identity(WORKSPACE, PHONE, None, BODY),
        tie_identity(WORKSPACE, "order-keyed-1", PHONE),
        payload_fingerprint(payload),
        hashlib.sha256(canonical_json(payload).encode()).hexdigest(),
        *(
            hashlib.sha256(json.dumps([version, workspace, SUPPRESSED]).encode()).hexdigest()
            for version in ("v1", "v2")
            for workspace in (WORKSPACE, None)
        ),
    }
    items = [item for table in stack.dynamodb.list_tables()["TableNames"] for item in stack.scan(table)]
    finders = [item for item in items if str(item.get("pk", {}).get("S", "")).startswith(FINDERS)]
    assert {str(item["pk"]["S"]).split("#")[0] for item in finders} >= {"DEDUP", "KEYTIE", "SUPPRESSION"}

    for item in items:
        strings = _strings(item)
        assert not plain & {part for text in strings for part in text.split("#")}, item
    for item in finders:
        # The suppression entry shows its recipient (`to`, erased with them); nothing else does.
        shown = {name: value for name, value in item.items() if name != "to"}
        assert not any(PHONE in text or SUPPRESSED in text for text in _strings(shown)), item

    # And the keyed ones are there: the stack's key finds the lock and the tie.
    keyed = stack.keyed_hash
    pks = {item["pk"]["S"] for item in finders}
    assert f"DEDUP#{keyed(dedup_identity(WORKSPACE, PHONE, None, BODY))}" in pks
    assert f"KEYTIE#{keyed(tie_identity(WORKSPACE, 'order-keyed-1', PHONE))}" in pks
