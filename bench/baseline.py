"""The unprotected baseline: what any send endpoint must do, and nothing that makes it send once.

It validates the same body with the same pydantic model, writes one DynamoDB item and sends one
SQS message with plain boto3 clients: no API key check (every message is one workspace's), no
dedup lock, no Idempotency-Key, no transaction, no structured logging or metrics.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import boto3
from pydantic import ValidationError
from sendonce.api.commands import SendMessageRequest

from bench.local_stack import WORKSPACE


class BaselineHandler:
    def __init__(self, table: str, queue_url: str, workspace: str = WORKSPACE) -> None:
        self._table = table
        self._queue_url = queue_url
        # Unprotected: the caller is not checked, every message is this workspace's.
        self._workspace = workspace
        self._dynamodb = boto3.client("dynamodb")
        self._sqs = boto3.client("sqs")

    def __call__(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        try:
            request = SendMessageRequest.model_validate_json(event.get("body") or "")
        except ValidationError as error:
            return _answer(
                400, {"success": False, "error": {"code": "validation_error", "message": str(error)}}
            )
        message_id = "msg_" + uuid.uuid4().hex
        now = datetime.now(UTC).isoformat()
        workspace = self._workspace
        self._dynamodb.put_item(
            TableName=self._table,
            Item={
                "pk": {"S": f"BASELINE#{message_id}"},
                "sk": {"S": "M"},
                "workspace": {"S": workspace},
                "channel": {"S": request.channel},
                "to": {"S": request.to},
                "body": {"S": request.body},
                "createdAt": {"S": now},
            },
        )
        self._sqs.send_message(
            QueueUrl=self._queue_url,
            MessageBody=json.dumps({"messageId": message_id, "workspaceId": workspace}),
        )
        return _answer(201, {"success": True, "status": "queued", "message": {"id": message_id}})


def _answer(status: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"statusCode": status, "headers": {"Content-Type": "application/json"}, "body": json.dumps(body)}
