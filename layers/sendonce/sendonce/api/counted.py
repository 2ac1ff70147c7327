"""What the API counts for the promise's daily counts (`sendonce.activity.counts`) where it answers:
a replay, and a send refused for a suppressed recipient.

Neither writes anything else, so the count is the one call they add; a new message's answer adds
none (it is counted from the table's stream). A count never changes an answer: the activity's use
case swallows a failed write (`ActivityService.count`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sendonce.errors import RecipientSuppressed

if TYPE_CHECKING:
    from sendonce.api.dependencies import ApiDependencies


def _count(deps: ApiDependencies, workspace: str, kind_name: str, count: int = 1) -> None:
    from sendonce.activity.counts import PromiseKind  # noqa: PLC0415  (only when there is something to count)

    activity = deps.activity
    if activity is not None and count:
        activity.count(workspace, PromiseKind(kind_name), count)


@contextmanager
def refusals_counted(deps: ApiDependencies, workspace: str) -> Iterator[None]:
    """A send refused for a suppressed recipient, counted as it goes out as a 422."""
    try:
        yield
    except RecipientSuppressed:
        _count(deps, workspace, "refusedSuppressed")
        raise


def count_send_answer(deps: ApiDependencies, workspace: str, answer: dict[str, Any]) -> None:
    """A send's answer: a replay is counted."""
    if answer.get("replayed"):
        _count(deps, workspace, "replays")


def count_batch_answer(deps: ApiDependencies, workspace: str, answer: dict[str, Any]) -> None:
    """A batch's answer: replayed whole, one replay; else each item replayed and each refused."""
    if answer.get("replayed"):
        _count(deps, workspace, "replays")
        return
    results = json.loads(answer["body"]).get("results") or []
    _count(deps, workspace, "replays", sum(1 for result in results if result.get("replayed")))
    refused = sum(
        1 for result in results if (result.get("error") or {}).get("code") == "recipient_suppressed"
    )
    _count(deps, workspace, "refusedSuppressed", refused)
