"""Each function's dependencies are one object, replaced in a test with one call.

The API function's real handler runs here on in-memory fakes (no sockets, no AWS): the route, the
preflight and the use case are the real ones, only the object the composition root holds differs.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sendonce import composition
from sendonce.api import dependencies
from sendonce.api.app import handle
from sendonce.messages.service import MessageService

from tests.support.lambda_context import FakeLambdaContext
from tests.unit.unit_fakes import (
    FakeQueue,
    InMemoryApiKeys,
    InMemoryStore,
    ManualClock,
    fake_api_dependencies,
)

EVENTS = Path(__file__).resolve().parents[2] / "events"


@pytest.fixture
def fakes() -> Iterator[tuple[InMemoryStore, FakeQueue]]:
    store, queue = InMemoryStore(), FakeQueue()
    messages = MessageService(
        store=store, queue=queue, dedup_window=timedelta(minutes=15), clock=ManualClock()
    )

    def never(**_: Any) -> dict[str, Any]:
        raise AssertionError("no key was sent")

    dependencies.root.use(fake_api_dependencies(messages, InMemoryApiKeys.of(), send_once=never))
    yield store, queue
    composition.reset_all()


def _call(name: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    event = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    if body is not None:
        event["body"] = json.dumps(body)
    response = handle(event, FakeLambdaContext())  # type: ignore[arg-type]
    return response["statusCode"], json.loads(response["body"])


def test_the_api_handler_runs_on_the_object_a_test_put_in_its_root(
    fakes: tuple[InMemoryStore, FakeQueue],
) -> None:
    store, queue = fakes
    status, body = _call("api_send_sms.json", {"channel": "sms", "to": "+1 555 010 0000", "body": "hi"})
    assert status == 201
    assert list(store.messages) == [body["message"]["id"]]
    assert queue.enqueued == []  # handed over from the stream, not by the request
    assert len(store.stream) == 1

    status, again = _call("api_send_sms.json", {"channel": "sms", "to": "+15550100000", "body": "hi"})
    assert status == 200
    assert again["duplicateOnly"] is True
    assert len(store.messages) == 1


def test_reset_all_forgets_every_root() -> None:
    built: list[int] = []
    root = composition.Root(lambda: built.append(1) or len(built))
    assert root.get() == 1
    assert root.get() == 1  # kept for the life of the execution environment
    composition.reset_all()
    assert root.get() == 2  # built again from the settings, as after a redeploy


def test_a_root_is_built_on_a_random_sequence_of_its_own() -> None:
    """Environments resumed from one SnapStart snapshot share its `random` state until a root is built."""
    random.seed(15)
    from_the_snapshot = [random.random() for _ in range(3)]

    random.seed(15)
    drawn = composition.Root(lambda: [random.random() for _ in range(3)]).get()

    assert drawn != from_the_snapshot
