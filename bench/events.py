"""Real API Gateway HTTP API (payload 2.0) and SQS events, from the repo's `events/` files."""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from functools import cache
from pathlib import Path
from typing import Any

EVENTS = Path(__file__).resolve().parent.parent / "events"

Event = dict[str, Any]


@cache
def _template(name: str) -> Event:
    loaded: Event = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return loaded


def send_event(body: dict[str, Any], api_key: str, idempotency_key: str | None = None) -> Event:
    """`POST /v1/messages` as the API function receives it: the caller is the workspace of `api_key`,
    which the function looks up itself (no authorizer runs before it)."""
    event = copy.deepcopy(_template("api_send_sms.json"))
    raw = json.dumps(body, separators=(",", ":"))
    headers = event["headers"]
    headers["authorization"] = f"Bearer {api_key}"
    headers["content-length"] = str(len(raw.encode("utf-8")))
    headers.pop("idempotency-key", None)
    if idempotency_key is not None:
        headers["idempotency-key"] = idempotency_key
    event["body"] = raw
    event["isBase64Encoded"] = False
    event["requestContext"]["requestId"] = uuid.uuid4().hex[:16] + "="
    return event


def sqs_event(records: list[dict[str, Any]], queue_arn: str) -> Event:
    """What Lambda's SQS event source mapping hands a dispatcher for received SQS messages."""
    shape = _template("dispatch_sms_batch.json")["Records"][0]
    out = []
    for received in records:
        record = copy.deepcopy(shape)
        record.update(
            messageId=received["MessageId"],
            receiptHandle=received["ReceiptHandle"],
            body=received["Body"],
            md5OfBody=hashlib.md5(received["Body"].encode(), usedforsecurity=False).hexdigest(),
            eventSourceARN=queue_arn,
        )
        record["attributes"].update(received.get("Attributes") or {})
        out.append(record)
    return {"Records": out}
