"""The sending context's store on DynamoDB: create, read, list, edit and cancel messages.

A new message, its dedup lock and its Idempotency-Key tie are written in one transaction, so a
duplicate always finds the original, and a crash never leaves a lock without its message. The same
transaction checks that the recipient is not suppressed (`SuppressionGuard`): a suppressed
recipient's send writes nothing, in the same one call. A
message's entries in the listing indexes are spread over LISTING_SHARDS partitions of its workspace;
the listing merges them newest first (`dynamodb_listing`).
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from enum import Enum
from functools import partial
from typing import TYPE_CHECKING, Any

from msgspec import Struct

from sendonce.adapters.dynamodb_dedup_locks import release_dedup_lock
from sendonce.adapters.dynamodb_items import (
    LISTING_SHARDS,
    campaign_shard,
    epoch_seconds,
    from_item,
    lock_expiry,
    lock_key,
    message_key,
    parse_datetime,
    status_shard,
    tie_key,
    to_item,
    workspace_shard,
    workspace_status,
)
from sendonce.adapters.dynamodb_limits import (
    Adopt,
    DynamoDbLimits,
    NoRoom,
    Refusal,
    Replan,
    Replanning,
    cap_refusal,
)
from sendonce.adapters.dynamodb_suppressions import SuppressionGuard
from sendonce.adapters.dynamodb_templates import LIVE, head_key
from sendonce.adapters.dynamodb_writes import (
    CONFLICT,
    MAX_ATTEMPTS,
    Cancellation,
    ConditionFailed,
    DynamoDbTable,
    Item,
    TryAgain,
    with_retries,
)
from sendonce.clock import rfc3339
from sendonce.errors import DependencyUnavailable, InvalidCursor, MessageNotCancelable, MessageNotFound
from sendonce.limits.model import QuotaCharge
from sendonce.messages.ids import looks_like_message_id
from sendonce.messages.model import Message, Status
from sendonce.messages.ports import (
    MAX_FILTERED_READS,
    CampaignGate,
    Capped,
    ContentHeld,
    Created,
    CreateManyOutcome,
    CreateOutcome,
    DedupClaim,
    DuplicateOf,
    Edited,
    EditOutcome,
    EditRaced,
    GateClosed,
    KeyTie,
    MadeBefore,
    MessageEdit,
    MessageFilter,
    NewMessage,
    NotEditable,
    NotWritten,
    Page,
    QuotaSpent,
    Suppressed,
    TemplateChanged,
    TemplateInForce,
    TiedToKey,
)
from sendonce.modes import is_test_workspace, retention_for
from sendonce.side_by_side import side_by_side
from sendonce.suppressions.model import Suppression, recipient_key

if TYPE_CHECKING:
    from sendonce.controls.cap import RecipientCap


class _QuotaShard(Enum):
    """What a charged try found of its quota shard instead of an outcome."""

    BUSY = "another transaction on it at the same moment"


# The items of the create transaction, by position: what each cancellation reason speaks of. A send
# from a template's second lock follows (`_template_lock_at`), and its template's check, then the
# suppression checks (`SuppressionGuard`), then the quota counter.
_MESSAGE, _LOCK, _TIE = 0, 1, 2
# A transaction holds at most 100 items and 4 MB: a bulk create writes 50 messages with their
# locks in one, fewer when they are large.
MAX_TRANSACTION_ITEMS = 100
# Quota shards a bulk transaction tries before its entries go one by one (near the quota's end).
BULK_SHARD_TRIES = 3
# Full quota shards met in a row before a create reads every shard's count at once.
PROBES_BEFORE_READING_SHARDS = 3
MAX_TRANSACTION_BYTES = 3_500_000
# The items of a create transaction that are not suppression checks, at most: the message, its dedup
# lock, its key tie, a template's lock and its template's check, and the quota counter. The checks
# get the rest of the 100.
CREATE_ITEMS_RESERVED = 6


class _Recount(Struct, frozen=True):
    """The cap met a count in a later bucket than this clock's: written again, counted in it."""

    cap: RecipientCap


class _Dropped(Struct, frozen=True):
    """Some recipients' checks refused a create (their entries, by key): written again without them."""

    refused: dict[str, Suppression]


class _Draft:
    """A create under way: the message as it will be written, its transaction's items (the message's
    Put first) and its recipients' checks. Dropping suppressed recipients rewrites the message's Put;
    the lock and the key tie stay, made of every recipient the send named."""

    def __init__(
        self,
        message: Message,
        items: list[dict[str, Any]],
        put: Callable[[Message], dict[str, Any]] | None = None,
        guard: SuppressionGuard | None = None,
        template_at: int | None = None,
        *,
        campaign_at: int | None = None,
        gate_at: int | None = None,
    ) -> None:
        self.message = message
        self.items = items
        self.guard = guard
        self.template_at = template_at  # where its template's check is among its items, if it has one
        # A campaign's message: where its campaign lock and its campaign's gate check are.
        self.campaign_at = campaign_at
        self.gate_at = gate_at
        # The frequency cap the message counts against, where its items are, and how they are made.
        self.cap: tuple[RecipientCap, range] | None = None
        self.cap_items: Callable[[RecipientCap], list[dict[str, Any]]] | None = None
        self._put = put
        self._refused: dict[str, Suppression] = {}
        self._order = [recipient_key(address) for address in message.recipients]  # as the send named them

    @property
    def cap_stamp(self) -> str:
        """What names the cap's count in the transaction's token: its bucket, which a recount moves."""
        return f"cap{self.cap[0].bucket}" if self.cap is not None else ""

    def recount(self, cap: RecipientCap) -> None:
        """The cap's items made again for `cap` (a later bucket), in their place."""
        if self.cap is None or self.cap_items is None:
            raise DependencyUnavailable("a recount without a cap")
        at, made = self.cap[1], self.cap_items(cap)
        self.items = [*self.items[: at.start], *made, *self.items[at.stop :]]
        self.cap = (cap, range(at.start, at.start + len(made)))

    def drop(self, refused: dict[str, Suppression]) -> Suppressed | None:
        """The message without the recipients `refused` names; Suppressed (the first recipient's
        reason) when nobody is left."""
        if not refused:
            return None
        self._refused.update(refused)
        left = self.message.without(self._refused.keys())
        if left is None:
            first = next(key for key in self._order if key in self._refused)
            return Suppressed(self._refused[first].reason.value)
        if self._put is None or self.guard is None:
            raise DependencyUnavailable("a bulk entry met a suppression check")
        self.message = left
        self.items = [self._put(left), *self.items[1:]]
        self.guard.drop(refused.keys())
        return None


class DynamoDbSendingStore:
    def __init__(
        self,
        client: Any,
        table_name: str,
        retention: timedelta | None = None,
        quota: DynamoDbLimits | None = None,
    ) -> None:
        """`retention`: how long a message is kept after it was sent or due (None: for good).
        `quota`: where a charged create takes its unit of the daily quota."""
        self._table = DynamoDbTable(client, table_name)
        self._retention = retention
        self._quota = quota

    def _expires_at(self, message: Message) -> datetime | None:
        retention = retention_for(message.workspace_id, self._retention)  # a test twin's: 7 days
        if retention is None:
            return None
        # Counted from its sendAt when later: a scheduled message is never removed before it is sent.
        return max(message.created_at, message.send_at or message.created_at) + retention

    def _tie_expiry(self, message: Message) -> Item:
        """A live key's tie is kept for good (docs/guarantees.md, "Sending"); a test twin's goes with
        its message."""
        expires_at = self._expires_at(message) if is_test_workspace(message.workspace_id) else None
        return {"expiresAt": epoch_seconds(expires_at)} if expires_at is not None else {}

    def create(
        self,
        message: Message,
        claim: DedupClaim,
        tie: KeyTie | None,
        handoff_due_at: datetime,
        now: datetime,
        *,
        quota: QuotaCharge | None = None,
        template: TemplateInForce | None = None,
        cap: RecipientCap | None = None,
    ) -> CreateOutcome:
        message = claim.taken_by(message)
        items: list[dict[str, Any]] = [
            self._message_put(message, handoff_due_at),
            _lock_put(message, claim.lock_id, claim.expires_at, now),
        ]
        if tie is not None:
            items.append(
                {
                    "Put": {
                        "Item": {
                            **tie_key(tie.tie_id),
                            "messageId": {"S": message.id},
                            "workspaceId": {"S": message.workspace_id},
                            "payloadFingerprint": {"S": tie.payload_fingerprint},
                            "createdAt": {"S": rfc3339(now)},
                            **self._tie_expiry(message),
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                }
            )
        if claim.template_lock_id is not None:  # at `_template_lock_at(tie)`
            items.append(_lock_put(message, claim.template_lock_id, claim.expires_at, now))
        template_at = None
        if template is not None:
            template_at = len(items)
            items.append(_template_check(message.workspace_id, template))
        cap_at = len(items)
        if cap is not None:  # the frequency cap's frames, conditioned on their room
            items.extend(self._require_quota().cap_items(cap))

        guard = SuppressionGuard(
            self._table,
            message.workspace_id,
            tuple(recipient_key(address) for address in message.recipients),
            room=MAX_TRANSACTION_ITEMS - CREATE_ITEMS_RESERVED - (len(items) - cap_at),
        )
        draft = _Draft(message, items, partial(self._message_put, due=handoff_due_at), guard, template_at)
        if cap is not None:
            draft.cap, draft.cap_items = (cap, range(cap_at, len(items))), self._require_quota().cap_items
        if not guard.fits:  # a live email to many recipients: read them first (`SuppressionGuard`)
            refused = draft.drop(guard.read_first())
            if refused is not None:
                return refused
        if quota is not None:
            charged = self._create_charged(draft, tie, quota)
            if isinstance(charged, GateClosed | MadeBefore):  # a campaign's: never a single create's
                raise DependencyUnavailable("a single create met a campaign's gate or lock")
            return charged

        def attempt() -> CreateOutcome:
            while True:
                stamp = guard.stamp + draft.cap_stamp
                token = draft.message.id if not stamp else _token(f"{draft.message.id}.{stamp}")
                canceled = self._table.transact([*draft.items, *guard.items()], token=token)
                if canceled is None:
                    return Created(draft.message)
                outcome = self._explain(draft, tie, canceled, guard, len(draft.items))
                if isinstance(outcome, _Recount):
                    draft.recount(outcome.cap)
                    continue  # counted in the later bucket, at once
                if isinstance(outcome, _Dropped):
                    refused = draft.drop(outcome.refused)
                    if refused is not None:
                        return refused
                    continue  # written again without them, at once
                if isinstance(outcome, GateClosed | MadeBefore):  # a campaign's: never a single create's
                    raise DependencyUnavailable("a single create met a campaign's gate or lock")
                if outcome is not None:
                    return outcome
                if canceled.contended:
                    raise TryAgain  # a lock or tie changed meanwhile
                raise DependencyUnavailable(f"the create transaction was canceled: {canceled.codes}")

        return with_retries(attempt, "the dedup lock stayed contended")

    def _message_put(self, message: Message, due: datetime) -> dict[str, Any]:
        return {
            "Put": {
                "Item": to_item(message, due, self._expires_at(message)),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def _create_charged(
        self, draft: _Draft, tie: KeyTie | None, quota: QuotaCharge
    ) -> CreateOutcome | GateClosed | MadeBefore:
        """The create transaction with one unit of a quota shard: the shards in turn until one has
        room. QuotaSpent only once every shard of the plan in force was found full; a shard busy with
        another transaction is tried again, and one that stays busy is a 503, never a 429. A shard on
        another plan is re-planned, waited for or followed (`DynamoDbLimits.settle`). After a few full
        shards in a row, every shard is read at once, so the quota's end costs a few calls, not one a
        shard.
        """
        shards, began = self._require_quota(), time.monotonic()
        # Every shard known full: one try all the same, which still tells a duplicate or a replay.
        to_try = deque(shards.shards_to_try(quota) or [0])
        busy: list[int] = []
        full_in_a_row, learnt, attempt = 0, False, 0
        while True:
            while to_try:
                shard = to_try.popleft()
                outcome = with_retries(
                    partial(self._try_charged, draft, tie, quota, shard),
                    "the dedup lock stayed contended",
                )
                if isinstance(outcome, _Recount):
                    draft.recount(outcome.cap)
                    to_try.appendleft(shard)  # the same shard, counted in the later bucket
                elif isinstance(outcome, _Dropped):
                    refused = draft.drop(outcome.refused)
                    if refused is not None:
                        return refused
                    to_try.appendleft(shard)  # the same shard, without them
                elif outcome is _QuotaShard.BUSY:
                    busy.append(shard)
                elif isinstance(outcome, NoRoom):
                    full_in_a_row += 1
                    if full_in_a_row >= PROBES_BEFORE_READING_SHARDS and not learnt and to_try:
                        shards.learn_full(quota)
                        learnt, known = True, set(shards.shards_to_try(quota))
                        to_try = deque(s for s in to_try if s in known)
                elif isinstance(outcome, Replan | Replanning | Adopt):
                    quota = shards.settle(quota, outcome, began)
                    to_try, busy, full_in_a_row, learnt = (
                        deque(shards.shards_to_try(quota) or [0]),
                        [],
                        0,
                        False,
                    )
                else:
                    return outcome
            if not busy:
                return QuotaSpent()
            attempt += 1
            if attempt >= MAX_ATTEMPTS:
                raise DependencyUnavailable("every quota shard with room stayed busy")
            to_try, busy = deque(busy), []
            # Full jitter, doubling: concurrent creates on a small quota's one shard take turns
            # within about a second and a half in all.
            time.sleep(random.uniform(0, min(0.5, 0.01 * 2**attempt)))

    def _try_charged(
        self, draft: _Draft, tie: KeyTie | None, quota: QuotaCharge, shard: int
    ) -> CreateOutcome | GateClosed | MadeBefore | Refusal | _QuotaShard | _Dropped | _Recount:
        message, items, guard = draft.message, draft.items, draft.guard
        checks = guard.items() if guard is not None else []
        counter = len(items) + len(checks)
        charged = [*items, *checks, self._require_quota().charge_item(quota, shard, 1)]
        stamp = (guard.stamp if guard is not None else "") + draft.cap_stamp
        canceled = self._table.transact(
            charged, token=_token(f"{message.id}.{shard}.{quota.plan.stamp}{'.' + stamp if stamp else ''}")
        )
        if canceled is None:
            return Created(message)
        outcome = self._explain(draft, tie, canceled, guard, len(items))
        if outcome is not None:
            return outcome
        if canceled.failed(counter):
            return self._require_quota().refusal(quota, shard, canceled.item(counter))
        if canceled.codes[counter : counter + 1] == (CONFLICT,):
            return _QuotaShard.BUSY
        if canceled.contended:
            raise TryAgain  # a lock or tie changed meanwhile
        raise DependencyUnavailable(f"the create transaction was canceled: {canceled.codes}")

    def _require_quota(self) -> DynamoDbLimits:
        if self._quota is None:
            raise ValueError("a charged create needs the store built with its quota's table")
        return self._quota

    def _explain(
        self,
        draft: _Draft,
        tie: KeyTie | None,
        canceled: Cancellation,
        guard: SuppressionGuard | None = None,
        checks_at: int = 0,
    ) -> CreateOutcome | GateClosed | MadeBefore | _Dropped | _Recount | None:
        """What a canceled create met: its own earlier write, its campaign's gate closed, its
        campaign's lock on the recipient held, suppressed recipients (before a tie or a lock: a
        suppressed send is refused, whatever it duplicates; with others left, those are written
        without them), its key's tie, a held lock, a template no longer as it was rendered."""
        message, template_at = draft.message, draft.template_at
        lock_item = canceled.item(_LOCK) if canceled.failed(_LOCK) else None
        if lock_item is not None and lock_item["messageId"]["S"] == message.id:
            return Created(message)  # our own committed write, met again by a retry
        if draft.gate_at is not None and canceled.failed(draft.gate_at):
            return GateClosed()
        if draft.campaign_at is not None and canceled.failed(draft.campaign_at):
            return self._made_before(message, canceled, draft.campaign_at)
        if guard is not None:
            refused = guard.refusals(canceled, checks_at)
            if refused:
                return _Dropped(refused)
        if tie is not None and canceled.failed(_TIE):
            tie_item = canceled.item(_TIE) or self._table.get(tie_key(tie.tie_id))
            if tie_item is None:
                return None
            original = self.get(message.workspace_id, tie_item["messageId"]["S"])
            return TiedToKey(original=original, payload_fingerprint=tie_item["payloadFingerprint"]["S"])
        held = self._held_lock(message, canceled, _LOCK, message.dedup_lock_id)
        if held is None and message.template_lock_id is not None:
            held = self._held_lock(message, canceled, _template_lock_at(tie), message.template_lock_id)
        if held is None and template_at is not None and canceled.failed(template_at):
            return TemplateChanged()
        if held is None and draft.cap is not None:
            cap, at = draft.cap
            full = [canceled.item(i) for i in at if canceled.failed(i)]
            if full:
                found = cap_refusal(cap, full)
                return found if isinstance(found, Capped) else _Recount(cap.in_bucket(found))
        return held

    def _held_lock(
        self, message: Message, canceled: Cancellation, at: int, lock_id: str | None
    ) -> Created | DuplicateOf | None:
        """What the lock at position `at` of a canceled create met: another message's hold (its
        duplicate), our own committed write (a retry), or nothing (free, or freed since)."""
        if not canceled.failed(at):
            return None
        lock_item = canceled.item(at) or self._table.get(lock_key(lock_id or ""))
        if lock_item is None:
            return None
        if lock_item["messageId"]["S"] == message.id:
            # Our own committed write, met again by a retry the engine did not recognise.
            return Created(message)
        original = self._count_duplicate(message.workspace_id, lock_item["messageId"]["S"])
        return DuplicateOf(original=original, locked_at=parse_datetime(lock_item["lockedAt"]["S"]))

    def _made_before(self, message: Message, canceled: Cancellation, at: int) -> Created | MadeBefore:
        """What a campaign's lock on the recipient (at `at`) met: our own committed write, or the
        message the campaign made for the recipient before; never counted as a caught duplicate."""
        lock_item = canceled.item(at) or self._table.get(lock_key(message.campaign_lock_id or ""))
        if lock_item is None:
            return MadeBefore(original=None)
        if lock_item["messageId"]["S"] == message.id:
            return Created(message)
        return MadeBefore(original=self.get(message.workspace_id, lock_item["messageId"]["S"]))

    def create_many(
        self,
        entries: Sequence[NewMessage],
        now: datetime,
        quota: QuotaCharge | None = None,
        gate: CampaignGate | None = None,
    ) -> list[CreateManyOutcome]:
        """Messages and their locks in as few transactions as fit; a held lock, read from the
        cancellation reasons, takes its entry out and the rest are written again. With `gate`, each
        transaction checks the campaign's gate last."""
        written = []
        for index, entry in enumerate(entries):
            claim = entry.claim
            message = claim.taken_by(entry.message)
            written.append((index, message, self._create_items(message, entry, now)))
        # The entries hold distinct locks (the batch sender made identical ones one entry), so the
        # transactions are independent: side by side, and a chunk that fails fails alone.
        outcomes: dict[int, CreateManyOutcome] = {}
        # A charged transaction keeps room for its quota counter, a campaign's for its gate check.
        chunks = _chunks(written, reserved=(quota is not None) + (gate is not None))
        for chunk_outcomes in side_by_side(lambda chunk: self._create_chunk(chunk, now, quota, gate), chunks):
            outcomes.update(chunk_outcomes)
        return [outcomes[index] for index in range(len(entries))]

    def _create_items(self, message: Message, entry: NewMessage, now: datetime) -> list[dict[str, Any]]:
        """The message, its lock, (sent from a template) its second lock, and (a campaign's) its
        campaign's lock on the recipient."""
        items = [
            {
                "Put": {
                    "Item": to_item(message, entry.handoff_due_at, self._expires_at(message)),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            *(_lock_put(message, lock_id, entry.claim.expires_at, now) for lock_id in message.lock_ids),
        ]
        if message.campaign_lock_id is not None:
            expires_at = entry.claim.campaign_lock_expires_at or entry.claim.expires_at
            items.append(_lock_put(message, message.campaign_lock_id, expires_at, now))
        return items

    def _create_chunk(
        self,
        chunk: list[tuple[int, Message, list[dict[str, Any]]]],
        now: datetime,
        quota: QuotaCharge | None,
        gate: CampaignGate | None = None,
    ) -> dict[int, CreateManyOutcome]:
        """The chunk's outcomes by entry index; each is NotWritten when DynamoDB stays unavailable."""
        outcomes: dict[int, CreateManyOutcome] = {}
        try:
            self._write_chunk(chunk, now, outcomes, quota, gate)
        except DependencyUnavailable as error:
            for index, _, _ in chunk:
                outcomes.setdefault(index, NotWritten(str(error)))
        return outcomes

    def _write_chunk(
        self,
        chunk: list[tuple[int, Message, list[dict[str, Any]]]],
        now: datetime,
        outcomes: dict[int, CreateManyOutcome],
        quota: QuotaCharge | None,
        gate: CampaignGate | None = None,
    ) -> None:
        pending = list(chunk)
        conflicts = 0
        began = time.monotonic()
        refused: set[int] = set()  # the quota shards that had no room for this chunk
        while pending:
            items = [item for _, _, pair in pending for item in pair]
            shard = None
            if quota is not None:
                shard = self._shard_with_room(quota, refused)
                if shard is None:  # near the quota's end: entry by entry, each on a shard with room
                    self._write_one_by_one(pending, now, outcomes, quota, gate)
                    return
                items.append(self._require_quota().charge_item(quota, shard, len(pending)))
            gate_at = None
            if gate is not None:
                gate_at = len(items)
                items.append(_gate_check(gate))
            # The same messages, the same token: the SDK's retry of a lost answer writes nothing twice.
            stamp = quota.plan.stamp if quota is not None else ""
            token = hashlib.sha256(
                f"{','.join(m.id for _, m, _ in pending)}.{shard}.{stamp}".encode()
            ).hexdigest()[:36]
            canceled = self._table.transact(items, token=token)
            if canceled is None:
                for index, message, _ in pending:
                    outcomes[index] = Created(message)
                return
            if gate_at is not None and canceled.failed(gate_at):
                for index, _, _ in pending:
                    outcomes[index] = GateClosed()
                return
            settled = set()
            first = 0  # where each entry's items start in the transaction
            for index, message, entry_items in pending:
                outcome = self._explain_bulk(message, canceled, first)
                first += len(entry_items)
                if outcome is not None:
                    outcomes[index] = outcome
                    settled.add(index)
            if settled:
                pending = [entry for entry in pending if entry[0] not in settled]
                continue  # the held locks are out: write the rest again at once
            if quota is not None and shard is not None and canceled.failed(first):  # the counter
                refusal = self._require_quota().refusal(quota, shard, canceled.item(first))
                if isinstance(refusal, NoRoom):
                    refused.add(shard)  # less room than the chunk needs: another shard, a few at most
                else:
                    quota, refused = self._require_quota().settle(quota, refusal, began), set()
                continue
            if not canceled.contended or conflicts + 1 >= MAX_ATTEMPTS:
                raise DependencyUnavailable(f"the bulk create transaction was canceled: {canceled.codes}")
            conflicts += 1
            time.sleep(random.uniform(0.005, 0.02) * conflicts)

    def _shard_with_room(self, quota: QuotaCharge, refused: set[int]) -> int | None:
        """A shard not known full (its room is learnt by trying); None after BULK_SHARD_TRIES
        refusals, when entry by entry is cheaper than probing on."""
        if len(refused) >= BULK_SHARD_TRIES:
            return None
        return next((s for s in self._require_quota().shards_to_try(quota) if s not in refused), None)

    def _write_one_by_one(
        self,
        pending: list[tuple[int, Message, list[dict[str, Any]]]],
        now: datetime,
        outcomes: dict[int, CreateManyOutcome],
        quota: QuotaCharge,
        gate: CampaignGate | None = None,
    ) -> None:
        """In order, each entry as `create` writes it with its unit of quota (and its gate check)."""
        for index, message, entry_items in pending:
            campaign_at = len(entry_items) - 1 if message.campaign_lock_id is not None else None
            items, gate_at = list(entry_items), None
            if gate is not None:
                gate_at = len(items)
                items.append(_gate_check(gate))
            draft = _Draft(message, items, campaign_at=campaign_at, gate_at=gate_at)
            outcome = self._create_charged(draft, None, quota)
            if isinstance(outcome, TiedToKey | Suppressed | TemplateChanged):  # no tie nor check in bulk
                raise DependencyUnavailable("a bulk entry met a key tie or a suppression check")
            outcomes[index] = outcome
            if isinstance(outcome, GateClosed):
                for later, _, _ in pending:
                    outcomes.setdefault(later, outcome)
                return

    def _explain_bulk(self, message: Message, canceled: Cancellation, first: int) -> CreateManyOutcome | None:
        """What an entry whose items start at `first` met: its own earlier write, its campaign's
        message for the recipient (before a held dedup lock, which that message holds too), or a
        held lock."""
        if canceled.failed(first):
            return Created(message)  # the message exists: our own write, committed by an earlier try
        if message.campaign_lock_id is not None:
            campaign_at = first + 1 + len(message.lock_ids)
            if canceled.failed(campaign_at):
                return self._made_before(message, canceled, campaign_at)
        for offset, lock_id in enumerate(message.lock_ids, start=1):
            held = self._held_lock(message, canceled, first + offset, lock_id)
            if held is not None:
                return held
        return None

    def count_duplicate(self, workspace_id: str, message_id: str) -> Message | None:
        return self._count_duplicate(workspace_id, message_id)

    def edit(self, edit: MessageEdit, now: datetime) -> EditOutcome:
        """One transaction: the message, if still as read and scheduled (handed to its queue or
        not: only a claim fixes what is sent); its old lock released and its new one taken; its key
        tie re-fingerprinted. An old lock or a tie that is no longer this message's (expired, taken
        since) is left alone: the transaction is written without it."""
        seen = edit.seen
        parts = {
            "release": edit.claim is not None and seen.dedup_lock_id is not None,
            "tie": edit.tie is not None,
        }

        def attempt() -> EditOutcome:
            items = [self._edited_message_item(edit)]
            at: dict[str, int] = {}
            if parts["release"]:
                at["release"] = len(items)
                items.append(
                    {
                        "Delete": {
                            "Key": lock_key(seen.dedup_lock_id or ""),
                            "ConditionExpression": "messageId = :id",
                            "ExpressionAttributeValues": {":id": {"S": seen.id}},
                        }
                    }
                )
            if edit.claim is not None:
                at["claim"] = len(items)
                items.append(_lock_put(seen, edit.claim.lock_id, edit.claim.expires_at, now))
            if parts["tie"] and edit.tie is not None:
                at["tie"] = len(items)
                items.append(
                    {
                        "Update": {
                            "Key": tie_key(edit.tie.tie_id),
                            "UpdateExpression": "SET payloadFingerprint = :fingerprint",
                            "ConditionExpression": "messageId = :id",
                            "ExpressionAttributeValues": {
                                ":fingerprint": {"S": edit.tie.payload_fingerprint},
                                ":id": {"S": seen.id},
                            },
                        }
                    }
                )
            canceled = self._table.transact(items)
            if canceled is None:
                return Edited(edit.edited)
            if canceled.failed(0):
                return self._edit_refused(seen, canceled.item(0))
            if edit.claim is not None and canceled.failed(at["claim"]):
                holder = canceled.item(at["claim"]) or self._table.get(lock_key(edit.claim.lock_id))
                if holder is not None and holder["messageId"]["S"] != seen.id:
                    return ContentHeld(holder["messageId"]["S"])
            if "release" in at and canceled.failed(at["release"]):
                parts["release"] = False
            if "tie" in at and canceled.failed(at["tie"]):
                parts["tie"] = False  # a message sent with a key but no tie: nothing to re-fingerprint
            if canceled.contended:
                raise TryAgain
            raise DependencyUnavailable(f"the edit transaction was canceled: {canceled.codes}")

        return with_retries(attempt, "the edited message stayed contended")

    def _edited_message_item(self, edit: MessageEdit) -> dict[str, Any]:
        edited = edit.edited
        names = {"#status": "status", "#body": "body", "#metadata": "metadata"}
        values: dict[str, Any] = {
            ":body": {"S": edited.body},
            ":metadata": {"M": {key: {"S": value} for key, value in edited.metadata.items()}},
            ":updated": {"S": rfc3339(edited.updated_at)},
            ":ws": {"S": edited.workspace_id},
            ":scheduled": {"S": Status.SCHEDULED.value},
            ":seen_updated": {"S": rfc3339(edit.seen.updated_at)},
        }
        sets = ["#body = :body", "#metadata = :metadata", "updatedAt = :updated"]
        if edited.subject is not None:
            names["#subject"] = "subject"
            values[":subject"] = {"S": edited.subject}
            sets.append("#subject = :subject")
        if edit.handoff_due_at is not None and edited.send_at is not None:
            # A new sendAt: the outbox owes its hand-off anew. Otherwise the due time stays as it
            # is, and so does whatever record or outbox entry covers the message.
            names["#sendAt"] = "sendAt"
            values[":send_at"] = {"S": rfc3339(edited.send_at)}
            values[":due"] = {"S": rfc3339(edit.handoff_due_at)}
            sets += ["#sendAt = :send_at", "outboxDueAt = :due"]
        if edited.dedup_lock_id is not None:
            values[":lock"] = {"S": edited.dedup_lock_id}
            sets.append("dedupLockId = :lock")
        expires_at = self._expires_at(edited)
        if expires_at is not None:
            values[":expires"] = epoch_seconds(expires_at)
            sets.append("expiresAt = :expires")
        return {
            "Update": {
                "Key": message_key(edited.id),
                "UpdateExpression": "SET " + ", ".join(sets),
                # As read (every edit moves updatedAt on) and still scheduled: a claim or a cancel
                # moves the status, and whichever of the claim and the edit is written first wins.
                "ConditionExpression": (
                    "workspaceId = :ws AND #status = :scheduled AND updatedAt = :seen_updated"
                ),
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _edit_refused(self, seen: Message, item: Item | None) -> EditOutcome:
        item = item or self._table.get(message_key(seen.id))
        if item is None or item["workspaceId"]["S"] != seen.workspace_id:
            raise MessageNotFound(seen.id)
        status = Status(item["status"]["S"])
        if status is not Status.SCHEDULED:
            return NotEditable(status)  # claimed, canceled: too late
        return EditRaced()  # another edit (or an outbox move) came first

    def owe_handoff(self, edit: MessageEdit, now: datetime) -> bool:
        """Due in the outbox at once, while still scheduled with the sendAt and due time the edit
        wrote: a later edit that moved sendAt owes its own hand-off, and a sweep that moved the
        entry has handed it over."""
        if edit.handoff_due_at is None or edit.edited.send_at is None:
            return False
        answer = self._table.write(
            "update_item",
            Key=message_key(edit.edited.id),
            UpdateExpression="SET outboxDueAt = :now",
            ConditionExpression=(
                "workspaceId = :ws AND #status = :scheduled AND #sendAt = :send_at AND outboxDueAt = :due"
            ),
            ExpressionAttributeNames={"#status": "status", "#sendAt": "sendAt"},
            ExpressionAttributeValues={
                ":now": {"S": rfc3339(now)},
                ":ws": {"S": edit.edited.workspace_id},
                ":scheduled": {"S": Status.SCHEDULED.value},
                ":send_at": {"S": rfc3339(edit.edited.send_at)},
                ":due": {"S": rfc3339(edit.handoff_due_at)},
            },
        )
        return not isinstance(answer, ConditionFailed)

    def cancel(self, workspace_id: str, message_id: str, now: datetime) -> Message:
        if not looks_like_message_id(message_id):
            raise MessageNotFound(message_id)
        response = self._table.write(
            "update_item",
            Key=message_key(message_id),
            UpdateExpression=(
                "SET #status = :canceled, workspaceStatus = :ws_status, updatedAt = :now "
                "REMOVE outboxShard, outboxDueAt"
            ),
            ConditionExpression=(
                "workspaceId = :ws AND #status IN (:accepted, :scheduled, :queued) AND attempts = :zero"
            ),
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":canceled": {"S": Status.CANCELED.value},
                ":ws_status": {"S": workspace_status(workspace_id, Status.CANCELED, message_id)},
                ":now": {"S": rfc3339(now)},
                ":ws": {"S": workspace_id},
                ":accepted": {"S": Status.ACCEPTED.value},
                ":scheduled": {"S": Status.SCHEDULED.value},
                ":queued": {"S": Status.QUEUED.value},
                ":zero": {"N": "0"},
            },
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if isinstance(response, ConditionFailed):
            current = response.item or self._table.get(message_key(message_id))
            if current is None or current["workspaceId"]["S"] != workspace_id:
                raise MessageNotFound(message_id)
            raise MessageNotCancelable(current["status"]["S"])
        return from_item(response["Attributes"])

    def _count_duplicate(self, workspace_id: str, message_id: str) -> Message | None:
        """The original a duplicate was caught against, read by the write that records the catch:
        the committed count is what tells the customer's endpoints (`message.duplicate_blocked`)."""
        answer = self._table.write(
            "update_item",
            Key=message_key(message_id),
            UpdateExpression="ADD duplicatesBlocked :one",
            ConditionExpression="workspaceId = :ws",  # also: never an item where there is none
            ExpressionAttributeValues={":one": {"N": "1"}, ":ws": {"S": workspace_id}},
            ReturnValues="ALL_NEW",
        )
        return None if isinstance(answer, ConditionFailed) else from_item(answer["Attributes"])

    def release_dedup_lock(self, message: Message) -> None:
        release_dedup_lock(self._table, message)

    def get(self, workspace_id: str, message_id: str) -> Message | None:
        if not looks_like_message_id(message_id):
            return None
        item = self._table.get(message_key(message_id))
        if item is None or item["workspaceId"]["S"] != workspace_id:
            return None  # another workspace's message does not exist for this one
        return from_item(item)

    def list(self, workspace_id: str, which: MessageFilter, limit: int, cursor: str | None) -> Page:
        """Newest first, over every shard of the listing index (`dynamodb_listing`); a page resumes
        below its cursor, the last id of the page before. A campaign's messages are read from its own
        index, a status's from the status index; a channel or a recipient only the items tell."""
        if cursor is not None and not looks_like_message_id(cursor):
            raise InvalidCursor(cursor)
        status = which.status
        if which.campaign_id is not None:
            index, partition_name = "ByCampaign", "campaignShard"
            partitions = [
                campaign_shard(workspace_id, which.campaign_id, shard) for shard in range(LISTING_SHARDS)
            ]
        elif status is None:
            index, partition_name = "ByWorkspace", "workspaceShard"
            partitions = [workspace_shard(workspace_id, shard) for shard in range(LISTING_SHARDS)]
        else:
            index, partition_name = "ByWorkspaceStatus", "workspaceStatus"
            partitions = [status_shard(workspace_id, status, shard) for shard in range(LISTING_SHARDS)]
        # Loaded with the first listing: a send never needs the merge.
        from sendonce.adapters.dynamodb_listing import fetch_page, first_read, newest_first, query_shard  # noqa: PLC0415

        entries = newest_first(
            partitions,
            query_shard(self._table, index, partition_name, below=cursor),
            first=first_read(limit + 1, LISTING_SHARDS),  # one more tells whether another page exists
        )

        def keep(item: Item) -> bool:
            # The index lags its table a little: a message that moved to another status since is left
            # out of this status's listing (it is in its new status's).
            return item["workspaceId"]["S"] == workspace_id and which.admits(from_item(item))

        budget = MAX_FILTERED_READS if which.reads_items else None
        fetched = fetch_page(self._table, entries, limit, keep, budget)
        messages = [from_item(item) for item in fetched.items]
        if fetched.stopped_at is not None:
            return Page(messages=messages, next_cursor=fetched.stopped_at)
        return Page(messages=messages, next_cursor=messages[-1].id if fetched.more and messages else None)


def _token(request: str) -> str:
    """A ClientRequestToken (at most 36 characters) that names one request's writes."""
    return hashlib.sha256(request.encode()).hexdigest()[:36]


def _template_lock_at(tie: KeyTie | None) -> int:
    """Where a create's template lock is: after its key tie, when it has one."""
    return _TIE + (tie is not None)


def _template_check(workspace_id: str, template: TemplateInForce) -> dict[str, Any]:
    """A ConditionCheck that the template is live and, for a send of the latest, still at that version."""
    condition = f"attribute_exists(pk) AND {LIVE}"
    values: dict[str, Any] = {}
    if template.latest:
        condition += " AND version = :version"
        values[":version"] = {"N": str(template.version)}
    check: dict[str, Any] = {"Key": head_key(workspace_id, template.name), "ConditionExpression": condition}
    if values:
        check["ExpressionAttributeValues"] = values
    return {"ConditionCheck": check}


def _gate_check(gate: CampaignGate) -> dict[str, Any]:
    """The check that a campaign's gate is open (`dynamodb_campaigns`)."""
    from sendonce.adapters.dynamodb_campaigns import GATE_COPIES, gate_key  # noqa: PLC0415  # a campaign's only

    return {
        "ConditionCheck": {
            "Key": gate_key(gate.workspace_id, gate.campaign_id, random.randrange(GATE_COPIES)),
            "ConditionExpression": "#open = :open",
            "ExpressionAttributeNames": {"#open": "open"},
            "ExpressionAttributeValues": {":open": {"BOOL": True}},
        }
    }


def _lock_put(message: Message, lock_id: str, expires_at: datetime, now: datetime) -> dict[str, Any]:
    """A dedup lock taken by `message` until `expires_at`, unless another message holds it."""
    return {
        "Put": {
            "Item": {
                **lock_key(lock_id),
                "messageId": {"S": message.id},
                "workspaceId": {"S": message.workspace_id},
                "lockedAt": {"S": rfc3339(now)},
                "expiresAt": lock_expiry(expires_at),
            },
            # An expired lock the TTL sweep has not deleted yet never blocks.
            "ConditionExpression": "attribute_not_exists(pk) OR expiresAt <= :now",
            "ExpressionAttributeValues": {":now": epoch_seconds(now)},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def _chunks(
    written: list[tuple[int, Message, list[dict[str, Any]]]],
    reserved: int = 0,
) -> list[list[tuple[int, Message, list[dict[str, Any]]]]]:
    """In order, as many entries a transaction as its item count (less `reserved`) and size allow."""
    chunks: list[list[tuple[int, Message, list[dict[str, Any]]]]] = [[]]
    items = size = 0
    for entry in written:
        entry_size = len(json.dumps(entry[2], ensure_ascii=False).encode("utf-8"))
        full = (
            items + len(entry[2]) > MAX_TRANSACTION_ITEMS - reserved
            or size + entry_size > MAX_TRANSACTION_BYTES
        )
        if chunks[-1] and full:
            chunks.append([])
            items = size = 0
        chunks[-1].append(entry)
        items += len(entry[2])
        size += entry_size
    return [chunk for chunk in chunks if chunk]
