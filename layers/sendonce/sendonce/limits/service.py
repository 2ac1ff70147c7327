"""The limits' use cases: count a request against its workspace's rate, and report its usage.

A request over the rate is refused before any other work (the rate comes right after the API key).
The rate check fails open: were the limits table unreachable, requests go on uncounted (and an
operator sees `RateCheckUnavailable`), because the rate protects capacity, while the promise of
sending each accepted message once does not depend on it.

The rate is taken in leases. This execution environment (one `RequestLimits`, built by its
composition root) takes tokens from a shard of the workspace's window in one atomic `ADD`, and
spends them on its next requests of that window without a call. A request is admitted only on a
token the shared counter granted, so all environments together never admit more than a window's
quota. Unspent tokens die with their window, or when the workspace's limits change (which they do
only at a window's start, the same for every environment). A shard found
full is not asked again in its window (its count only grows), and once every shard is, a request is
refused without a call. The `RateLimit` field's `r` is then an estimate: what the counter had left
at the last lease, plus this environment's unspent tokens.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

from msgspec import Struct, field

from sendonce.clock import Clock, utc_now
from sendonce.errors import DependencyUnavailable
from sendonce.limits.model import Grant, Ledger, Limits, RateDecision, Usage, Window, next_day
from sendonce.limits.ports import LimitsStore
from sendonce.observability import logger, metrics


class _Lease(Struct):
    """One workspace's tokens in this environment, for one window and the limits they were taken under."""

    window: int
    limits: Limits
    tokens: int = 0  # granted, not yet spent
    shared_left: int = 0  # what the counter had left at the last lease (all shards, estimated)
    admitted: int = 0  # requests admitted in `window`
    admitted_before: int = 0  # in the window before it
    full: set[int] = field(default_factory=set)  # shards found at their cap in `window`

    def admit(self, window: Window) -> RateDecision:
        """One token spent on this request; `remaining` estimated (never below 0 nor above the quota)."""
        self.tokens -= 1
        self.admitted += 1
        quota = self.limits.window_quota
        remaining = min(quota, self.shared_left + self.tokens)
        return RateDecision(True, quota, remaining, window.reset_seconds)

    def refusal(self, window: Window) -> RateDecision:
        return RateDecision(False, self.limits.window_quota, 0, window.reset_seconds)

    def next_shard(self, shard_of: Callable[[int], int]) -> int | None:
        """A random shard not found full in this window; None once every one is."""
        open_shards = [shard for shard in range(self.limits.rate_shards) if shard not in self.full]
        return open_shards[shard_of(len(open_shards))] if open_shards else None

    def take(self, shard: int, grant: Grant) -> None:
        if grant.shard_full:
            self.full.add(shard)
        self.tokens += grant.granted
        self.shared_left = min(self.limits.window_quota, grant.left * self.limits.rate_shards)


class RequestLimits:
    def __init__(
        self,
        store: LimitsStore,
        clock: Clock = utc_now,
        shard_of: Callable[[int], int] = random.randrange,
    ) -> None:
        self._store = store
        self._clock = clock
        self._shard_of = shard_of
        # This environment's leases by workspace: the request thread and a batch's threads share them.
        self._leases: dict[str, _Lease] = {}
        self._pruned_at = 0  # the window in which leases of ended windows were last dropped
        self._lock = threading.Lock()

    def check_rate(self, workspace_id: str) -> RateDecision | None:
        """This request counted in its workspace's window; None when it could not be counted."""
        now = self._clock()
        window = Window.at(now)
        try:
            # A change takes effect at a window's start, so this is the window's limits.
            limits = self._store.timeline(workspace_id).at(now)
        except DependencyUnavailable as error:
            _unavailable(error)
            return None
        with self._lock:
            lease = self._lease_of(workspace_id, limits, window)
            if lease.tokens > 0:
                return lease.admit(window)
            shard = lease.next_shard(self._shard_of)
            asked = limits.lease_size(max(lease.admitted, lease.admitted_before))
            refusal = lease.refusal(window)
        if shard is None:  # every shard of the window is full: refused without a call
            return _refused(workspace_id, refusal)
        try:
            count = self._store.take_lease(workspace_id, window, shard, asked)
        except DependencyUnavailable as error:
            _unavailable(error)
            return None
        with self._lock:
            lease = self._lease_of(workspace_id, limits, window)
            lease.take(shard, Grant(asked, count, limits.rate_shard_cap(shard)))
            if lease.tokens > 0:
                return lease.admit(window)
            refusal = lease.refusal(window)
        return _refused(workspace_id, refusal)

    def _lease_of(self, workspace_id: str, limits: Limits, window: Window) -> _Lease:
        """The workspace's lease of `window` under `limits`, begun afresh when either changed."""
        self._prune(window)
        lease = self._leases.get(workspace_id)
        if lease is not None and lease.window == window.number and lease.limits == limits:
            return lease
        if lease is not None and lease.window > window.number:
            return _Lease(window.number, limits)  # a thread late from an ended window: nothing to keep
        before = 0
        if lease is not None and lease.window == window.number - 1:
            before = lease.admitted
        fresh = _Lease(window.number, limits, admitted_before=before)
        if lease is not None and lease.window == window.number:  # the limits changed: tokens go
            fresh.admitted, fresh.admitted_before = lease.admitted, lease.admitted_before
        self._leases[workspace_id] = fresh
        return fresh

    def _prune(self, window: Window) -> None:
        """Once a window, forget the workspaces not seen in this window or the last."""
        if window.number != self._pruned_at:
            self._pruned_at = window.number
            self._leases = {
                workspace: lease
                for workspace, lease in self._leases.items()
                if lease.window >= window.number - 1
            }

    def rate_per_second(self, workspace_id: str) -> int:
        """The workspace's request rate in force now."""
        return self._store.timeline(workspace_id).at(self._clock()).rate_per_second

    def usage(self, workspace_id: str) -> Usage:
        now = self._clock()
        timeline = self._store.timeline(workspace_id)
        return Usage(
            timeline.at(now),
            self._store.used_today(workspace_id, timeline, now),
            next_day(now),
            sms_segments_today=self._store.used_today(workspace_id, timeline, now, Ledger.SMS_SEGMENTS),
        )


def _unavailable(error: DependencyUnavailable) -> None:
    logger.warning(
        "limits.rate_check_unavailable",
        extra={"event": "limits.rate_check_unavailable", "cause": str(error)},
    )
    metrics.add_metric(name="RateCheckUnavailable", unit="Count", value=1)


def _refused(workspace_id: str, decision: RateDecision) -> RateDecision:
    logger.info("limits.rate_limited", extra={"event": "limits.rate_limited", "workspace_id": workspace_id})
    metrics.add_metric(name="RateLimited", unit="Count", value=1)
    return decision
