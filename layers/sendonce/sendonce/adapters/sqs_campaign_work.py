"""The campaigns' fan-out work on SQS (the CampaignQueue): a plan, a page, or a cancel's sweep, each a
small JSON record. A record is deleted only once its work's progress is written, so a crash brings
it back; every kind of work is safe to run twice (`sendonce.campaigns.fanout`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from msgspec import convert, to_builtins

from sendonce.adapters.sqs_queue import SQS_BATCH_LIMIT, within_sqs_delay
from sendonce.campaigns.model import PageWork
from sendonce.errors import DependencyUnavailable


class SqsCampaignWork:
    def __init__(self, client: Any, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def _send(self, body: Mapping[str, Any], delay_seconds: int = 0) -> None:
        try:
            self._client.send_message(
                QueueUrl=self._queue_url,
                MessageBody=json.dumps(body, separators=(",", ":")),
                DelaySeconds=within_sqs_delay(delay_seconds),
            )
        except Exception as error:
            raise DependencyUnavailable(str(error)) from error

    def plan(self, workspace_id: str, campaign_id: str, delay_seconds: int = 0) -> None:
        self._send({"kind": "plan", "workspaceId": workspace_id, "campaignId": campaign_id}, delay_seconds)

    def sweep(self, workspace_id: str, campaign_id: str, cursor: str | None, delay_seconds: int = 0) -> None:
        body = {"kind": "sweep", "workspaceId": workspace_id, "campaignId": campaign_id, "cursor": cursor}
        self._send(body, delay_seconds)

    def pages(self, pages: Sequence[PageWork]) -> None:
        for start in range(0, len(pages), SQS_BATCH_LIMIT):
            entries = [
                {"Id": str(position), "MessageBody": json.dumps({"kind": "page", "page": to_builtins(page)})}
                for position, page in enumerate(pages[start : start + SQS_BATCH_LIMIT])
            ]
            for _ in range(3):
                try:
                    response = self._client.send_message_batch(QueueUrl=self._queue_url, Entries=entries)
                except Exception as error:
                    raise DependencyUnavailable(str(error)) from error
                failed = {entry["Id"] for entry in response.get("Failed", [])}
                entries = [entry for entry in entries if entry["Id"] in failed]
                if not entries:
                    break
            if entries:
                raise DependencyUnavailable("SQS refused some of a campaign's pages")


def page_of(body: Mapping[str, Any]) -> PageWork:
    """The page a record names (ValueError when it names none)."""
    try:
        return convert(body["page"], PageWork)
    except Exception as error:
        raise ValueError("not a page of a campaign") from error
