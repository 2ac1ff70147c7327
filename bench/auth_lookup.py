"""The API function's own API key check, counted and timed, on a cache miss and on a hit.

No authorizer runs: the API function resolves the bearer key itself, through the key store of its
composition root (a cache of the keys it found good, SENDONCE_API_KEY_CACHE_SECONDS, in front of
ApiKeysTable). So the check costs no invocation of its own: a miss is one `GetItem` inside the API
invocation, a hit none. A miss is measured on a fresh root (a new execution environment), its
client's connection opened beforehand by the read of a key that exists nowhere, which no cache
keeps: as in a warm environment meeting a key for the first time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sendonce import composition
from sendonce.auth.api_keys import ApiKeyStore, hash_api_key, resolve_workspace
from sendonce.entrypoints import api

from bench.call_counter import COUNTER
from bench.local_stack import API_KEY, WORKSPACE
from bench.probes import Invocations
from bench.quiet import silenced_stdout

UNKNOWN_KEY = "sk_bench_no_such_key"


@dataclass
class KeyLookups:
    miss: Invocations = field(default_factory=Invocations)
    hit: Invocations = field(default_factory=Invocations)


def fresh_key_store() -> ApiKeyStore:
    """The API function's key store as a new execution environment has it: nothing found yet.

    Call it once `start_stack()` has set the functions' environment (this process's)."""
    composition.reset_all()
    keys = api.root.get().api_keys
    keys.workspace_for(hash_api_key(UNKNOWN_KEY))  # the connection, opened outside the measurement
    return keys


def look_up(keys: ApiKeyStore, into: Invocations | None = None) -> Invocations:
    """One check of the bench key, as the API's preflight makes it, counted and timed."""
    out = into if into is not None else Invocations()
    with COUNTER.counting() as log:
        started = time.perf_counter()
        workspace = resolve_workspace(keys, f"Bearer {API_KEY}")
        out.seconds.append(time.perf_counter() - started)
    if workspace != WORKSPACE:
        raise RuntimeError(f"the API key check did not find the bench key's workspace: {workspace!r}")
    out.calls.append(len(log))
    out.operations = log.operations()
    return out


def measure_key_lookups(times: int) -> KeyLookups:
    """`times` misses, each on a fresh key store, each followed by a hit on the same store."""
    out = KeyLookups()
    try:
        with silenced_stdout():
            for _ in range(times):
                keys = fresh_key_store()
                look_up(keys, out.miss)
                look_up(keys, out.hit)
    finally:
        composition.reset_all()  # no root keeps the store this measurement built
    return out
