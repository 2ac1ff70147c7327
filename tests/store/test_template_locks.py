"""A send from a template's second dedup lock, on every engine (moto, DynamoDB Local, the fakes).

The lock on the template's name and data to the recipient is written in the create's one transaction
beside the content's lock: either one held by another message makes the send its duplicate, whatever
the content each version rendered; of 30 such sends at once exactly one is created; both locks are
released together, and a bulk create holds and explains them as the single create does. The same
write checks the template is still as the send rendered it (live; the latest, when it asked for it).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sendonce.limits.model import Limits, QuotaCharge
from sendonce.messages.model import Channel
from sendonce.messages.ports import (
    Created,
    DuplicateOf,
    NewMessage,
    TemplateChanged,
    TemplateInForce,
    TiedToKey,
)
from sendonce.templates.model import Template, TemplateContent
from sendonce.templates.ports import NameTaken

from tests.store.conftest import NOW, Draft, Engine, Stores, create, created, draft, only, race

OTP = ("otp", 1, {"name": "Ann", "code": "123456"})
OTP_V2 = ("otp", 2, OTP[2])
CONTENDERS = 30


def _entries(drafts: list[Draft]) -> list[NewMessage]:
    return [NewMessage(d.message, d.claim, d.handoff_due_at) for d in drafts]


def test_a_templated_message_holds_both_its_locks(engine: Engine, stores: Stores) -> None:
    message = created(stores, body="Hi Ann, 123456", template=OTP)

    assert message.template_lock_id is not None
    assert sorted(engine.locks()) == sorted(
        [(message.dedup_lock_id, message.id), (message.template_lock_id, message.id)]
    )
    assert stores.sending.get("ws_a", message.id) == message


def test_other_content_from_the_same_template_and_data_is_a_duplicate_of_the_first(
    engine: Engine, stores: Stores
) -> None:
    original = created(stores, body="Hi Ann, 123456", template=OTP)
    later = NOW + timedelta(seconds=5)

    outcome = create(stores, draft(body="Code 123456, Ann", template=OTP_V2, now=later), later)

    assert isinstance(outcome, DuplicateOf)
    assert outcome.original is not None
    assert outcome.original.id == original.id
    assert outcome.locked_at == NOW
    assert engine.message_ids() == {original.id}


def test_the_same_template_with_other_data_is_a_new_message(engine: Engine, stores: Stores) -> None:
    created(stores, body="Hi Ann, 123456", template=OTP)

    outcome = create(
        stores, draft(body="Hi Bo, 123456", template=("otp", 1, {"name": "Bo", "code": "123456"}))
    )

    assert isinstance(outcome, Created)


@pytest.mark.parametrize("round_", range(2))
def test_given_30_sends_of_one_template_and_data_at_once_whatever_they_rendered_then_one_is_created(
    engine: Engine, stores: Stores, round_: int
) -> None:
    # Each renders other words (versions published in between): only the template's lock is shared.
    drafts = [draft(body=f"round {round_} version {i}", template=OTP) for i in range(CONTENDERS)]

    answers = race(CONTENDERS, lambda i: create(stores, drafts[i]))

    winners = only(answers, Created)
    duplicates = only(answers, DuplicateOf)
    assert len(winners) == 1, answers
    assert len(duplicates) == CONTENDERS - 1, answers
    assert {d.original.id for d in duplicates} == {winners[0].message.id}
    assert engine.message_ids() == {winners[0].message.id}


def test_a_key_tie_answers_before_the_template_lock(engine: Engine, stores: Stores) -> None:
    original = created(stores, body="Hi Ann, 123456", template=OTP, key="k")

    outcome = create(stores, draft(body="Code 123456, Ann", template=OTP_V2, key="k"))

    assert isinstance(outcome, TiedToKey)
    assert outcome.original == original


def test_released_it_frees_both_locks(engine: Engine, stores: Stores) -> None:
    first = created(stores, body="Hi Ann, 123456", template=OTP)

    stores.sending.release_dedup_lock(first)

    assert engine.locks() == []
    again = create(stores, draft(body="Code 123456, Ann", template=OTP_V2))
    assert isinstance(again, Created)


def test_a_charged_create_explains_a_held_template_lock_as_a_duplicate_not_a_spent_quota(
    engine: Engine,
) -> None:
    store, _ = engine.charged_store()
    quota = QuotaCharge.of("ws_a", Limits(rate_per_second=50, daily_quota=10), NOW)
    assert quota is not None
    first = draft(body="Hi Ann, 123456", template=OTP)
    assert isinstance(
        store.create(first.message, first.claim, None, first.handoff_due_at, NOW, quota=quota), Created
    )

    second = draft(body="Code 123456, Ann", template=OTP_V2)
    outcome = store.create(second.message, second.claim, None, second.handoff_due_at, NOW, quota=quota)

    assert isinstance(outcome, DuplicateOf)
    assert outcome.original is not None
    assert outcome.original.id == first.message.id


def test_a_bulk_create_writes_and_explains_template_locks_entry_by_entry(
    engine: Engine, stores: Stores
) -> None:
    held = created(stores, body="Hi Ann, 123456", template=OTP)
    drafts = [
        draft(body="Hi Bo", to="+15550100001", template=("otp", 1, {"name": "Bo"})),
        draft(body="Code 123456, Ann", template=OTP_V2),  # its template lock is held
        draft(body="plain words", to="+15550100002"),
        draft(body="Hi Cy", to="+15550100003", template=("otp", 1, {"name": "Cy"})),
    ]

    outcomes = stores.sending.create_many(_entries(drafts), NOW)

    assert [type(o) for o in outcomes] == [Created, DuplicateOf, Created, Created]
    duplicate = outcomes[1]
    assert isinstance(duplicate, DuplicateOf)
    assert duplicate.original is not None
    assert duplicate.original.id == held.id
    written = {o.message.id for o in outcomes if isinstance(o, Created)}
    assert engine.message_ids() == written | {held.id}
    assert len(engine.locks()) == 2 + 2 + 1 + 2


def test_a_charged_bulk_create_of_templated_entries_counts_each_new_one_once(engine: Engine) -> None:
    store, _ = engine.charged_store()
    quota = QuotaCharge.of("ws_a", Limits(rate_per_second=50, daily_quota=100), NOW)
    assert quota is not None
    drafts = [draft(body=f"Hi {i}", to=f"+1555010{i:04d}", template=("otp", 1, {"n": i})) for i in range(40)]

    outcomes = store.create_many(_entries(drafts), NOW, quota)

    assert all(isinstance(o, Created) for o in outcomes), outcomes
    assert len(engine.locks()) == 80


# ---------------------------------------------------------------------------- the template's check
def _otp(stores: Stores) -> None:
    template = Template("ws_a", "otp", Channel("sms"), 1, TemplateContent(body="Hi {{ name }}"), NOW)
    assert not isinstance(stores.templates.create(template), NameTaken)


def _create_checked(stores: Stores, made: Draft, in_force: TemplateInForce) -> object:
    return stores.sending.create(
        made.message, made.claim, made.tie, made.handoff_due_at, NOW, template=in_force
    )


def test_a_create_checks_in_its_write_that_the_template_is_as_it_was_rendered(
    engine: Engine, stores: Stores
) -> None:
    _otp(stores)
    assert isinstance(
        _create_checked(stores, draft(body="a", template=OTP), TemplateInForce("otp", 1, True)), Created
    )

    stores.templates.add_version("ws_a", "otp", TemplateContent(body="Hello {{ name }}"), NOW)
    data = ("otp", 1, {"name": "Bo"})

    stale_latest = _create_checked(stores, draft(body="b", template=data), TemplateInForce("otp", 1, True))
    asked_for_one = _create_checked(stores, draft(body="c", template=data), TemplateInForce("otp", 1, False))

    assert isinstance(stale_latest, TemplateChanged)
    assert isinstance(asked_for_one, Created)


def test_a_create_from_a_deleted_template_is_refused_in_its_write(engine: Engine, stores: Stores) -> None:
    _otp(stores)
    assert stores.templates.delete("ws_a", "otp", NOW)

    outcome = _create_checked(stores, draft(body="a", template=OTP), TemplateInForce("otp", 1, False))

    assert isinstance(outcome, TemplateChanged)
    assert engine.message_ids() == set()
    assert engine.locks() == []


def test_a_held_lock_answers_before_a_changed_template(engine: Engine, stores: Stores) -> None:
    _otp(stores)
    first = _create_checked(stores, draft(body="a", template=OTP), TemplateInForce("otp", 1, True))
    assert isinstance(first, Created)
    stores.templates.add_version("ws_a", "otp", TemplateContent(body="Hello {{ name }}"), NOW)

    outcome = _create_checked(stores, draft(body="b", template=OTP_V2), TemplateInForce("otp", 1, True))

    assert isinstance(outcome, DuplicateOf)
