"""The daily sms budget inside the create transaction, on every engine: a second ledger of the
quota's kind, whose units are a message's segments (CONTRACT section 18).

Under a race the day never accepts more segments than the budget, and a refused create would not
have fitted; a create charged on both the quota and the budget takes both or neither; a bulk create
takes its entries' segments in its transactions, entry by entry near the budget's end.
"""

from __future__ import annotations

from typing import Any

from sendonce.limits.model import Ledger, Limits, LimitsTimeline, QuotaCharge
from sendonce.limits.ports import LimitsStore
from sendonce.messages.ports import Created, NewMessage, QuotaSpent, SendingStore, SmsBudgetSpent

from tests.store.conftest import NOW, Draft, Engine, draft, race

WORKSPACE = "ws_a"


def budget(segments: int, units: int = 1) -> QuotaCharge:
    made = QuotaCharge.of(
        WORKSPACE,
        Limits(rate_per_second=50, daily_quota=0, daily_sms_segments=segments),
        NOW,
        Ledger.SMS_SEGMENTS,
    )
    assert made is not None
    return made.taking(units)


def quota(messages: int) -> QuotaCharge:
    made = QuotaCharge.of(WORKSPACE, Limits(rate_per_second=50, daily_quota=messages), NOW)
    assert made is not None
    return made


def create(
    store: SendingStore, made: Draft, sms_budget: QuotaCharge, charge: QuotaCharge | None = None
) -> Any:
    return store.create(
        made.message, made.claim, made.tie, made.handoff_due_at, NOW, quota=charge, sms_budget=sms_budget
    )


def segments_used(limits: LimitsStore, segments: int) -> int:
    timeline = LimitsTimeline(Limits(50, 0, daily_sms_segments=segments))
    return limits.used_today(WORKSPACE, timeline, NOW, Ledger.SMS_SEGMENTS)


def test_given_a_budget_of_10_when_40_single_segment_creates_race_then_exactly_10_are_created(
    engine: Engine,
) -> None:
    store, limits = engine.charged_store()
    drafts = [draft(body=f"race {i}", to=f"+1555010{i:04d}") for i in range(40)]

    outcomes = race(40, lambda i: create(store, drafts[i], budget(10)))

    assert sum(isinstance(o, Created) for o in outcomes) == 10
    assert sum(isinstance(o, SmsBudgetSpent) for o in outcomes) == 30
    assert len(engine.message_ids()) == 10
    assert segments_used(limits, 10) == 10


def test_given_one_and_two_segment_creates_racing_then_the_accepted_fit_and_no_refused_one_would(
    engine: Engine,
) -> None:
    store, limits = engine.charged_store()
    units = [1 + i % 2 for i in range(30)]
    drafts = [draft(body=f"mixed {i}", to=f"+1555011{i:04d}") for i in range(30)]

    outcomes = race(30, lambda i: create(store, drafts[i], budget(11, units[i])))

    accepted = sum(u for u, o in zip(units, outcomes, strict=True) if isinstance(o, Created))
    refused = [u for u, o in zip(units, outcomes, strict=True) if isinstance(o, SmsBudgetSpent)]
    assert len(refused) + sum(isinstance(o, Created) for o in outcomes) == 30
    assert accepted <= 11
    assert all(accepted + u > 11 for u in refused)  # no refused create would have fitted
    assert segments_used(limits, 11) == accepted


def test_given_both_the_quota_and_the_budget_then_a_create_takes_both_or_neither(engine: Engine) -> None:
    store, limits = engine.charged_store()
    one, two, three = (draft(body=f"both {i}", to=f"+1555012{i:04d}") for i in range(3))

    assert isinstance(create(store, one, budget(3, 2), quota(10)), Created)
    over_budget = create(store, two, budget(3, 2), quota(10))
    within = create(store, three, budget(3, 1), quota(10))

    assert isinstance(over_budget, SmsBudgetSpent)
    assert isinstance(within, Created)
    assert segments_used(limits, 3) == 3
    timeline = LimitsTimeline(Limits(50, 10))
    assert limits.used_today(WORKSPACE, timeline, NOW) == 2  # the refused create took no unit of the quota

    spent_quota = create(store, draft(body="past the quota", to="+15550129999"), budget(100), quota(2))
    assert isinstance(spent_quota, QuotaSpent)


def test_given_a_bulk_create_past_the_budget_then_each_entry_takes_its_segments_once(engine: Engine) -> None:
    store, limits = engine.charged_store()
    drafts = [draft(body=f"bulk {i}", to=f"+1555013{i:04d}") for i in range(8)]
    entries = [
        NewMessage(d.message, d.claim, d.handoff_due_at, segments=1 + (i == 0)) for i, d in enumerate(drafts)
    ]

    outcomes = store.create_many(entries, NOW, None, None, budget(5))

    assert [type(o).__name__ for o in outcomes] == ["Created"] * 4 + ["SmsBudgetSpent"] * 4
    assert segments_used(limits, 5) == 5
