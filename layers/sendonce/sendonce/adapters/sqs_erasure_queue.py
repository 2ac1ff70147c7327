"""Erasures' jobs on SQS (the ErasureQueue): a small JSON record naming the erasure, never the address.

A record is deleted only once its run returned; a run is safe to repeat (`sendonce.erasures.service`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sendonce.adapters.sqs_queue import within_sqs_delay
from sendonce.erasures.ports import ErasureJob
from sendonce.errors import DependencyUnavailable


class SqsErasureQueue:
    def __init__(self, client: Any, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def enqueue(self, job: ErasureJob, delay_seconds: int = 0) -> None:
        body = {"workspaceId": job.workspace_id, "erasureId": job.erasure_id}
        try:
            self._client.send_message(
                QueueUrl=self._queue_url,
                MessageBody=json.dumps(body, separators=(",", ":")),
                DelaySeconds=within_sqs_delay(delay_seconds),
            )
        except Exception as error:
            raise DependencyUnavailable(str(error)) from error


def job_of(body: Mapping[str, Any]) -> ErasureJob:
    """The job a record names (ValueError when it names none)."""
    workspace_id, erasure_id = body.get("workspaceId"), body.get("erasureId")
    if not isinstance(workspace_id, str) or not isinstance(erasure_id, str):
        raise ValueError("not an erasure's job")
    return ErasureJob(workspace_id, erasure_id)
