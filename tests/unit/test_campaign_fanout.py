"""The fan-out's promise under any list and any crash (`sendonce.campaigns.fanout`), on the fakes:
each distinct recipient gets at most one message, each valid one exactly one (the first line that
names it), and the counts end equal to the messages, however the work crashes and is redelivered.

Pages of 7 lines and chunks of 3 here, so small lists span many pages and chunks. A crash raises in
one adapter call (before or after its write) and its record comes back, as SQS's visibility timeout
brings back a record whose invocation died.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace
from sendonce.api.campaign_lines import parse_line, recipient_key, refusal
from sendonce.campaigns import fanout
from sendonce.campaigns.fanout import FanOut
from sendonce.campaigns.model import Campaign
from sendonce.campaigns.service import CampaignService
from sendonce.messages.batch import BatchSender

from tests.unit.campaign_fakes import (
    FakeCampaignPace,
    FakeCampaignWork,
    InMemoryCampaignStore,
    InMemoryRecipientFiles,
    QueuedWork,
)
from tests.unit.unit_fakes import FakeLimits, InMemoryStore, ManualClock

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
WORKSPACE = "ws_fanout"
# Three spellings of each of the pool's numbers: the dedup guard reads them as one recipient.
SPELLINGS = ("+1415555{:04d}", "+1 415 555 {:04d}", "+1 (415) 555-{:04d}")
STEPS = (
    ("files", "lines"),
    ("files", "read"),
    ("send", ""),
    ("store", "save_progress"),
    ("store", "finish_page"),
    ("store", "planned"),
    ("store", "complete_if_done"),
    ("work", "pages"),
)


class Crash(RuntimeError):
    pass


@dataclass
class World:
    store: InMemoryStore
    campaigns: InMemoryCampaignStore
    files: InMemoryRecipientFiles
    work: FakeCampaignWork
    service: CampaignService
    fan_out: FanOut
    crashes: list[tuple[str, str, bool]] = field(default_factory=list)  # (adapter, method, after) to come

    def crashing(self) -> FanOut:
        """The fan-out, its adapters raising at the crashes to come (each once, in turn)."""

        def hook(adapter: str, method: str, call: Callable[..., Any]) -> Callable[..., Any]:
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                if self.crashes and self.crashes[0][:2] == (adapter, method):
                    _, _, after = self.crashes.pop(0)
                    if after:
                        call(*args, **kwargs)
                    raise Crash(f"{adapter}.{method}")
                return call(*args, **kwargs)

            return wrapped

        class Proxy:
            def __init__(self, real: Any, adapter: str) -> None:
                self._real, self._adapter = real, adapter

            def __getattr__(self, name: str) -> Any:
                return hook(self._adapter, name, getattr(self._real, name))

        fan_out = self.fan_out
        return replace(
            fan_out,
            files=Proxy(fan_out.files, "files"),
            store=Proxy(fan_out.store, "store"),
            work=Proxy(fan_out.work, "work"),
            send=hook("send", "", fan_out.send),
        )

    def drain(self) -> int:
        """Every queued record run, a crashed one brought back, until the queue is empty."""
        crashing, ran = self.crashing(), 0
        while self.work.queued:
            for queued in self.work.taken():
                ran += 1
                assert ran < 5_000, "the fan-out keeps handing work on"
                try:
                    run(crashing, queued)
                except Crash:
                    self.work.queued.append(queued)  # its record comes back
        return ran


def run(fan_out: FanOut, queued: QueuedWork) -> None:
    if queued.kind == "plan":
        fan_out.plan(queued.workspace_id, queued.campaign_id)
    elif queued.kind == "page":
        assert queued.page is not None
        fan_out.run_page(queued.page)
    else:
        fan_out.sweep(queued.workspace_id, queued.campaign_id, queued.cursor)


@pytest.fixture(autouse=True)
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fanout, "PAGE_LINES", 7)
    monkeypatch.setattr(fanout, "CHUNK_LINES", 3)


def world(limits: FakeLimits | None = None) -> World:
    store, clock = InMemoryStore(), ManualClock(NOW)
    campaigns = InMemoryCampaignStore(gates=store.gates)
    files, work = InMemoryRecipientFiles(), FakeCampaignWork()
    sender = BatchSender(
        store=store,
        dedup_window=timedelta(minutes=15),
        clock=clock,
        suppressions=store.suppressions,
        limits=limits,
    )
    fan_out = FanOut(
        store=campaigns,
        files=files,
        work=work,
        pace=FakeCampaignPace(unlimited=True),
        send=sender.send_many,
        parse=parse_line,
        recipient_key=recipient_key,
        refusal=refusal,
        messages=store,
        clock=clock,
    )
    return World(store, campaigns, files, work, CampaignService(campaigns, files, work, clock=clock), fan_out)


def start(w: World, lines: list[Any]) -> Campaign:
    body = b"".join(
        (line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n" for line in lines
    )
    campaign, _ = w.service.create(
        WORKSPACE,
        name="c",
        channel="sms",
        content={"body": "Hello"},
        rate_per_second=1000,
        send_at=None,
        recipients=body,
        inline_count=len(lines),
    )
    w.service.start(WORKSPACE, campaign.id)
    return campaign


def expected(lines: list[Any]) -> tuple[list[str], int]:
    """The recipients a list sends to (each first valid occurrence), and its repeats."""
    seen: set[str] = set()
    sent: list[str] = []
    repeats = 0
    for line in lines:
        if not isinstance(line, dict) or not line["to"].startswith("+"):
            continue  # no recipient the plan can read: invalid, and no one's repeat
        number = line["to"].replace(" ", "").replace("(", "").replace(")", "").replace("-", "")
        if number in seen:
            repeats += 1
            continue
        seen.add(number)
        if "extra" not in line:
            sent.append(number)
    return sent, repeats


line_strategy = st.one_of(
    st.builds(lambda n, s: {"to": SPELLINGS[s].format(n)}, st.integers(0, 12), st.integers(0, 2)),
    st.builds(lambda n: {"to": SPELLINGS[0].format(n), "extra": True}, st.integers(0, 12)),
    st.just(b"not json"),
    st.just({"to": "nobody"}),
)
crash_strategy = st.lists(
    st.tuples(st.sampled_from(STEPS), st.booleans()).map(lambda c: (c[0][0], c[0][1], c[1])), max_size=4
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(line_strategy, min_size=1, max_size=40), crashes=crash_strategy)
def test_any_list_under_any_crashes_sends_each_recipient_once_and_counts_the_truth(
    lines: list[Any], crashes: list[tuple[str, str, bool]]
) -> None:
    w = world()
    campaign = start(w, lines)
    w.crashes = list(crashes)
    w.drain()
    messages = [m for m in w.store.messages.values() if m.campaign_id == campaign.id]
    sent, repeats = expected(lines)
    assert sorted(m.to for m in messages) == sorted(sent)
    done = w.campaigns.get(WORKSPACE, campaign.id)
    assert done is not None
    assert done.status.value == "completed"
    counts = done.counts
    assert counts.total == len(lines)
    assert counts.accepted == len(messages)
    assert counts.duplicates == repeats
    assert counts.accepted + counts.duplicates + counts.suppressed + counts.invalid == counts.total


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(line_strategy, min_size=8, max_size=40), pause_after=st.integers(0, 12))
def test_a_pause_at_any_point_then_a_resume_sends_each_recipient_once(
    lines: list[Any], pause_after: int
) -> None:
    w = world()
    campaign = start(w, lines)
    ran = 0
    while w.work.queued:
        for queued in w.work.taken():
            now = w.campaigns.get(WORKSPACE, campaign.id)
            if ran == pause_after and now is not None and not now.finished:
                w.service.pause(WORKSPACE, campaign.id)
            ran += 1
            run(w.fan_out, queued)
    paused = w.campaigns.get(WORKSPACE, campaign.id)
    assert paused is not None
    if not paused.finished:
        assert paused.status.value == "paused"
        w.service.resume(WORKSPACE, campaign.id)
    w.drain()
    messages = [m for m in w.store.messages.values() if m.campaign_id == campaign.id]
    sent, _ = expected(lines)
    assert sorted(m.to for m in messages) == sorted(sent)
    done = w.campaigns.get(WORKSPACE, campaign.id)
    assert done is not None
    assert done.status.value == "completed"
    assert done.counts.accepted == len(messages)
    assert sum(done.counts.as_tuple()[1:5]) == done.counts.total == len(lines)


def test_a_recipient_outside_the_destination_rules_is_the_lines_error_and_the_others_are_sent() -> None:
    w = world(FakeLimits())  # the defaults: every country, no premium-rate or shared-cost number
    campaign = start(w, [{"to": "+14155550100"}, {"to": "+19002345678"}, {"to": "+14155550101"}])
    w.drain()

    done = w.campaigns.get(WORKSPACE, campaign.id)
    assert done is not None
    assert (done.counts.accepted, done.counts.invalid) == (2, 1)
    (error,) = w.campaigns.line_errors.values()
    assert (error.code, error.details) == ("destination_not_allowed", {"reason": "premium_rate"})
    assert "+19002345678" not in {m.to for m in w.store.messages.values()}
