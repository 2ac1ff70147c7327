"""Many sends without an Idempotency-Key in one go: each one is what `MessageService.send` would make of
it, in the order given, with a fraction of the round trips.

The invariant is the single send's: a message is written with its dedup lock or not at all, and a
written message is handed to its queue from the table's stream or, failing that, by the outbox.
Identical commands are one message: the later is a duplicate of the earlier, as if it had been sent
after it, and is counted on the original as a caught duplicate is. A command whose write failed is
NotWritten: sending it again is safe, because its lock answers a copy that was written after all.
A command to a suppressed recipient is Suppressed and written not at all: one read for the batch
before its transactions (checks inside them would halve the entries a transaction holds, and one
suppressed entry would cancel its 25 neighbours' write), and the dispatcher's claim checks again
inside its own write, so a suppression that lands in between still stops the delivery. An email
item to several recipients drops its suppressed ones (named in its `suppressedRecipients`) and is
Suppressed only when none is left; its dedup identity stays that of every recipient it named.
A command from a template is rendered first, as the single send renders it; one whose template is
unknown or refuses its data is NotRendered, and written not at all. A command to a phone number its
workspace's destination rules exclude is DestinationRefused, and written not at all; an sms takes
its segments of the daily sms budget in its transaction (SmsBudgetSpent past it).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from msgspec import Struct

from sendonce.clock import Clock, utc_now
from sendonce.errors import DependencyUnavailable, DestinationNotAllowed, TemplateDataInvalid, UnknownTemplate
from sendonce.limits.model import Ledger, LimitsTimeline, QuotaCharge
from sendonce.limits.ports import LimitsStore
from sendonce.messages.handoff import handoff_due_at
from sendonce.messages.model import Message
from sendonce.messages.ports import (
    CampaignGate,
    Capped,
    Created,
    CreateManyOutcome,
    DuplicateOf,
    GateClosed,
    MadeBefore,
    NewMessage,
    NotWritten,
    QuotaSpent,
    SendingStore,
    SmsBudgetSpent,
    Suppressed,
    TemplateChanged,
    TiedToKey,
)
from sendonce.messages.service import (
    SendCommand,
    SendResult,
    TemplatesOnFirstUse,
    TemplatesRead,
    claim_of,
    destination_refusal,
    new_message,
    quota_charge,
    recipient_cap,
    refused,
    rendered,
    segments_of,
)
from sendonce.observability import logger, metrics
from sendonce.suppressions.model import Suppression
from sendonce.suppressions.ports import SuppressionCheck

if TYPE_CHECKING:
    from sendonce.controls.cap import RecipientCap


class NotRendered(Struct, frozen=True):
    """The command's template could not be rendered for it: nothing was written."""

    error: UnknownTemplate | TemplateDataInvalid


class DestinationRefused(Struct, frozen=True):
    """The command's phone recipient is outside its workspace's destination rules: nothing was written."""

    error: DestinationNotAllowed


BatchOutcome = (
    SendResult
    | NotWritten
    | QuotaSpent
    | SmsBudgetSpent
    | Capped
    | Suppressed
    | NotRendered
    | DestinationRefused
    | GateClosed
    | MadeBefore
)


def suppressed(
    suppressions: SuppressionCheck | None, commands: Sequence[SendCommand]
) -> dict[str, Suppression]:
    """The entries in force for the commands' recipients (one read for up to 50 of them), by key."""
    if suppressions is None or not commands:
        return {}
    found = suppressions.find_many(
        commands[0].workspace_id,
        {recipient.dedup_form for command in commands for recipient in command.recipients},
    )
    if found:
        refused(commands[0].workspace_id, [entry.reason.value for entry in found.values()])
    return found


def all_refused(command: SendCommand, refused: dict[str, Suppression]) -> Suppression | None:
    """The entry that refuses the command as a whole (its first recipient's), when every recipient
    it names is suppressed; None when someone is left to send to."""
    if not all(recipient.dedup_form in refused for recipient in command.recipients):
        return None
    return refused[command.recipients[0].dedup_form]


class BatchSender:
    def __init__(
        self,
        store: SendingStore,
        dedup_window: timedelta,
        clock: Clock = utc_now,
        limits: LimitsStore | None = None,
        suppressions: SuppressionCheck | None = None,
        *,
        templates: TemplatesOnFirstUse | None = None,
    ) -> None:
        self._store = store
        self._dedup_window = dedup_window
        self._clock = clock
        self._limits = limits
        self._suppressions = suppressions
        self._templates = templates

    def send_many(
        self, commands: Sequence[SendCommand], gate: CampaignGate | None = None
    ) -> list[BatchOutcome]:
        """One outcome per command, in order. Commands carry no Idempotency-Key: a keyed send takes
        its key's record first, which only `MessageService.send` behind the key's record does. A
        command from a template is rendered first, as a single send is (each template read once).
        With `gate`: a campaign's, written only while its gate is open (`CampaignGate`)."""
        if any(command.idempotency_key is not None for command in commands):
            raise ValueError("a keyed send goes through its key's record, one at a time")
        found: TemplatesRead = {}
        outcomes: list[BatchOutcome | None] = []
        renders: list[SendCommand] = []
        for command in commands:
            try:
                renders.append(rendered(self._templates, command, found))
                outcomes.append(None)
            except (UnknownTemplate, TemplateDataInvalid) as error:
                outcomes.append(NotRendered(error))
        sent = iter(self._send_rendered(renders, gate) if renders else [])
        return [outcome if outcome is not None else next(sent) for outcome in outcomes]

    def _send_rendered(
        self, commands: Sequence[SendCommand], gate: CampaignGate | None
    ) -> list[BatchOutcome]:
        refused = suppressed(self._suppressions, commands)
        refusals = [all_refused(command, refused) for command in commands]
        sendable = [command for command, refusal in zip(commands, refusals, strict=True) if refusal is None]
        sent = iter(self._write(sendable, refused, gate) if sendable else [])
        return [
            Suppressed(refusal.reason.value) if refusal is not None else next(sent) for refusal in refusals
        ]

    def _write(
        self, commands: Sequence[SendCommand], refused: dict[str, Suppression], gate: CampaignGate | None
    ) -> list[BatchOutcome]:
        now = self._clock()
        workspace = commands[0].workspace_id
        # The workspace's limits, read once: its quota, its protections, and the send controls its
        # messages are made under.
        timeline = self._limits.timeline(workspace) if self._limits is not None else None
        limits = timeline.at(now) if timeline is not None else None
        refusals = [destination_refusal(command, limits) for command in commands]
        allowed = [command for command, refusal in zip(commands, refusals, strict=True) if refusal is None]
        sent = iter(self._write_allowed(allowed, refused, gate, now, timeline) if allowed else [])
        return [DestinationRefused(refusal) if refusal is not None else next(sent) for refusal in refusals]

    def _write_allowed(
        self,
        commands: Sequence[SendCommand],
        refused: dict[str, Suppression],
        gate: CampaignGate | None,
        now: datetime,
        timeline: LimitsTimeline | None,
    ) -> list[BatchOutcome]:
        workspace = commands[0].workspace_id
        limits = timeline.at(now) if timeline is not None else None
        # The first command of each identity is written; the later ones are its duplicates (a command
        # from a template has two identities: it follows the first leader holding either).
        leaders: dict[str, int] = {}
        entries: list[NewMessage] = []
        caps: list[RecipientCap | None] = []  # per entry: the frequency cap it counts against
        leader_of: list[int] = []  # per command: its position in `entries`
        for command in commands:
            claim = claim_of(command, now + self._dedup_window, self._store.keyed_hash)
            locks = [lock for lock in (claim.lock_id, claim.template_lock_id) if lock is not None]
            leader = next((leaders[lock] for lock in locks if lock in leaders), None)
            if leader is None:
                leader = len(entries)
                leaders.update(dict.fromkeys(locks, leader))
                message = new_message(command, now, limits)
                entries.append(
                    NewMessage(
                        # Its suppressed recipients left out; its locks stay those of all it named.
                        message=message.without(refused.keys()) or message,
                        claim=claim,
                        handoff_due_at=handoff_due_at(now, message.send_at),
                        segments=segments_of(command, message),
                    )
                )
                # A campaign sends each recipient one message at most (its lock), and is not capped.
                caps.append(
                    recipient_cap(command, limits, now, self._store.keyed_hash) if gate is None else None
                )
            leader_of.append(leader)

        quota = quota_charge(timeline, workspace, now) if entries else None
        budget = None
        if timeline is not None and any(entry.segments for entry in entries):
            budget = QuotaCharge.of(workspace, timeline, now, Ledger.SMS_SEGMENTS)
        written: Sequence[CreateManyOutcome]
        if any(cap is not None for cap in caps):
            written = self._write_capped(entries, caps, now, quota, budget)
        else:
            written = self._store.create_many(entries, now, quota, gate, budget) if entries else []
        leader_outcomes = [self._leader_outcome(outcome, now) for outcome in written]

        outcomes: list[BatchOutcome] = []
        seen: set[int] = set()
        for command, position in zip(commands, leader_of, strict=True):
            if position not in seen:
                seen.add(position)
                outcomes.append(leader_outcomes[position])
            else:
                outcomes.append(self._later_duplicate(command, written[position], now))
        return outcomes

    def _write_capped(
        self,
        entries: Sequence[NewMessage],
        caps: Sequence[RecipientCap | None],
        now: datetime,
        quota: QuotaCharge | None,
        budget: QuotaCharge | None,
    ) -> list[CreateManyOutcome]:
        """Under a frequency cap, each entry as a single send writes it: its frames conditioned in
        its own transaction (one recipient's entries would meet in one bulk transaction)."""

        def one(entry: NewMessage, cap: RecipientCap | None) -> CreateManyOutcome:
            try:
                outcome = self._store.create(
                    entry.message,
                    entry.claim,
                    None,
                    entry.handoff_due_at,
                    now,
                    quota=quota,
                    cap=cap,
                    sms_budget=budget.taking(entry.segments)
                    if budget is not None and entry.segments
                    else None,
                )
            except DependencyUnavailable as error:
                return NotWritten(str(error))
            if isinstance(outcome, TiedToKey | Suppressed | TemplateChanged):  # no tie nor template check
                return NotWritten("an entry met a key tie, a suppression or a template check")
            return outcome

        return [one(entry, cap) for entry, cap in zip(entries, caps, strict=True)]

    def _leader_outcome(self, outcome: CreateManyOutcome, now: datetime) -> BatchOutcome:
        if isinstance(outcome, Created):
            return SendResult(message=outcome.message, created=True)
        if isinstance(outcome, DuplicateOf):
            return self._duplicate(outcome.original, outcome.locked_at, now)
        if isinstance(outcome, QuotaSpent):
            metrics.add_metric(name="QuotaExceeded", unit="Count", value=1)
            return outcome
        if isinstance(outcome, SmsBudgetSpent):
            metrics.add_metric(name="SmsBudgetExceeded", unit="Count", value=1)
            return outcome
        if isinstance(outcome, Capped):
            metrics.add_metric(name="RecipientCapped", unit="Count", value=1)
            return outcome
        if isinstance(outcome, GateClosed | MadeBefore):
            return outcome
        logger.warning("message.api.batch_not_written", extra={"event": "message.api.batch_not_written"})
        return outcome

    def _later_duplicate(
        self, command: SendCommand, leader: CreateManyOutcome, now: datetime
    ) -> BatchOutcome:
        """An identical command after its leader: a duplicate of the leader's message, counted on it."""
        if isinstance(leader, NotWritten | QuotaSpent | SmsBudgetSpent | Capped | GateClosed | MadeBefore):
            return leader  # as its leader: an identical send after it would get the same
        if isinstance(leader, Created):
            original_id, locked_at = leader.message.id, now
        elif leader.original is not None:
            original_id, locked_at = leader.original.id, leader.locked_at
        else:
            return self._duplicate(None, leader.locked_at, now)
        try:
            original = self._store.count_duplicate(
                command.workspace_id, original_id, command.idempotency_key, command.batch_key
            )
        except DependencyUnavailable as error:
            return NotWritten(str(error))
        return self._duplicate(original, locked_at, now)

    def _duplicate(self, original: Message | None, locked_at: datetime, now: datetime) -> SendResult:
        age = max(0, int((now - locked_at).total_seconds()))
        logger.info(
            "message.api.duplicate_blocked",
            extra={
                "event": "message.api.duplicate_blocked",
                "original_message_id": original.id if original else None,
                "original_age_seconds": age,
            },
        )
        metrics.add_metric(name="DuplicateBlocked", unit="Count", value=1)
        return SendResult(message=original, duplicate=True, original_age_seconds=age)
