"""The campaigns' store, and a campaign's bulk creates, on every engine (moto, DynamoDB Local, the
fakes): a status change only from the statuses it names, with the gate in the same write; a create
behind a closed gate writes nothing; a recipient's second message in a campaign is MadeBefore, never a
caught duplicate; a page's progress moves once from what it was read as, however many race; the
page's counts are added once; a campaign completes once, and only when every planned page is done.
"""

from __future__ import annotations

from datetime import timedelta

from msgspec.structs import replace
from sendonce.campaigns.model import (
    Campaign,
    CampaignStatus,
    Counts,
    LineError,
    PageProgress,
    PageWork,
    new_campaign_id,
)
from sendonce.campaigns.ports import Transition
from sendonce.messages.model import Channel
from sendonce.messages.ports import CampaignGate, Created, GateClosed, MadeBefore, NewMessage
from sendonce.messages.recipients import normalise_phone
from sendonce.messages.service import SendCommand, claim_of, new_message

from tests.store.conftest import NOW, Engine, Stores, only, race
from tests.unit.unit_fakes import TEST_KEYED_HASH

S = CampaignStatus
WINDOW = timedelta(minutes=15)


def campaign(workspace: str = "ws_a", offset_ms: int = 0) -> Campaign:
    return Campaign(
        id=new_campaign_id(NOW + timedelta(milliseconds=offset_ms)),
        workspace_id=workspace,
        name="spring",
        channel="sms",
        status=S.DRAFT,
        content={"body": "Hello"},
        rate_per_second=100,
        created_at=NOW,
    )


def started(stores: Stores, made: Campaign) -> Campaign:
    stores.campaigns.create(made)
    now = stores.campaigns.transition(made, Transition(S.SENDING, frozenset({S.DRAFT}), NOW, gate_open=True))
    assert now is not None
    return now


def entry(made: Campaign, to: str, body: str = "Hello") -> NewMessage:
    command = SendCommand(
        workspace_id=made.workspace_id,
        channel=Channel("sms"),
        recipient=normalise_phone(to),
        body=body,
        campaign_id=made.id,
    )
    return NewMessage(
        new_message(command, NOW),
        claim_of(command, NOW + WINDOW, TEST_KEYED_HASH),
        NOW + timedelta(minutes=2),
    )


def page(made: Campaign, number: int = 0) -> PageWork:
    return PageWork(made.workspace_id, made.id, number, 0, 100, number * 500 + 1)


def test_a_campaign_is_its_workspaces_alone(stores: Stores) -> None:
    mine = campaign()
    stores.campaigns.create(mine)
    assert stores.campaigns.get("ws_a", mine.id) == mine
    assert stores.campaigns.get("ws_b", mine.id) is None
    assert stores.campaigns.page("ws_b", 10, None).campaigns == []
    assert [c.id for c in stores.campaigns.page("ws_a", 10, None).campaigns] == [mine.id]


def test_campaigns_are_paged_newest_first(stores: Stores) -> None:
    made = [campaign(offset_ms=i) for i in range(3)]
    for one in made:
        stores.campaigns.create(one)
    first = stores.campaigns.page("ws_a", 2, None)
    assert [c.id for c in first.campaigns] == [made[2].id, made[1].id]
    rest = stores.campaigns.page("ws_a", 2, first.next_cursor)
    assert [c.id for c in rest.campaigns] == [made[0].id]
    assert rest.next_cursor is None


def test_a_status_changes_only_from_the_statuses_it_names(stores: Stores) -> None:
    made = started(stores, campaign())
    assert stores.campaigns.transition(made, Transition(S.SENDING, frozenset({S.DRAFT}), NOW)) is None
    paused = stores.campaigns.transition(made, Transition(S.PAUSED, frozenset({S.SENDING}), NOW))
    assert paused is not None
    assert paused.status is S.PAUSED
    assert paused.started_at == NOW


def test_a_closed_gate_writes_nothing_and_an_open_one_writes_all(engine: Engine, stores: Stores) -> None:
    made = campaign()
    stores.campaigns.create(made)  # a draft: its gate is closed
    gate = CampaignGate(made.workspace_id, made.id)
    closed = stores.sending.create_many(
        [entry(made, "+15550100001"), entry(made, "+15550100002")], NOW, None, gate
    )
    assert closed == [GateClosed(), GateClosed()]
    assert engine.message_ids() == set()
    opened = stores.campaigns.transition(
        made, Transition(S.SENDING, frozenset({S.DRAFT}), NOW, gate_open=True)
    )
    assert opened is not None
    written = stores.sending.create_many(
        [entry(opened, "+15550100001"), entry(opened, "+15550100002")], NOW, None, gate
    )
    assert all(isinstance(outcome, Created) for outcome in written)
    assert len(engine.message_ids()) == 2
    stores.campaigns.transition(opened, Transition(S.CANCELED, frozenset({S.SENDING}), NOW))
    after = stores.sending.create_many([entry(opened, "+15550100003")], NOW, None, gate)
    assert after == [GateClosed()]
    assert len(engine.message_ids()) == 2


def test_a_recipients_second_message_in_a_campaign_is_made_before(engine: Engine, stores: Stores) -> None:
    made = started(stores, campaign())
    gate = CampaignGate(made.workspace_id, made.id)
    (first,) = stores.sending.create_many([entry(made, "+15550100001")], NOW, None, gate)
    assert isinstance(first, Created)
    # Another content to the same recipient in the same campaign (a page read again after an edit
    # of its template, say): the campaign's lock answers, and nothing is counted as a duplicate.
    (again,) = stores.sending.create_many([entry(made, "+1 555 010 0001", body="Other")], NOW, None, gate)
    assert isinstance(again, MadeBefore)
    assert again.original is not None
    assert again.original.id == first.message.id
    assert engine.message_ids() == {first.message.id}
    # Another campaign may send them the same words again: its own lock, its own message.
    other = started(stores, campaign(offset_ms=1))
    (elsewhere,) = stores.sending.create_many(
        [entry(other, "+15550100001", body="Third")], NOW, None, CampaignGate(other.workspace_id, other.id)
    )
    assert isinstance(elsewhere, Created)


def test_thirty_workers_on_one_page_move_its_progress_once(stores: Stores) -> None:
    made = started(stores, campaign())
    work = page(made)
    seen = stores.campaigns.progress(work)
    moved = PageProgress(next_line=50, counts=Counts(accepted=50), version=1)
    answers = race(30, lambda _: stores.campaigns.save_progress(work, seen, moved))
    assert answers.count(True) == 1
    assert answers.count(False) == 29
    assert stores.campaigns.progress(work) == moved


def test_a_page_is_counted_once_and_the_campaign_completes_once(stores: Stores) -> None:
    made = started(stores, campaign())
    stores.campaigns.planned(made.workspace_id, made.id, pages=2, total=7)
    first, second = page(made, 0), page(made, 1)
    assert stores.campaigns.complete_if_done(made.workspace_id, made.id, NOW) is None
    seen = stores.campaigns.progress(first)
    assert stores.campaigns.finish_page(first, seen, Counts(accepted=3, invalid=1))
    assert not stores.campaigns.finish_page(first, seen, Counts(accepted=3, invalid=1))  # a second worker
    assert stores.campaigns.complete_if_done(made.workspace_id, made.id, NOW) is None  # a page to go
    assert stores.campaigns.finish_page(second, stores.campaigns.progress(second), Counts(duplicates=3))
    ends = race(10, lambda _: stores.campaigns.complete_if_done(made.workspace_id, made.id, NOW))
    (completed,) = only(ends, Campaign)
    assert completed.status is S.COMPLETED
    assert completed.counts == Counts(total=7, accepted=3, duplicates=3, invalid=1)
    assert stores.campaigns.progress(first).done


def test_a_page_parks_only_while_its_campaign_is_not_sending(stores: Stores) -> None:
    made = started(stores, campaign())
    work = page(made)
    seen = stores.campaigns.progress(work)
    parked = PageProgress(next_line=20, counts=Counts(accepted=20), parked=True, version=1)
    assert not stores.campaigns.save_progress(work, seen, parked)  # sending: it goes on instead
    assert stores.campaigns.parked(made.workspace_id, made.id) == []
    stores.campaigns.transition(made, Transition(S.PAUSED, frozenset({S.SENDING}), NOW))
    assert stores.campaigns.save_progress(work, seen, parked)
    assert stores.campaigns.parked(made.workspace_id, made.id) == [work]
    assert stores.campaigns.progress(work) == parked


def test_line_errors_are_paged_by_line(stores: Stores) -> None:
    made = started(stores, campaign())
    errors = [
        LineError(line, "validation_error", "bad", [{"field": "to", "message": "bad"}]) for line in (9, 2, 5)
    ]
    stores.campaigns.add_errors(made.workspace_id, made.id, errors)
    stores.campaigns.add_errors(made.workspace_id, made.id, errors[:1])  # written again: the same
    first = stores.campaigns.errors(made.workspace_id, made.id, 2, None)
    assert [e.line for e in first.errors] == [2, 5]
    rest = stores.campaigns.errors(made.workspace_id, made.id, 2, first.next_cursor)
    assert [e.line for e in rest.errors] == [9]
    assert rest.errors[0] == replace(errors[0])
    assert stores.campaigns.errors("ws_b", made.id, 10, None).errors == []
