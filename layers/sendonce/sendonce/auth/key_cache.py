"""A found API key's workspace, kept per execution environment for a short time.

The invariant: an entry is a key that the store found good, keyed by the key's SHA-256 (the raw
key is never held), and it is answered from memory only until `ttl` has passed on the injected
clock. Nothing else is kept: an unknown or revoked key is looked up again on every request, and a
store that could not be read raises through, so an outage is never remembered as an answer. At
most `max_entries` keys are kept, the least recently used dropped first.

What this costs: a key revoked in the store keeps working, for at most `ttl`, in an execution
environment that found it good before. Why misses are not kept: every wrong key a caller makes up
is a new entry, so remembering them would let anyone push the good keys out of a bounded cache;
and a repeated wrong key costs one read, as it did before any cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime, timedelta

from msgspec import Struct

from sendonce.auth.api_keys import ApiKeyStore
from sendonce.clock import Clock, utc_now

DEFAULT_MAX_ENTRIES = 1_000


class _Found(Struct, frozen=True):
    workspace_id: str
    found_at: datetime


class CachedApiKeyStore:
    """An `ApiKeyStore` that answers a found key from memory for `ttl`; everything else from `store`."""

    def __init__(
        self,
        store: ApiKeyStore,
        ttl: timedelta,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Clock = utc_now,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._store = store
        self._ttl = ttl
        self._max_entries = max_entries
        self._clock = clock
        self._found: OrderedDict[str, _Found] = OrderedDict()
        # The local stack and the tests call one environment's handler from several threads.
        self._lock = threading.Lock()

    @property
    def ttl(self) -> timedelta:
        return self._ttl

    def workspace_for(self, key_hash: str) -> str | None:
        if self._ttl <= timedelta(0):
            return self._store.workspace_for(key_hash)
        now = self._clock()
        with self._lock:
            found = self._found.get(key_hash)
            # A clock that went back is no reason to keep an entry longer.
            if found is not None and found.found_at <= now < found.found_at + self._ttl:
                self._found.move_to_end(key_hash)
                return found.workspace_id
            self._found.pop(key_hash, None)
        workspace = self._store.workspace_for(key_hash)  # raises when the store cannot be read
        if workspace is not None:
            with self._lock:
                self._found[key_hash] = _Found(workspace, now)
                self._found.move_to_end(key_hash)
                while len(self._found) > self._max_entries:
                    self._found.popitem(last=False)
        return workspace

    def save(self, key_hash: str, workspace_id: str) -> None:
        self._store.save(key_hash, workspace_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._found)
