"""The daily quota inside the create transaction, on moto and on DynamoDB Local.

A charged create takes one unit of one quota shard under its cap, in the same transaction as the
message and its lock: exactly the quota is accepted under a race, a held lock is a duplicate
before it is a spent quota, a shard busy with another transaction sends the create to another
shard, and a bulk create counts each new entry once.
"""

from __future__ import annotations

from typing import Any

from sendonce.adapters.dynamodb_limits import DynamoDbLimits
from sendonce.adapters.dynamodb_sending import DynamoDbSendingStore
from sendonce.limits.model import Limits, QuotaCharge
from sendonce.messages.ports import Created, DuplicateOf, NewMessage, QuotaSpent

from tests.store.conftest import NOW, TABLE, Draft, Engine, conflicts, draft, race

LIMITS_TABLE = "LimitsTable"


def charged_store(engine: Engine) -> tuple[DynamoDbSendingStore, DynamoDbLimits]:
    limits = DynamoDbLimits(engine.client, LIMITS_TABLE, defaults=Limits(1, 0))
    return DynamoDbSendingStore(engine.client, TABLE, quota=limits), limits


def charge(quota: int, workspace: str = "ws_a") -> QuotaCharge:
    made = QuotaCharge.of(workspace, Limits(rate_per_second=50, daily_quota=quota), NOW)
    assert made is not None
    return made


def create(store: DynamoDbSendingStore, made: Draft, quota: QuotaCharge) -> Any:
    return store.create(made.message, made.claim, made.tie, made.handoff_due_at, NOW, quota=quota)


def entries(drafts: list[Draft]) -> list[NewMessage]:
    return [NewMessage(d.message, d.claim, d.handoff_due_at) for d in drafts]


def used(engine: Engine, limits: DynamoDbLimits, quota: QuotaCharge) -> int:
    return limits.used_today(quota.workspace_id, quota.limits, NOW)


def test_given_a_quota_of_n_when_n_plus_50_creates_race_then_exactly_n_are_created(engine: Engine) -> None:
    store, limits = charged_store(engine)
    quota = charge(30)
    drafts = [draft(body=f"race {i}") for i in range(80)]

    outcomes = race(80, lambda i: create(store, drafts[i], quota))

    assert sum(isinstance(o, Created) for o in outcomes) == 30
    assert sum(isinstance(o, QuotaSpent) for o in outcomes) == 50
    assert len(engine.message_ids()) == 30
    assert used(engine, limits, quota) == 30


def test_given_a_spent_quota_then_a_held_lock_is_still_a_duplicate(engine: Engine) -> None:
    store, limits = charged_store(engine)
    quota = charge(1)
    first = draft(body="the one")
    assert isinstance(create(store, first, quota), Created)

    again = create(store, draft(body="the one"), quota)
    new = create(store, draft(body="another"), quota)

    assert isinstance(again, DuplicateOf)
    assert again.original is not None
    assert again.original.id == first.message.id
    assert isinstance(new, QuotaSpent)
    assert used(engine, limits, quota) == 1


def test_given_a_busy_shard_then_the_create_goes_to_another(engine: Engine) -> None:
    store, limits = charged_store(engine)
    quota = charge(10)
    busy = conflicts(engine.client, times=1, only_with="QUOTA#")

    outcome = create(store, draft(body="around the busy shard"), quota)

    assert isinstance(outcome, Created)
    assert len(busy) == 2  # the busy try, then the one on the next shard
    assert used(engine, limits, quota) == 1


def test_given_a_bulk_create_past_the_quota_then_each_new_entry_counts_once(engine: Engine) -> None:
    store, limits = charged_store(engine)
    quota = charge(5)
    held = draft(body="entry 0")
    assert isinstance(create(store, held, quota), Created)
    drafts = [draft(body=f"entry {i}") for i in range(8)]

    outcomes = store.create_many(
        [NewMessage(d.message, d.claim, d.handoff_due_at) for d in drafts], NOW, quota
    )

    assert [type(o).__name__ for o in outcomes] == ["DuplicateOf"] + ["Created"] * 4 + ["QuotaSpent"] * 3
    assert used(engine, limits, quota) == 5


def test_given_a_bulk_create_within_the_quota_then_one_transaction_counts_it(engine: Engine) -> None:
    store, limits = charged_store(engine)
    quota = charge(10_000)
    drafts = [draft(body=f"bulk {i}") for i in range(60)]

    outcomes = store.create_many(
        [NewMessage(d.message, d.claim, d.handoff_due_at) for d in drafts], NOW, quota
    )

    assert all(isinstance(o, Created) for o in outcomes)
    assert used(engine, limits, quota) == 60
    shards = [
        i for i in engine.client.scan(TableName=LIMITS_TABLE)["Items"] if i["pk"]["S"].startswith("QUOTA#")
    ]
    assert sum(int(shard["used"]["N"]) for shard in shards) == 60
    assert len(shards) <= 2  # one counter update a transaction (49 entries, then 11)


def test_given_a_shard_without_room_for_a_chunk_then_another_shard_takes_it(engine: Engine) -> None:
    store, limits = charged_store(engine)
    quota = charge(400)  # 4 shards of 100
    for shard in range(4):  # each shard already holds 60: none has room for 49 more, each for 40
        engine.client.put_item(
            TableName=LIMITS_TABLE,
            Item={"pk": {"S": f"QUOTA#ws_a#{quota.day}#{shard}"}, "sk": {"S": "count"}, "used": {"N": "60"}},
        )
    drafts = [draft(body=f"near the end {i}") for i in range(49)]

    outcomes = store.create_many(entries(drafts), NOW, quota)

    assert all(isinstance(o, Created) for o in outcomes)  # one by one, each where there is room
    assert used(engine, limits, quota) == 240 + 49


def test_given_every_shard_full_then_a_create_learns_it_in_a_few_calls_and_the_next_in_one(
    engine: Engine,
) -> None:
    store, _ = charged_store(engine)
    quota = charge(1_000)  # 10 shards of 100
    for shard in range(10):
        engine.client.put_item(
            TableName=LIMITS_TABLE,
            Item={"pk": {"S": f"QUOTA#ws_a#{quota.day}#{shard}"}, "sk": {"S": "count"}, "used": {"N": "100"}},
        )
    calls: list[str] = []
    engine.client.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))

    first = create(store, draft(body="past the end"), quota)
    calls_first = list(calls)
    calls.clear()
    second = create(store, draft(body="past the end, again"), quota)

    assert isinstance(first, QuotaSpent)
    assert isinstance(second, QuotaSpent)
    assert calls_first == ["TransactWriteItems"] * 3 + ["BatchGetItem"]  # not one a shard
    assert calls == ["TransactWriteItems"]  # known full: one try, which would still see a duplicate


def test_given_a_small_quotas_one_shard_busy_then_the_create_waits_its_turn(engine: Engine) -> None:
    store, limits = charged_store(engine)
    quota = charge(50)  # under 200: one shard
    busy = conflicts(engine.client, times=3, only_with="QUOTA#")

    outcome = create(store, draft(body="after three conflicts"), quota)

    assert isinstance(outcome, Created)
    assert len(busy) == 4
    assert used(engine, limits, quota) == 1
