"""Unit fixtures: in-memory fakes of the ports and a clock the tests move."""

from __future__ import annotations

import pytest

from tests.unit.unit_fakes import FakeQueue, InMemoryStore, ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store() -> InMemoryStore:
    return InMemoryStore()


@pytest.fixture
def queue() -> FakeQueue:
    return FakeQueue()
