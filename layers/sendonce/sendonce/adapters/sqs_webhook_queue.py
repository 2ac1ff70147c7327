"""The webhook delivery queues on SQS: one record per (event, endpoint), a small JSON body naming them.

The same body in either lane (`webhooks.delivery`): the fast lane's queue, where the stream's
consumer and a redelivery put it, and the slow lane's, where a delivery moves it unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sendonce.errors import QueueUnavailable
from sendonce.status_webhooks.ports import DeliveryTask

SQS_BATCH_LIMIT = 10


def task_body(task: DeliveryTask) -> str:
    return json.dumps(
        {
            "workspaceId": task.workspace_id,
            "eventId": task.event_id,
            "endpointId": task.endpoint_id,
            "baseAttempts": task.base_attempts,
        },
        separators=(",", ":"),
    )


def parse_task(body: str) -> DeliveryTask:
    """Raises ValueError for a record that does not name a delivery."""
    try:
        parsed = json.loads(body)
        task = DeliveryTask(
            workspace_id=parsed["workspaceId"],
            event_id=parsed["eventId"],
            endpoint_id=parsed["endpointId"],
            base_attempts=int(parsed.get("baseAttempts", 0)),
        )
    except (TypeError, KeyError, ValueError) as error:
        raise ValueError("the record does not name a delivery") from error
    if not all(isinstance(value, str) for value in (task.workspace_id, task.event_id, task.endpoint_id)):
        raise ValueError("the record does not name a delivery")
    return task


class SqsDeliveryQueue:
    def __init__(self, client: Any, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def enqueue(self, tasks: Sequence[DeliveryTask]) -> None:
        for start in range(0, len(tasks), SQS_BATCH_LIMIT):
            batch = tasks[start : start + SQS_BATCH_LIMIT]
            try:
                answer = self._client.send_message_batch(
                    QueueUrl=self._queue_url,
                    Entries=[
                        {"Id": str(index), "MessageBody": task_body(task)} for index, task in enumerate(batch)
                    ],
                )
            except Exception as error:
                raise QueueUnavailable(str(error)) from error
            if answer.get("Failed"):
                raise QueueUnavailable(f"{len(answer['Failed'])} deliveries were refused by the queue")
