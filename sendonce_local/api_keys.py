"""API keys of the local stack: `SENDONCE_LOCAL_API_KEYS` (stored as `sendonce create-api-key`
stores a key: `sendonce_cli.api_keys.store_api_key`)."""

from __future__ import annotations

from sendonce_local.constants import DEFAULT_LOCAL_API_KEYS


def parse_local_api_keys(text: str | None) -> list[tuple[str, str]]:
    """`workspace:key,workspace:key` as (workspace, key) pairs."""
    pairs: list[tuple[str, str]] = []
    for raw in (text if text is not None else DEFAULT_LOCAL_API_KEYS).split(","):
        item = raw.strip()
        if not item:
            continue
        workspace, separator, key = item.partition(":")
        if not separator or not workspace.strip() or not key.strip():
            raise ValueError(f"SENDONCE_LOCAL_API_KEYS: {item!r} is not workspace:key")
        pairs.append((workspace.strip(), key.strip()))
    return pairs
