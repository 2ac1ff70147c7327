"""boto3 clients, configured as sendonce needs them. The functions' entry points build them, for their
composition roots (`sendonce.entrypoints`), and keep them; nothing else does.

boto3 is imported here, lazily, so a cold start pays for it only when a client is needed.

Every client of the process comes from one boto3 session: a session reads and keeps the SDK's
endpoint rules and service descriptions, so a second session would read them all again (on a cold
start, as long as a client). A session is not safe to share between threads while it builds a
client (its clients are), so clients are built one at a time.

A client that a function's first request may never need (the API function's SQS client: a send
does not call SQS) is a `client_on_first_use`: it is built, once, by its first call.

A composition root's `build` takes the `Clients` it builds with: `client` in a function, a test's own
in a test (a fault injected, the clients counted), so no test patches a module to change them.
"""

from __future__ import annotations

import threading
from functools import cache
from typing import Any, Protocol

_BUILDING = threading.Lock()


@cache
def _session() -> Any:
    import boto3  # noqa: PLC0415

    return boto3.session.Session()


def client(service: str, *, timeout_seconds: float | None = None, sdk_retries: bool = True) -> Any:
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
        # A presigned S3 URL signed with Signature Version 4 (botocore's default for S3 presigning is
        # version 2, which buckets made since 2020 refuse, and which signs the Content-Type): the
        # campaigns' upload URL then takes a PUT of any Content-Type.
        signature_version="s3v4" if service == "s3" else None,
    )
    with _BUILDING:
        return _session().client(service, config=config)


class Clients(Protocol):
    """Builds one AWS client for `service`: `client` is the one every function builds with."""

    def __call__(
        self, service: str, *, timeout_seconds: float | None = None, sdk_retries: bool = True
    ) -> Any:
        """A new client of `service`, with these timeouts and retries."""
        ...


class _ClientOnFirstUse:
    """Stands for one client, which it builds (once, whichever thread asks first) on first use."""

    def __init__(self, build: Clients, service: str, options: dict[str, Any]) -> None:
        self._build = build
        self._service = service
        self._options = options
        self._client: Any = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # never a client's operation; and no recursion before __init__
            raise AttributeError(name)
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._build(self._service, **self._options)
        return getattr(self._client, name)


def client_on_first_use(
    service: str, *, timeout_seconds: float | None = None, sdk_retries: bool = True, build: Clients = client
) -> Any:
    """`build(...)` (`client`), called when one of its client's operations is first called: a cold
    start that never calls it never pays for building it (about 8 ms a client)."""
    options = {"timeout_seconds": timeout_seconds, "sdk_retries": sdk_retries}
    return _ClientOnFirstUse(build, service, options)
