"""The sending context's store on DynamoDB: create, read, list, edit and cancel messages.

A new message, its dedup lock and its Idempotency-Key tie are written in one transaction, so a
duplicate always finds the original, and a crash never leaves a lock without its message. The same
transaction checks that the recipient is not suppressed (`SuppressionGuard`): a suppressed
recipient's send writes nothing, in the same one call. It takes its unit of the daily quota and its
segments of the daily sms budget there too, each on a shard of its ledger (`dynamodb_limits`). A
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
from msgspec.structs import replace

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
from sendonce.keyed_hash import KeyedHash
from sendonce.limits.model import Ledger, QuotaCharge
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
    SmsBudgetSpent,
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
# suppression checks (`SuppressionGuard`), then the quota counter and the sms budget's.
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
# lock, its key tie, a template's lock and its template's check, and the quota counter. The checks get
# the rest of the 100. The sms budget's counter needs no place of its own: it goes only with an sms,
# which names one recipient (two checks at most), never with an email to many.
CREATE_ITEMS_RESERVED = 6


class _Counters(Struct, frozen=True):
    """What a charged try met on each ledger's shard, in the order of its counters (None: nothing)."""

    met: tuple[Refusal | _QuotaShard | None, ...]


class _LedgerSearch:
    """One ledger's search for a shard with room, in a charged create: its shards in turn from a
    random one, a full one left behind, a busy one tried again after the others, and after a few
    full ones in a row, every shard read at once, so a spent day costs a few calls, not one a shard."""

    def __init__(self, shards: DynamoDbLimits, charge: QuotaCharge) -> None:
        self._shards = shards
        self.charge = charge
        self._attempt = 0
        self._restart()

    def _restart(self) -> None:
        # Every shard known full: one try all the same, which still tells a duplicate or a replay.
        self._to_try = deque(self._shards.shards_to_try(self.charge) or [0])
        self._busy: list[int] = []
        self._full_in_a_row, self._learnt = 0, False

    @property
    def shard(self) -> int:
        return self._to_try[0]

    def met(self, found: Refusal | _QuotaShard, began: float) -> None:
        """Move on from what the shard answered; a shard on another plan is re-planned, waited for or
        followed (`DynamoDbLimits.settle`, 503 after PLAN_WAIT_SECONDS since `began`)."""
        if found is _QuotaShard.BUSY:
            self._busy.append(self._to_try.popleft())
        elif isinstance(found, NoRoom):
            self._to_try.popleft()
            self._full_in_a_row += 1
            if self._full_in_a_row >= PROBES_BEFORE_READING_SHARDS and not self._learnt and self._to_try:
                self._shards.learn_full(self.charge)
                self._learnt, known = True, set(self._shards.shards_to_try(self.charge))
                self._to_try = deque(s for s in self._to_try if s in known)
        elif isinstance(found, Replan | Replanning | Adopt):
            self.charge = self._shards.settle(self.charge, found, began)
            self._restart()

    def spent(self) -> bool:
        """True once every shard of the plan in force was found full. Busy ones are tried again
        after a wait; one that stays busy is a 503, never a 429."""
        if self._to_try:
            return False
        if not self._busy:
            return True
        self._attempt += 1
        if self._attempt >= MAX_ATTEMPTS:
            raise DependencyUnavailable("every quota shard with room stayed busy")
        self._to_try, self._busy = deque(self._busy), []
        # Full jitter, doubling: concurrent creates on a small quota's one shard take turns
        # within about a second and a half in all.
        time.sleep(random.uniform(0, min(0.5, 0.01 * 2**self._attempt)))
        return False


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
        *,
        keyed_hash: KeyedHash,
    ) -> None:
        """`retention`: how long a message is kept after it was sent or due (None: for good).
        `quota`: where a charged create takes its unit of the daily quota. `keyed_hash`: the
        deployment's, which every lock, tie and suppression key is made with."""
        self.keyed_hash = keyed_hash
        self._table = DynamoDbTable(client, table_name)
        self._retention = retention
        self._quota = quota

    def _expires_at(self, message: Message) -> datetime | None:
        # Its workspace's retention when it was accepted, else the stack's; a test twin's: 7 days.
        live = self._retention if message.retention_days is None else timedelta(days=message.retention_days)
        retention = retention_for(message.workspace_id, live)
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
        sms_budget: QuotaCharge | None = None,
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
            keyed=self.keyed_hash,
        )
        draft = _Draft(message, items, partial(self._message_put, due=handoff_due_at), guard, template_at)
        if cap is not None:
            draft.cap, draft.cap_items = (cap, range(cap_at, len(items))), self._require_quota().cap_items
        if not guard.fits:  # a live email to many recipients: read them first (`SuppressionGuard`)
            refused = draft.drop(guard.read_first())
            if refused is not None:
                return refused
        if quota is not None or sms_budget is not None:
            charged = self._create_charged(draft, tie, quota, sms_budget)
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
        self,
        draft: _Draft,
        tie: KeyTie | None,
        quota: QuotaCharge | None,
        sms_budget: QuotaCharge | None = None,
    ) -> CreateOutcome | GateClosed | MadeBefore:
        """The create transaction with its units of a shard of each ledger it is charged on (the
        quota's, the sms budget's): each ledger's shards in turn until one has room (`_LedgerSearch`).
        QuotaSpent (SmsBudgetSpent) only once every shard of that ledger's plan in force was found
        full; a duplicate, a replay or a refusal of the create itself is answered first."""
        shards, began = self._require_quota(), time.monotonic()
        searches = [_LedgerSearch(shards, charge) for charge in (quota, sms_budget) if charge is not None]
        while True:
            for search in searches:
                if search.spent():
                    return QuotaSpent() if search.charge.ledger is Ledger.QUOTA else SmsBudgetSpent()
            outcome = with_retries(
                partial(self._try_charged, draft, tie, searches), "the dedup lock stayed contended"
            )
            if isinstance(outcome, _Recount):
                draft.recount(outcome.cap)  # the same shards, counted in the later bucket
            elif isinstance(outcome, _Dropped):
                refused = draft.drop(outcome.refused)
                if refused is not None:
                    return refused  # else the same shards, without them
            elif isinstance(outcome, _Counters):
                for search, met in zip(searches, outcome.met, strict=True):
                    if met is not None:
                        search.met(met, began)
            else:
                return outcome

    def _try_charged(
        self, draft: _Draft, tie: KeyTie | None, searches: list[_LedgerSearch]
    ) -> CreateOutcome | GateClosed | MadeBefore | _Counters | _Dropped | _Recount:
        message, items, guard = draft.message, draft.items, draft.guard
        checks = guard.items() if guard is not None else []
        counters = len(items) + len(checks)
        ledgers = self._require_quota()
        charged = [
            *items,
            *checks,
            *(ledgers.charge_item(search.charge, search.shard, search.charge.units) for search in searches),
        ]
        stamp = (guard.stamp if guard is not None else "") + draft.cap_stamp
        shards = ".".join(f"{search.shard}.{search.charge.plan.stamp}" for search in searches)
        canceled = self._table.transact(
            charged, token=_token(f"{message.id}.{shards}{'.' + stamp if stamp else ''}")
        )
        if canceled is None:
            return Created(message)
        outcome = self._explain(draft, tie, canceled, guard, len(items))
        if outcome is not None:
            return outcome
        met: list[Refusal | _QuotaShard | None] = []
        for at, search in enumerate(searches, start=counters):
            if canceled.failed(at):
                met.append(ledgers.refusal(search.charge, search.shard, canceled.item(at)))
            elif canceled.codes[at : at + 1] == (CONFLICT,):
                met.append(_QuotaShard.BUSY)
            else:
                met.append(None)
        if any(found is not None for found in met):
            return _Counters(tuple(met))
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
        original = self.count_duplicate(
            message.workspace_id, lock_item["messageId"]["S"], message.idempotency_key, message.batch_key
        )
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
        sms_budget: QuotaCharge | None = None,
    ) -> list[CreateManyOutcome]:
        """Messages and their locks in as few transactions as fit; a held lock, read from the
        cancellation reasons, takes its entry out and the rest are written again. With `gate`, each
        transaction checks the campaign's gate last. Charged, a transaction takes its entries' units
        of a shard of each ledger (a unit an entry of the quota, their segments of the sms budget)."""
        written = []
        for index, entry in enumerate(entries):
            claim = entry.claim
            message = claim.taken_by(entry.message)
            written.append((index, message, self._create_items(message, entry, now)))
        # The entries hold distinct locks (the batch sender made identical ones one entry), so the
        # transactions are independent: side by side, and a chunk that fails fails alone.
        outcomes: dict[int, CreateManyOutcome] = {}
        charges = _BulkCharges(quota, sms_budget, {i: entry.segments for i, entry in enumerate(entries)})
        # A charged transaction keeps room for its counters, a campaign's for its gate check.
        chunks = _chunks(written, reserved=len(charges.ledgers) + (gate is not None))
        for chunk_outcomes in side_by_side(
            lambda chunk: self._create_chunk(chunk, now, charges, gate), chunks
        ):
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
        charges: _BulkCharges,
        gate: CampaignGate | None = None,
    ) -> dict[int, CreateManyOutcome]:
        """The chunk's outcomes by entry index; each is NotWritten when DynamoDB stays unavailable."""
        outcomes: dict[int, CreateManyOutcome] = {}
        try:
            self._write_chunk(chunk, now, outcomes, charges, gate)
        except DependencyUnavailable as error:
            for index, _, _ in chunk:
                outcomes.setdefault(index, NotWritten(str(error)))
        return outcomes

    def _write_chunk(
        self,
        chunk: list[tuple[int, Message, list[dict[str, Any]]]],
        now: datetime,
        outcomes: dict[int, CreateManyOutcome],
        charges: _BulkCharges,
        gate: CampaignGate | None = None,
    ) -> None:
        pending = list(chunk)
        conflicts = 0
        began = time.monotonic()
        # By ledger, the shards that had no room for this chunk.
        refused: dict[Ledger, set[int]] = {charge.ledger: set() for charge in charges.ledgers}
        while pending:
            items = [item for _, _, pair in pending for item in pair]
            counted: list[tuple[QuotaCharge, int]] = []  # each counter's charge and shard, in order
            for charge in charges.ledgers:
                units = charges.units(charge.ledger, pending)
                if units == 0:
                    continue  # no sms among them: nothing of the sms budget
                shard = self._shard_with_room(charge, refused[charge.ledger])
                if shard is None:  # near the day's end: entry by entry, each on a shard with room
                    self._write_one_by_one(pending, now, outcomes, charges, gate)
                    return
                counted.append((charge, shard))
                items.append(self._require_quota().charge_item(charge, shard, units))
            gate_at = None
            if gate is not None:
                gate_at = len(items)
                items.append(_gate_check(gate))
            # The same messages, the same token: the SDK's retry of a lost answer writes nothing twice.
            shards = ".".join(f"{shard}.{charge.plan.stamp}" for charge, shard in counted) or "None."
            token = _token(f"{','.join(m.id for _, m, _ in pending)}.{shards}")
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
            moved = self._counters_met(canceled, first, counted, refused, began)
            if moved is not None:
                charges = charges.settled(*moved)
                continue
            if not canceled.contended or conflicts + 1 >= MAX_ATTEMPTS:
                raise DependencyUnavailable(f"the bulk create transaction was canceled: {canceled.codes}")
            conflicts += 1
            time.sleep(random.uniform(0.005, 0.02) * conflicts)

    def _counters_met(
        self,
        canceled: Cancellation,
        first: int,
        counted: list[tuple[QuotaCharge, int]],
        refused: dict[Ledger, set[int]],
        began: float,
    ) -> tuple[QuotaCharge, ...] | None:
        """What a bulk transaction's counters (from `first`) met: a shard with less room than the
        chunk needs is left for another (a few at most, `refused`); one on another plan is settled.
        The charges to go on with; None when no counter refused."""
        met, charges = False, []
        for at, (charge, shard) in enumerate(counted, start=first):
            if not canceled.failed(at):
                continue
            met, refusal = True, self._require_quota().refusal(charge, shard, canceled.item(at))
            if isinstance(refusal, NoRoom):
                refused[charge.ledger].add(shard)
            else:
                charges.append(self._require_quota().settle(charge, refusal, began))
                refused[charge.ledger] = set()
        return tuple(charges) if met else None

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
        charges: _BulkCharges,
        gate: CampaignGate | None = None,
    ) -> None:
        """In order, each entry as `create` writes it with its units of each ledger (and its gate check)."""
        for index, message, entry_items in pending:
            campaign_at = len(entry_items) - 1 if message.campaign_lock_id is not None else None
            items, gate_at = list(entry_items), None
            if gate is not None:
                gate_at = len(items)
                items.append(_gate_check(gate))
            draft = _Draft(message, items, campaign_at=campaign_at, gate_at=gate_at)
            outcome = self._create_charged(draft, None, charges.quota, charges.sms_budget_of(index))
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

    def count_duplicate(
        self,
        workspace_id: str,
        message_id: str,
        answered_under: str | None = None,
        batch_key: str | None = None,
    ) -> Message | None:
        """The original a duplicate was caught against, read by the write that records the catch:
        the committed count is what tells the customer's endpoints (`message.duplicate_blocked`).
        The duplicate's Idempotency-Key (`answered_under`), whose stored answer shows the original,
        is added to its `answeredUnder` in the same write: an erasure finds that answer from it."""
        values: dict[str, Any] = {":one": {"N": "1"}, ":ws": {"S": workspace_id}}
        update = "ADD duplicatesBlocked :one"
        if answered_under is not None:
            update += ", answeredUnder :keys"
            values[":keys"] = {"SS": [answered_under]}
        if batch_key is not None:
            update += ", batchKeys :batch"
            values[":batch"] = {"SS": [batch_key]}
        answer = self._table.write(
            "update_item",
            Key=message_key(message_id),
            UpdateExpression=update,
            ConditionExpression="workspaceId = :ws",  # also: never an item where there is none
            ExpressionAttributeValues=values,
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


class _BulkCharges(Struct, frozen=True):
    """What a bulk create is charged on: the quota (a unit an entry) and the sms budget (each entry's
    segments, by entry index), either None when the workspace has none."""

    quota: QuotaCharge | None
    sms_budget: QuotaCharge | None
    segments: dict[int, int]

    @property
    def ledgers(self) -> tuple[QuotaCharge, ...]:
        return tuple(charge for charge in (self.quota, self.sms_budget) if charge is not None)

    def units(self, ledger: Ledger, pending: Sequence[tuple[int, Message, Any]]) -> int:
        """What the `pending` entries take of `ledger` together."""
        if ledger is Ledger.QUOTA:
            return len(pending)
        return sum(self.segments.get(index, 0) for index, _, _ in pending)

    def sms_budget_of(self, index: int) -> QuotaCharge | None:
        """The charge of entry `index` alone on the sms budget; None when it takes none of it."""
        segments = self.segments.get(index, 0)
        return self.sms_budget.taking(segments) if self.sms_budget is not None and segments else None

    def settled(self, *charges: QuotaCharge) -> _BulkCharges:
        """These charges with `charges` (re-planned or adopted) in place of their ledgers'."""
        settled = self
        for charge in charges:
            if charge.ledger is Ledger.QUOTA:
                settled = replace(settled, quota=charge)
            else:
                settled = replace(settled, sms_budget=charge)
        return settled


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
