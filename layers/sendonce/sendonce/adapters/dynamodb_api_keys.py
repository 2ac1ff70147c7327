"""The API key store on DynamoDB: one item per key hash."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


class DynamoDbApiKeyStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def workspace_for(self, key_hash: str) -> str | None:
        item = self._client.get_item(
            TableName=self._table,
            Key={"keyHash": {"S": key_hash}},
            ProjectionExpression="workspaceId, revoked",
        ).get("Item")
        if not item or item.get("revoked", {}).get("BOOL"):
            return None
        workspace: str = item["workspaceId"]["S"]
        return workspace

    def save(self, key_hash: str, workspace_id: str) -> None:
        self._client.put_item(
            TableName=self._table,
            Item={
                "keyHash": {"S": key_hash},
                "workspaceId": {"S": workspace_id},
                "createdAt": {"S": datetime.now(UTC).isoformat()},
            },
            ConditionExpression="attribute_not_exists(keyHash)",
        )
