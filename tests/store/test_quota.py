"""The daily quota inside the create transaction, on every engine (its shards on moto and DynamoDB
Local).

A charged create takes one unit of one quota shard under its cap, in the same transaction as the
message and its lock: exactly the quota is accepted under a race, a held lock is a duplicate
before it is a spent quota, a shard busy with another transaction sends the create to another
shard, and a bulk create counts each new entry once.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sendonce.limits.model import Limits, LimitsChange, LimitsTimeline, QuotaCharge
from sendonce.limits.ports import LimitsStore
from sendonce.messages.ports import Created, DuplicateOf, NewMessage, QuotaSpent, SendingStore

from tests.store.conftest import LIMITS_TABLE, NOW, Draft, DynamoDbEngine, Engine, conflicts, draft, race


def charged_store(engine: Engine) -> tuple[SendingStore, LimitsStore]:
    return engine.charged_store()


def charge(quota: int, workspace: str = "ws_a") -> QuotaCharge:
    made = QuotaCharge.of(workspace, Limits(rate_per_second=50, daily_quota=quota), NOW)
    assert made is not None
    return made


def create(store: SendingStore, made: Draft, quota: QuotaCharge) -> Any:
    return store.create(made.message, made.claim, made.tie, made.handoff_due_at, NOW, quota=quota)


def entries(drafts: list[Draft]) -> list[NewMessage]:
    return [NewMessage(d.message, d.claim, d.handoff_due_at) for d in drafts]


def used(engine: Engine, limits: LimitsStore, quota: QuotaCharge) -> int:
    return limits.used_today(quota.workspace_id, LimitsTimeline(Limits(50, quota.plan.quota)), NOW)


def seed(engine: DynamoDbEngine, quota: QuotaCharge, shard: int, used: int, left: int) -> None:
    """A shard of the charge's plan that has taken `used` and has `left` to take."""
    engine.client.put_item(
        TableName=LIMITS_TABLE,
        Item={
            "pk": {"S": f"QUOTA#{quota.workspace_id}#{quota.day}#{shard}"},
            "sk": {"S": "count"},
            "used": {"N": str(used)},
            "left": {"N": str(left)},
            "plan": {"S": quota.plan.stamp},
        },
    )


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


def test_given_a_busy_shard_then_the_create_goes_to_another(dynamodb_engine: DynamoDbEngine) -> None:
    store, limits = charged_store(dynamodb_engine)
    quota = charge(10)
    busy = conflicts(dynamodb_engine.client, times=1, only_with="QUOTA#")

    outcome = create(store, draft(body="around the busy shard"), quota)

    assert isinstance(outcome, Created)
    assert len(busy) == 2  # the busy try, then the one on the next shard
    assert used(dynamodb_engine, limits, quota) == 1


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


def test_given_a_bulk_create_within_the_quota_then_one_transaction_counts_it(
    dynamodb_engine: DynamoDbEngine,
) -> None:
    store, limits = charged_store(dynamodb_engine)
    quota = charge(10_000)
    drafts = [draft(body=f"bulk {i}") for i in range(60)]

    outcomes = store.create_many(
        [NewMessage(d.message, d.claim, d.handoff_due_at) for d in drafts], NOW, quota
    )

    assert all(isinstance(o, Created) for o in outcomes)
    assert used(dynamodb_engine, limits, quota) == 60
    shards = [
        i
        for i in dynamodb_engine.client.scan(TableName=LIMITS_TABLE)["Items"]
        if i["pk"]["S"].startswith("QUOTA#")
    ]
    assert sum(int(shard["used"]["N"]) for shard in shards) == 60
    assert len(shards) <= 2  # one counter update a transaction (49 entries, then 11)


def test_given_a_shard_without_room_for_a_chunk_then_another_shard_takes_it(
    dynamodb_engine: DynamoDbEngine,
) -> None:
    store, limits = charged_store(dynamodb_engine)
    quota = charge(400)  # 4 shards of 100
    for shard in range(4):  # each shard already holds 60: none has room for 49 more, each for 40
        seed(dynamodb_engine, quota, shard, used=60, left=40)
    drafts = [draft(body=f"near the end {i}") for i in range(49)]

    outcomes = store.create_many(entries(drafts), NOW, quota)

    assert all(isinstance(o, Created) for o in outcomes)  # one by one, each where there is room
    assert used(dynamodb_engine, limits, quota) == 240 + 49


def test_given_every_shard_full_then_a_create_learns_it_in_a_few_calls_and_the_next_in_one(
    dynamodb_engine: DynamoDbEngine,
) -> None:
    store, _ = charged_store(dynamodb_engine)
    quota = charge(1_000)  # 10 shards of 100
    for shard in range(10):
        seed(dynamodb_engine, quota, shard, used=100, left=0)
    calls: list[str] = []
    dynamodb_engine.client.meta.events.register(
        "before-call.dynamodb", lambda model, **_: calls.append(model.name)
    )

    first = create(store, draft(body="past the end"), quota)
    calls_first = list(calls)
    calls.clear()
    second = create(store, draft(body="past the end, again"), quota)

    assert isinstance(first, QuotaSpent)
    assert isinstance(second, QuotaSpent)
    assert calls_first == ["TransactWriteItems"] * 3 + ["BatchGetItem"]  # not one a shard
    assert calls == ["TransactWriteItems"]  # known full: one try, which would still see a duplicate


def test_given_a_small_quotas_one_shard_busy_then_the_create_waits_its_turn(
    dynamodb_engine: DynamoDbEngine,
) -> None:
    store, limits = charged_store(dynamodb_engine)
    quota = charge(50)  # under 200: one shard
    busy = conflicts(dynamodb_engine.client, times=3, only_with="QUOTA#")

    outcome = create(store, draft(body="after three conflicts"), quota)

    assert isinstance(outcome, Created)
    assert len(busy) == 4
    assert used(dynamodb_engine, limits, quota) == 1


# ---------------------------------------------------------------------------- a quota changed mid-day
CHANGE = int((NOW + timedelta(seconds=8)).timestamp())  # when the operator's change takes effect
BEFORE, AFTER = NOW, NOW + timedelta(seconds=9)


def changed(default: int, quota: int, at: int = CHANGE) -> LimitsTimeline:
    """A workspace on the stack's default quota until `at`, then on `quota`."""
    return LimitsTimeline(Limits(50, default), (LimitsChange(at, rate_per_second=None, daily_quota=quota),))


def charge_at(timeline: LimitsTimeline, when: datetime, workspace: str = "ws_a") -> QuotaCharge:
    made = QuotaCharge.of(workspace, timeline, when)
    assert made is not None
    return made


def usage(limits: LimitsStore, timeline: LimitsTimeline, when: datetime = AFTER) -> int:
    return limits.used_today("ws_a", timeline, when)


def spend(store: SendingStore, quota: QuotaCharge, count: int, label: str) -> None:
    """`count` new messages under `quota`, in bulk: a busy morning, quickly."""
    outcomes = store.create_many(entries([draft(body=f"{label} {i}") for i in range(count)]), NOW, quota)
    assert all(isinstance(outcome, Created) for outcome in outcomes), outcomes


def around_a_change(
    store: SendingStore, quota: QuotaCharge, label: str, singles: int = 30, batch: int = 60
) -> tuple[int, int]:
    """`singles` creates racing one bulk create of `batch` entries: how many of each were created."""
    drafts = [draft(body=f"{label} single {i}") for i in range(singles)]
    bulk = [draft(body=f"{label} bulk {i}") for i in range(batch)]

    def contender(index: int) -> list[Any]:
        if index == singles:
            return list(store.create_many(entries(bulk), NOW, quota))
        return [create(store, drafts[index], quota)]

    outcomes = race(singles + 1, contender)
    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    results = [list(o) for o in outcomes if not isinstance(o, BaseException)]
    created = [sum(isinstance(one, Created) for one in result) for result in results]
    for result in results:
        assert all(isinstance(one, Created | QuotaSpent) for one in result), result
    return sum(created[:singles]), created[singles]


def test_given_a_lowered_quota_then_the_day_keeps_its_usage_and_admits_only_what_is_left(
    engine: Engine,
) -> None:
    store, limits = charged_store(engine)
    timeline = changed(default=100_000, quota=62)  # 512 shards in the morning, one after the change
    spend(store, charge_at(timeline, BEFORE), 61, "morning")
    assert usage(limits, timeline, BEFORE) == 61

    singles, batch = around_a_change(store, charge_at(timeline, AFTER), "after")

    assert usage(limits, timeline) == 62  # the day's units are kept whatever the quota's split
    assert singles + batch == 1  # 121 accepted on a quota of 62, before


def test_given_a_quota_lowered_to_one_more_than_used_then_thirty_racing_sends_take_one(
    engine: Engine,
) -> None:
    store, limits = charged_store(engine)
    timeline = changed(default=100_000, quota=486)
    spend(store, charge_at(timeline, BEFORE), 485, "morning")

    outcomes = race(30, lambda i: create(store, draft(body=f"after {i}"), charge_at(timeline, AFTER)))

    assert sum(isinstance(o, Created) for o in outcomes) == 1
    assert sum(isinstance(o, QuotaSpent) for o in outcomes) == 29
    assert usage(limits, timeline) == 486


def test_given_a_raised_quota_then_only_the_difference_is_admitted(engine: Engine) -> None:
    store, limits = charged_store(engine)
    timeline = changed(default=150, quota=200)
    spend(store, charge_at(timeline, BEFORE), 150, "morning")
    assert isinstance(create(store, draft(body="one too many"), charge_at(timeline, BEFORE)), QuotaSpent)

    singles, batch = around_a_change(store, charge_at(timeline, AFTER), "after", batch=120)

    assert singles + batch == 50  # 100 more, and 250 used of 200, before
    assert usage(limits, timeline) == 200


def test_given_the_quota_lowered_below_use_then_raised_the_day_is_exact_each_time(engine: Engine) -> None:
    store, limits = charged_store(engine)
    lowered, raised = CHANGE, CHANGE + 60
    timeline = LimitsTimeline(
        Limits(50, 1_000),  # ten shards of 100
        (LimitsChange(lowered, None, 250), LimitsChange(raised, None, 400)),
    )
    spend(store, charge_at(timeline, BEFORE), 300, "morning")

    after_lowering = around_a_change(store, charge_at(timeline, AFTER), "lowered")
    after_raising = around_a_change(
        store, charge_at(timeline, AFTER + timedelta(seconds=60)), "raised", batch=120
    )

    assert after_lowering == (0, 0)  # 300 used of 250: nothing more
    assert sum(after_raising) == 100  # 400 less the 300 used
    assert usage(limits, timeline, AFTER + timedelta(seconds=60)) == 400


def test_given_creates_on_both_sides_of_a_change_then_the_day_never_passes_the_quota_in_force(
    engine: Engine,
) -> None:
    store, limits = charged_store(engine)
    timeline = changed(default=100, quota=95)
    spend(store, charge_at(timeline, BEFORE), 90, "morning")
    # Stragglers of the old plan (their transactions sent before the change) race the new plan's.
    old, new = charge_at(timeline, BEFORE), charge_at(timeline, AFTER)

    outcomes = race(40, lambda i: create(store, draft(body=f"straddle {i}"), old if i % 2 else new))

    created = sum(isinstance(o, Created) for o in outcomes)
    assert all(isinstance(o, Created | QuotaSpent) for o in outcomes), outcomes
    assert usage(limits, timeline) == 90 + created
    assert created <= 10  # never past the old quota, which was in force until the change
    assert isinstance(create(store, draft(body="later"), charge_at(timeline, AFTER)), QuotaSpent) or (
        usage(limits, timeline) < 95
    )
    assert usage(limits, timeline) <= max(95, 90 + created)


def test_given_a_planner_that_died_mid_plan_then_the_next_create_plans_the_day(
    dynamodb_engine: DynamoDbEngine,
) -> None:
    store, limits = charged_store(dynamodb_engine)
    timeline = changed(default=1_000, quota=500)
    spend(store, charge_at(timeline, BEFORE), 40, "morning")
    quota = charge_at(timeline, AFTER)
    for shard in range(10):  # frozen by a planner that never came back, its lock expired
        dynamodb_engine.client.update_item(
            TableName=LIMITS_TABLE,
            Key={"pk": {"S": f"QUOTA#ws_a#{quota.day}#{shard}"}, "sk": {"S": "count"}},
            UpdateExpression="SET #plan = :frozen, #left = :zero ADD used :zero",
            ExpressionAttributeNames={"#plan": "plan", "#left": "left"},
            ExpressionAttributeValues={":frozen": {"S": "replanning:gone"}, ":zero": {"N": "0"}},
        )
    dynamodb_engine.client.put_item(
        TableName=LIMITS_TABLE,
        Item={
            "pk": {"S": f"QUOTAPLAN#ws_a#{quota.day}"},
            "sk": {"S": "plan"},
            "owner": {"S": "gone"},
            "until": {"N": "0"},
        },
    )

    outcome = create(store, draft(body="after the crash"), quota)

    assert isinstance(outcome, Created)
    assert usage(limits, timeline) == 41
    shards = [
        i
        for i in dynamodb_engine.client.scan(TableName=LIMITS_TABLE)["Items"]
        if i["pk"]["S"].startswith("QUOTA#")
    ]
    assert {shard["plan"]["S"] for shard in shards} == {quota.plan.stamp}
    assert sum(int(shard["left"]["N"]) for shard in shards) == 500 - 41


def test_given_an_environment_behind_a_change_then_it_charges_under_the_later_plan(engine: Engine) -> None:
    store, limits = charged_store(engine)
    timeline = changed(default=1_000, quota=120)
    spend(store, charge_at(timeline, BEFORE), 100, "morning")
    assert isinstance(create(store, draft(body="re-plans"), charge_at(timeline, AFTER)), Created)

    behind = race(30, lambda i: create(store, draft(body=f"behind {i}"), charge_at(timeline, BEFORE)))

    assert sum(isinstance(o, Created) for o in behind) == 19  # what the later plan had left
    assert usage(limits, timeline) == 120


def test_given_two_defaults_in_force_at_once_then_the_day_stays_under_the_larger_and_settles_on_the_smaller(
    dynamodb_engine: DynamoDbEngine,
) -> None:
    """A deploy that changes the stack's default quota replaces execution environments one by one:
    for a while both defaults are in force, each plan fresh, and neither knows of the other."""
    store, limits = charged_store(dynamodb_engine)
    old_default, new_default = LimitsTimeline(Limits(50, 300)), LimitsTimeline(Limits(50, 200))
    spend(store, charge_at(old_default, BEFORE), 150, "old environments")
    spend(store, charge_at(new_default, BEFORE), 10, "new environments")

    outcomes = race(
        60,
        lambda i: create(
            store, draft(body=f"rollout {i}"), charge_at(old_default if i % 2 else new_default, BEFORE)
        ),
    )
    after = [create(store, draft(body=f"new only {i}"), charge_at(new_default, BEFORE)) for i in range(50)]

    created = sum(isinstance(o, Created) for o in [*outcomes, *after])
    total = usage(limits, new_default, BEFORE)
    assert total == 160 + created
    assert total <= 300  # never past the larger default
    assert isinstance(after[-1], QuotaSpent)  # and, the old environments gone, none past the smaller
    shards = [
        i
        for i in dynamodb_engine.client.scan(TableName=LIMITS_TABLE)["Items"]
        if i["pk"]["S"].startswith("QUOTA#")
    ]
    assert {shard["plan"]["S"] for shard in shards} == {charge_at(new_default, BEFORE).plan.stamp}
