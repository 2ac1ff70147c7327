"""The limits' use cases: count a request against its workspace's rate, and report its usage.

A request over the rate is refused before any other work (the rate comes right after the API key).
The rate check fails open: were the limits table unreachable, requests go on uncounted (and an
operator sees `RateCheckUnavailable`), because the rate protects capacity, while the promise of
sending each accepted message once does not depend on it.
"""

from __future__ import annotations

from sendonce.clock import Clock, utc_now
from sendonce.errors import DependencyUnavailable
from sendonce.limits.model import RateDecision, Usage, next_day
from sendonce.limits.ports import LimitsStore
from sendonce.observability import logger, metrics


class RequestLimits:
    def __init__(self, store: LimitsStore, clock: Clock = utc_now) -> None:
        self._store = store
        self._clock = clock

    def check_rate(self, workspace_id: str) -> RateDecision | None:
        """This request counted in its workspace's window; None when it could not be counted."""
        try:
            limits = self._store.limits_of(workspace_id)
            decision = self._store.count_request(workspace_id, limits, self._clock())
        except DependencyUnavailable as error:
            logger.warning(
                "limits.rate_check_unavailable",
                extra={"event": "limits.rate_check_unavailable", "cause": str(error)},
            )
            metrics.add_metric(name="RateCheckUnavailable", unit="Count", value=1)
            return None
        if not decision.allowed:
            logger.info(
                "limits.rate_limited", extra={"event": "limits.rate_limited", "workspace_id": workspace_id}
            )
            metrics.add_metric(name="RateLimited", unit="Count", value=1)
        return decision

    def usage(self, workspace_id: str) -> Usage:
        now = self._clock()
        limits = self._store.limits_of(workspace_id)
        return Usage(limits, self._store.used_today(workspace_id, limits, now), next_day(now))
