"""boto3 clients, configured as sendonce needs them. Composition roots build them and keep them.

boto3 is imported here, lazily, so a cold start pays for it only when a client is needed.
"""

from __future__ import annotations

from typing import Any


def client(service: str, *, timeout_seconds: float | None = None, sdk_retries: bool = True) -> Any:
    import boto3  # noqa: PLC0415
    from botocore.config import Config  # noqa: PLC0415

    config = Config(
        connect_timeout=min(timeout_seconds or 3, 3),
        read_timeout=timeout_seconds or 10,
        # A provider call whose answer was lost must not be re-sent by the SDK behind our back.
        retries={"mode": "standard", "total_max_attempts": 3 if sdk_retries else 1},
        tcp_keepalive=True,
        # A listing reads its index's shards 16 at a time (adapters/dynamodb_listing.SHARD_READERS),
        # each on a connection of its own.
        max_pool_connections=16,
    )
    return boto3.session.Session().client(service, config=config)
