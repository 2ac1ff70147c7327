"""A campaign's recipient list in S3: one JSON Lines object a campaign, under its workspace's prefix
(`campaigns/<workspace>/<campaign>.jsonl`), uploaded with a presigned PUT or stored by the API for
recipients given inline. Read whole once by the plan (streamed), then by byte range, a page each."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from sendonce.campaigns.ports import Upload
from sendonce.errors import DependencyUnavailable

# A presigned upload URL is good for an hour.
UPLOAD_SECONDS = 3600
# The plan reads the list in parts of this many bytes.
READ_BYTES = 1024 * 1024


def object_key(workspace_id: str, campaign_id: str) -> str:
    return f"campaigns/{workspace_id}/{campaign_id}.jsonl"


def _code(error: Exception) -> str:
    return str((getattr(error, "response", None) or {}).get("Error", {}).get("Code", ""))


class S3RecipientFiles:
    def __init__(self, client: Any, bucket: str) -> None:
        self._client = client
        self._bucket = bucket

    def upload_url(self, workspace_id: str, campaign_id: str, now: datetime) -> Upload:
        try:
            url = self._client.generate_presigned_url(
                "put_object",
                Params={"Bucket": self._bucket, "Key": object_key(workspace_id, campaign_id)},
                ExpiresIn=UPLOAD_SECONDS,
                HttpMethod="PUT",
            )
        except Exception as error:
            raise DependencyUnavailable(str(error)) from error
        return Upload(url=url, expires_at=now + timedelta(seconds=UPLOAD_SECONDS))

    def put(self, workspace_id: str, campaign_id: str, body: bytes) -> None:
        try:
            self._client.put_object(Bucket=self._bucket, Key=object_key(workspace_id, campaign_id), Body=body)
        except Exception as error:
            raise DependencyUnavailable(str(error)) from error

    def size(self, workspace_id: str, campaign_id: str) -> int | None:
        try:
            head = self._client.head_object(Bucket=self._bucket, Key=object_key(workspace_id, campaign_id))
        except Exception as error:
            if _code(error) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise DependencyUnavailable(str(error)) from error
        return int(head["ContentLength"])

    def lines(self, workspace_id: str, campaign_id: str) -> Iterator[tuple[int, bytes]]:
        try:
            body = self._client.get_object(Bucket=self._bucket, Key=object_key(workspace_id, campaign_id))[
                "Body"
            ]
        except Exception as error:
            raise DependencyUnavailable(str(error)) from error
        offset, rest = 0, b""
        while True:
            part = body.read(READ_BYTES)
            if not part:
                break
            rest += part
            *whole, rest = rest.split(b"\n")
            for line in whole:
                yield offset, line.removesuffix(b"\r")
                offset += len(line) + 1
        if rest:
            yield offset, rest.removesuffix(b"\r")

    def read(self, workspace_id: str, campaign_id: str, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        try:
            response = self._client.get_object(
                Bucket=self._bucket,
                Key=object_key(workspace_id, campaign_id),
                Range=f"bytes={start}-{end - 1}",
            )
            data: bytes = response["Body"].read()
        except Exception as error:
            raise DependencyUnavailable(str(error)) from error
        return data
