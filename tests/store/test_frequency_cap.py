"""The frequency cap inside the create transaction, on every engine (moto, DynamoDB Local, the fake).

A capped create counts its message in every frame of its bucket, each conditioned on its room, in
the same transaction as the message and its lock (`sendonce.controls.cap`): N + 27 racing sends to
one recipient under a cap of N create exactly N, whatever the interleaving; a replay or a caught
duplicate counts nothing; the window slides, and a place comes back at most a tenth of the window
after a strict sliding window would give it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from sendonce.controls.cap import RecipientCap
from sendonce.messages.ports import Capped, Created, DuplicateOf, SendingStore, TiedToKey
from sendonce.suppressions.model import recipient_key

from tests.store.conftest import NOW, Draft, Engine, draft, race

RECIPIENT = "+15550100000"
WINDOW = 600  # ten minutes: buckets of a minute


def cap(limit: int, now: datetime = NOW, to: str = RECIPIENT, workspace: str = "ws_a") -> RecipientCap:
    return RecipientCap(workspace, (recipient_key(to),), limit, WINDOW, now)


def create(store: SendingStore, made: Draft, capped: RecipientCap) -> Any:
    return store.create(made.message, made.claim, made.tie, made.handoff_due_at, capped.now, cap=capped)


def test_given_a_cap_of_3_when_30_different_sends_to_one_recipient_race_then_exactly_3_are_created(
    engine: Engine,
) -> None:
    store, _ = engine.charged_store()
    drafts = [draft(body=f"race {i}") for i in range(30)]

    outcomes = race(30, lambda i: create(store, drafts[i], cap(3)))

    assert sum(isinstance(o, Created) for o in outcomes) == 3
    assert sum(isinstance(o, Capped) for o in outcomes) == 27
    assert len(engine.message_ids()) == 3


def test_given_a_full_cap_then_another_recipient_and_another_workspace_still_send(engine: Engine) -> None:
    store, _ = engine.charged_store()
    assert isinstance(create(store, draft(body="one"), cap(1)), Created)
    assert isinstance(create(store, draft(body="two"), cap(1)), Capped)

    other = draft(body="two", to="+15550100001")
    assert isinstance(create(store, other, cap(1, to="+15550100001")), Created)
    elsewhere = draft(body="two", workspace="ws_b")
    assert isinstance(create(store, elsewhere, cap(1, workspace="ws_b")), Created)


def test_given_a_cap_then_duplicates_and_replays_never_count(engine: Engine) -> None:
    store, _ = engine.charged_store()
    first = draft(body="the code is 1234", key="key-1")
    assert isinstance(create(store, first, cap(2)), Created)

    for _ in range(5):  # the same content again: caught duplicates
        assert isinstance(create(store, draft(body="the code is 1234"), cap(2)), DuplicateOf)
    for _ in range(5):  # the same key again: replays
        assert isinstance(create(store, draft(body="other", key="key-1"), cap(2)), TiedToKey)

    assert isinstance(create(store, draft(body="a second message"), cap(2)), Created)
    assert isinstance(create(store, draft(body="a third message"), cap(2)), Capped)


def test_given_a_full_cap_then_the_refusal_tells_when_a_place_comes_back(engine: Engine) -> None:
    store, _ = engine.charged_store()
    assert isinstance(create(store, draft(body="one"), cap(1)), Created)

    refused = create(store, draft(body="two"), cap(1, now=NOW + timedelta(seconds=30)))

    assert isinstance(refused, Capped)
    # Counted in NOW's minute: its place comes back when the last frame holding it ends, eleven
    # minutes after that minute began; NOW is on a minute's start.
    assert refused.retry_after_seconds == WINDOW + WINDOW // 10 - 30


@pytest.mark.parametrize(
    ("later", "created"),
    [
        (timedelta(seconds=WINDOW - 1), False),  # inside the window: a strict sliding window refuses too
        (timedelta(seconds=WINDOW + 59), False),  # within the tenth more the buckets may refuse
        (timedelta(seconds=WINDOW + 60), True),  # after it: the place is back
    ],
)
def test_given_a_cap_of_one_then_the_window_slides(engine: Engine, later: timedelta, created: bool) -> None:
    store, _ = engine.charged_store()
    assert isinstance(create(store, draft(body="first"), cap(1)), Created)

    outcome = create(store, draft(body="later", now=NOW + later), cap(1, now=NOW + later))

    assert isinstance(outcome, Created) is created


def test_given_a_cap_of_two_then_no_window_of_its_length_holds_three(engine: Engine) -> None:
    """Sends every 3 minutes under 2 in 10 minutes, over 90 buckets (frames straddle their items'
    groups more than once): whatever is created, no 10 minutes hold 3."""
    store, _ = engine.charged_store()
    created: list[datetime] = []
    for step in range(30):
        when = NOW + timedelta(minutes=3 * step, seconds=7)
        if isinstance(create(store, draft(body=f"tick {step}", now=when), cap(2, now=when)), Created):
            created.append(when)

    assert len(created) >= 12
    for i in range(len(created) - 2):
        assert created[i + 2] - created[i] >= timedelta(seconds=WINDOW)


@pytest.mark.parametrize("limit", [1, 2])
def test_given_a_count_from_a_clock_ahead_then_a_create_counts_in_that_bucket_and_the_cap_holds(
    engine: Engine, limit: int
) -> None:
    """A writer whose clock is a second ahead counted in the next bucket; one behind it, still in the
    bucket before, must not pass the cap on the frame it did not condition on: it counts in the later
    bucket."""
    store, _ = engine.charged_store()
    boundary = NOW + timedelta(minutes=1)
    assert isinstance(create(store, draft(body="ahead", now=boundary), cap(limit, now=boundary)), Created)

    behind = boundary - timedelta(seconds=1)
    second = create(store, draft(body="behind", now=behind), cap(limit, now=behind))
    third = create(store, draft(body="behind again", now=behind), cap(limit, now=behind))

    assert isinstance(second, Capped if limit == 1 else Created)
    assert isinstance(third, Capped)
