"""Time, in one place, so that tests can move it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]
# Seconds left in an invocation.
TimeLeft = Callable[[], float]


def utc_now() -> datetime:
    return datetime.now(UTC)


def rfc3339(moment: datetime) -> str:
    """Millisecond precision with a `Z`: sortable as text, and what every client parses."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
