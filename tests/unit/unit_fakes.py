"""In-memory fakes of the ports (no sockets, no AWS) and a clock the tests move. The store contract
tests (tests/store) run on the stores' fakes too, beside moto and DynamoDB Local."""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from msgspec.structs import replace
from sendonce.activity.counts import PromiseCount, PromiseDay, PromiseKind
from sendonce.activity.model import RecordedProviderEvent
from sendonce.adapters.dynamodb_items import PROVIDER_EVENT_RETENTION, outbox_shard, parse_datetime, to_item
from sendonce.adapters.dynamodb_suppressions import decode_cursor, encode_cursor
from sendonce.adapters.dynamodb_templates import cursor_name, name_cursor
from sendonce.adapters.dynamodb_webhooks import looks_like_event_id
from sendonce.api.dependencies import ApiDependencies
from sendonce.api.idempotency import idempotency_config
from sendonce.auth.api_keys import ApiKeyStore, hash_api_key
from sendonce.clock import Clock, rfc3339
from sendonce.controls.cap import RecipientCap
from sendonce.dedup.identity import dedup_identity
from sendonce.dispatch.ports import (
    ClaimedMessage,
    ClaimRefused,
    ClaimSuppressed,
    OutboxEntry,
    Reclaim,
    SettleRefused,
)
from sendonce.entrypoints.handoff import hand_off_batch
from sendonce.errors import (
    DependencyUnavailable,
    InvalidCursor,
    MessageNotCancelable,
    MessageNotFound,
    QueueUnavailable,
)
from sendonce.keyed_hash import KeyedHash
from sendonce.limits.model import Ledger, Limits, LimitsChange, LimitsTimeline, QuotaCharge, QuotaPlan, Window
from sendonce.messages.ids import looks_like_message_id, new_message_id
from sendonce.messages.model import (
    WAITING_STATUSES,
    Channel,
    Message,
    MessageFailure,
    ProviderAttempt,
    Status,
)
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
    Handoff,
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
from sendonce.messages.service import MessageService
from sendonce.provider_events.model import APPLIES_FROM, RESULTING_STATUS, ProviderEvent
from sendonce.provider_events.ports import ApplyResult, EventOutcome
from sendonce.settings import ApiSettings
from sendonce.simulator.ports import MAX_LISTED, SimulatedDelivery
from sendonce.status_webhooks.model import (
    Delivery,
    DeliveryStatus,
    Endpoint,
    Event,
)
from sendonce.status_webhooks.ports import (
    Applied,
    Attempt,
    Changed,
    DeliveryTask,
    EventPage,
    Gone,
    Replaced,
    Replacement,
    TooManyEndpoints,
)
from sendonce.status_webhooks.rules import (
    EventType,
)
from sendonce.status_webhooks.service import WebhookService
from sendonce.suppressions.model import Suppression, recipient_key, shares_opt_outs
from sendonce.suppressions.ports import SuppressionPage
from sendonce.templates import jinja
from sendonce.templates.model import NAME, Template, TemplateContent, TemplatePage
from sendonce.templates.ports import NameTaken, TemplateMissing
from sendonce.templates.rendering import OUTPUT_CHARACTERS, InvalidSource, RenderOutcome

if TYPE_CHECKING:
    from sendonce.status_webhooks.model import CampaignTally

    from tests.unit.campaign_fakes import InMemoryCampaignStore

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
T = TypeVar("T")


@dataclass
class ManualClock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class _Lock:
    message_id: str
    locked_at: datetime
    expires_at: datetime


def _atomic(method: Callable[..., T]) -> Callable[..., T]:
    """The method runs alone on its fake, as each DynamoDB request (or transaction) runs atomically."""

    @functools.wraps(method)
    def alone(self: Any, *args: Any, **kwargs: Any) -> T:
        with self.guard:
            return method(self, *args, **kwargs)

    return alone


@dataclass
class InMemoryProviderHealth:
    """ProviderHealth's rules, in memory, shared by every "execution environment" holding it: a run
    of `after` failures to accept starts a cool-off of `seconds` (once, however many count at once),
    and an acceptance ends the run."""

    after: int = 5
    seconds: float = 60.0
    runs: dict[str, int] = field(default_factory=dict)
    cool_until: dict[str, datetime] = field(default_factory=dict)
    guard: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def cooling(self, providers: Collection[str], now: datetime) -> frozenset[str]:
        with self.guard:
            return frozenset(p for p in providers if p in self.cool_until and self.cool_until[p] > now)

    def not_accepted(self, provider: str, now: datetime) -> bool:
        with self.guard:
            self.runs[provider] = self.runs.get(provider, 0) + 1
            if self.runs[provider] < self.after:
                return False
            self.runs[provider] = 0
            self.cool_until[provider] = now + timedelta(seconds=self.seconds)
            return True

    def accepted(self, provider: str, now: datetime) -> None:
        with self.guard:
            self.runs[provider] = 0


class InMemorySuppressions:
    """The suppression list as the DynamoDB adapter keeps it: a workspace's own entries, the shared
    entries (opt-outs naming no message, `None` workspace) and a workspace's removals of those. Each
    call runs alone; a listing resumes below its cursor, the adapter's own."""

    def __init__(self) -> None:
        self.own: dict[tuple[str, str], Suppression | datetime] = {}  # a datetime: removed then
        self.shared: dict[str, Suppression] = {}
        self.reads = 0
        self.guard = threading.RLock()

    @_atomic
    def put(self, workspace_id: str | None, entry: Suppression) -> None:
        """What an applied provider event writes (`dynamodb_suppressions.entry_update`)."""
        if workspace_id is None:
            self.shared[entry.key] = entry  # renewed: in force again where it was removed
        elif not isinstance(self.own.get((workspace_id, entry.key)), Suppression):
            self.own[(workspace_id, entry.key)] = entry

    def in_force(self, workspace_id: str, key: str) -> Suppression | None:
        """The entry that suppresses `key` for the workspace, if any (what a write's check finds)."""
        with self.guard:
            return self._in_force(workspace_id, key)

    def _in_force(self, workspace_id: str, key: str) -> Suppression | None:
        own = self.own.get((workspace_id, key))
        shared = self.shared.get(key) if shares_opt_outs(workspace_id) else None
        if isinstance(own, Suppression):
            return own
        if shared is None or (isinstance(own, datetime) and own >= shared.created_at):
            return None
        return shared

    def refused(self, workspace_id: str, addresses: Sequence[str]) -> dict[str, Suppression]:
        """The entries in force for these recipients, by key, in the recipients' order."""
        with self.guard:
            found = {recipient_key(a): self._in_force(workspace_id, recipient_key(a)) for a in addresses}
        return {key: entry for key, entry in found.items() if entry is not None}

    @_atomic
    def find_many(self, workspace_id: str, keys: Any) -> dict[str, Suppression]:
        self.reads += 1
        found = {key: self._in_force(workspace_id, key) for key in keys}
        return {key: entry for key, entry in found.items() if entry is not None}

    @_atomic
    def add(self, workspace_id: str, suppression: Suppression) -> tuple[Suppression, bool]:
        existing = self._in_force(workspace_id, suppression.key)
        if existing is not None:
            return existing, False
        self.own[(workspace_id, suppression.key)] = suppression
        return suppression, True

    @_atomic
    def remove(self, workspace_id: str, key: str, now: datetime) -> bool:
        if self._in_force(workspace_id, key) is None:
            return False
        if key in self.shared and shares_opt_outs(workspace_id):
            self.own[(workspace_id, key)] = now
        else:
            del self.own[(workspace_id, key)]
        return True

    @_atomic
    def list(self, workspace_id: str, limit: int, cursor: str | None) -> SuppressionPage:
        below = decode_cursor(cursor) if cursor is not None else None  # InvalidCursor if never given
        keys = {key for ws, key in self.own if ws == workspace_id}
        if shares_opt_outs(workspace_id):
            keys |= set(self.shared)
        entries = [entry for key in keys if (entry := self._in_force(workspace_id, key)) is not None]
        # Newest first by the adapter's listing id, `<createdAt>#<key>`.
        listed = sorted(
            ((f"{rfc3339(e.created_at)}#{e.key}", e) for e in entries), key=lambda pair: pair[0], reverse=True
        )
        if below is not None:
            listed = [(listing_id, e) for listing_id, e in listed if listing_id < below]
        page = listed[:limit]
        more = len(listed) > limit
        return SuppressionPage([e for _, e in page], encode_cursor(page[-1][0]) if more and page else None)


class InProcessRenderer:
    """The renderer's Jinja2 side, run in this process: the forked renderer's rules but its bounds of
    time and memory, which need a process of their own (tests/unit/test_forked_renderer.py)."""

    def __init__(self, output_characters: int = OUTPUT_CHARACTERS) -> None:
        self.output_characters = output_characters

    def check(self, content: TemplateContent) -> list[InvalidSource]:
        return jinja.check(content)

    def render(self, content: TemplateContent, data: Mapping[str, Any]) -> RenderOutcome:
        return jinja.render_here(content, data, self.output_characters)


class InMemoryTemplates:
    """Templates as the DynamoDB adapter keeps them: a head per (workspace, name), never removed,
    its numbers going on after a delete; each version written once, never changed; times kept to
    the millisecond, as stored. A listing goes by name and resumes after its cursor, the adapter's
    own. Each call runs alone, as each transaction does."""

    def __init__(self) -> None:
        # The latest version of each name, and when it was deleted (None: live).
        self.heads: dict[tuple[str, str], tuple[Template, datetime | None]] = {}
        self.versions: dict[tuple[str, str, int], Template] = {}
        self.guard = threading.RLock()

    def _live(self, workspace_id: str, name: str) -> Template | None:
        latest, deleted = self.heads.get((workspace_id, name), (None, None))
        return latest if deleted is None else None

    def _write(self, template: Template) -> Template:
        stored = replace(template, created_at=parse_datetime(rfc3339(template.created_at)))
        key = (stored.workspace_id, stored.name, stored.version)
        assert key not in self.versions, f"version {key} written twice"  # the adapter's condition
        self.versions[key] = stored
        self.heads[(stored.workspace_id, stored.name)] = (stored, None)
        return stored

    @_atomic
    def head(self, workspace_id: str, name: str) -> Template | None:
        """The live head a create's ConditionCheck reads (no read of the template store's own)."""
        return self._live(workspace_id, name)

    @_atomic
    def create(self, template: Template) -> Template | NameTaken:
        if not NAME.fullmatch(template.name):
            raise ValueError(f"{template.name!r} is no template name")
        current = self._live(template.workspace_id, template.name)
        if current is not None:
            return NameTaken(current)
        head = self.heads.get((template.workspace_id, template.name))
        return self._write(replace(template, version=(head[0].version if head else 0) + 1))

    @_atomic
    def add_version(
        self, workspace_id: str, name: str, content: TemplateContent, now: datetime
    ) -> Template | TemplateMissing:
        latest = self._live(workspace_id, name)
        if latest is None:
            return TemplateMissing()
        return self._write(replace(latest, version=latest.version + 1, content=content, created_at=now))

    @_atomic
    def latest(self, workspace_id: str, name: str) -> Template | None:
        return self._live(workspace_id, name)

    @_atomic
    def version(self, workspace_id: str, name: str, version: int) -> Template | None:
        if self._live(workspace_id, name) is None:
            return None
        return self.versions.get((workspace_id, name, version))

    @_atomic
    def page(self, workspace_id: str, limit: int, cursor: str | None) -> TemplatePage:
        after = cursor_name(cursor) if cursor is not None else None  # InvalidCursor if never given
        names = sorted(
            name
            for workspace, name in self.heads
            if workspace == workspace_id and (after is None or name > after)
        )
        listed = [latest for name in names if (latest := self._live(workspace_id, name)) is not None]
        page = listed[:limit]
        more = len(listed) > limit and bool(page)
        return TemplatePage(page, name_cursor(page[-1].name) if more else None)

    @_atomic
    def delete(self, workspace_id: str, name: str, now: datetime) -> bool:
        latest = self._live(workspace_id, name)
        if latest is None:
            return False
        self.heads[(workspace_id, name)] = (latest, now)
        return True


# The tests' hashing key: what every fake and test store holds identities under.
TEST_KEYED_HASH = KeyedHash(lambda: "the tests' hashing key, never a deployment's")

LAST = -(2**62)  # a cap item's last bucket, among its frames' counts


@dataclass
class InMemoryStore:
    """The sending, delivery and outbox stores in memory, with the same conditional rules as the
    DynamoDB adapters. Each call runs alone, as each request to DynamoDB does; the store contract
    tests (tests/store) run on it beside moto and DynamoDB Local."""

    messages: dict[str, Message] = field(default_factory=dict)
    # What identities are held as: the tests' own key (a deployment's is its HashingKeySecret).
    keyed_hash: KeyedHash = field(default_factory=lambda: TEST_KEYED_HASH)
    locks: dict[str, _Lock] = field(default_factory=dict)
    ties: dict[str, tuple[str, str]] = field(default_factory=dict)  # tie id -> (message id, fingerprint)
    released: list[str] = field(default_factory=list)
    finished: list[tuple[str, Status]] = field(default_factory=list)
    first_attempts: dict[str, datetime] = field(default_factory=dict)
    throttled: dict[str, int] = field(default_factory=dict)
    refuse_claims: bool = False
    # The outbox: when each message in it is due (the one create computes, then an edit's new one,
    # a claim's deadline, an attempt's retry, or now when an edit's hand-off is owed at once). A
    # message that needs nothing more (canceled, finished) is not in it.
    outbox_due: dict[str, datetime] = field(default_factory=dict)
    reclaims: dict[str, int] = field(default_factory=dict)  # dead claims put back, by message
    # Bulk creates: how many calls, the originals each caught duplicate was counted on, and a fault.
    bulk_calls: int = 0
    duplicates_counted: list[str] = field(default_factory=list)
    fail_bulk_after: int | None = None
    gates: dict[str, bool] = field(default_factory=dict)  # campaign id -> open: what its creates check
    quota_used: dict[tuple[str, str], int] = field(default_factory=dict)  # (workspace, day): units taken
    # The frequency cap's items: (recipient digest, window, group) -> frame -> messages counted, and
    # under LAST the last bucket counted in.
    cap_counts: dict[tuple[str, int, int], dict[int, int]] = field(default_factory=dict)
    # The plan each (workspace, day) is counted under: the latest one met (`QuotaPlan.supersedes`).
    quota_plans: dict[tuple[str, str], QuotaPlan] = field(default_factory=dict)
    # The sms budget's ledger, as the quota's: segments taken, and the plan, by (workspace, day).
    segments_used: dict[tuple[str, str], int] = field(default_factory=dict)
    segments_plans: dict[tuple[str, str], QuotaPlan] = field(default_factory=dict)
    # The table's stream of creations, as HandoffFunction reads it: the real item image of each.
    stream: list[dict[str, Any]] = field(default_factory=list)
    # The suppression list, in the same table: a create and a claim check it in their own write.
    suppressions: InMemorySuppressions = field(default_factory=InMemorySuppressions)
    # The templates, in the same table: a create from a template checks its head in its own write.
    templates: InMemoryTemplates | None = None
    guard: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    def _created(self, message: Message, handoff_due_at: datetime) -> None:
        self.messages[message.id] = message
        self.outbox_due[message.id] = handoff_due_at
        image = to_item(message, handoff_due_at)
        number = f"{len(self.stream) + 1:021d}"
        keys = {"pk": image["pk"], "sk": image["sk"]}
        self.stream.append(
            {"eventName": "INSERT", "dynamodb": {"Keys": keys, "NewImage": image, "SequenceNumber": number}}
        )

    def _held(self, lock_id: str, now: datetime) -> _Lock | None:
        """The lock, unless it expired (an expired lock the TTL sweep has not deleted never blocks)."""
        lock = self.locks.get(lock_id)
        # The adapter's rule: its expiry rounded up to a whole second, against now's whole second.
        held = lock is not None and math.ceil(lock.expires_at.timestamp()) > int(now.timestamp())
        return lock if held else None

    @_atomic
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
        lock = self._held(claim.lock_id, now)
        if lock is not None and lock.message_id == message.id:
            return Created(message)  # this very create, written before: a retry writes nothing twice
        if lock is None and claim.template_lock_id is not None:
            lock = self._held(claim.template_lock_id, now)  # the second lock, in the same write
        # Every recipient checked (the adapter's checks, or its read when they do not fit): the
        # suppressed ones dropped, and with nobody left, refused before a tie or a lock.
        refused = self.suppressions.refused(message.workspace_id, message.recipients)
        if refused:
            left = message.without(refused.keys())
            if left is None:
                return Suppressed(next(iter(refused.values())).reason.value)
            message = left
        if tie is not None and tie.tie_id in self.ties:
            message_id, fingerprint = self.ties[tie.tie_id]
            return TiedToKey(original=self.messages.get(message_id), payload_fingerprint=fingerprint)
        if lock is not None:
            original = self.count_duplicate(message.workspace_id, lock.message_id)
            return DuplicateOf(original=original, locked_at=lock.locked_at)
        if template is not None and self.templates is not None:
            head = self.templates.head(message.workspace_id, template.name)
            if head is None or (template.latest and head.version != template.version):
                return TemplateChanged()
        if message.id in self.messages:
            raise DependencyUnavailable("the create transaction was canceled: the message id is taken")
        capped = self._capped(cap)
        if isinstance(capped, Capped):
            return capped
        cap = capped
        spent = self._take_charges(quota, sms_budget)
        if spent is not None:
            return spent
        self._count_cap(cap)
        self._created(message, handoff_due_at)
        for lock_id in message.lock_ids:
            self.locks[lock_id] = _Lock(message.id, now, claim.expires_at)
        if tie is not None:
            self.ties[tie.tie_id] = (message.id, tie.payload_fingerprint)
        return Created(message)

    def _capped(self, cap: RecipientCap | None) -> Capped | RecipientCap | None:
        """The adapter's conditions, item by item: frame k-10 has room and no later bucket was
        counted (`sendonce.controls.cap`); the refused items' frames tell the Retry-After. With
        room: the cap to count in (a later bucket's, as the adapter's recount)."""
        while cap is not None:
            found: dict[int, int] = {}
            later = cap.bucket
            for frames in cap.frames():
                counts = self.cap_counts.get((frames.recipient, cap.window_seconds, frames.group), {})
                full = frames.fullest is not None and counts.get(frames.fullest, 0) >= cap.limit
                ahead = frames.holds_last and counts.get(LAST, cap.bucket) > cap.bucket
                if full or ahead:
                    found.update({frame: count for frame, count in counts.items() if frame != LAST})
                    later = max(later, counts.get(LAST, later))
            if later > cap.bucket:  # a count in a later bucket: counted in it instead
                cap = cap.in_bucket(later)
                continue
            return Capped(cap.retry_after(found)) if found else cap
        return None

    def _count_cap(self, cap: RecipientCap | None) -> None:
        for frames in cap.frames() if cap is not None else ():
            counts = self.cap_counts.setdefault((frames.recipient, cap.window_seconds, frames.group), {})
            for frame in frames.frames:
                counts[frame] = counts.get(frame, 0) + 1
            if frames.holds_last:
                counts[LAST] = cap.bucket

    @_atomic
    def edit(self, edit: MessageEdit, now: datetime) -> EditOutcome:
        seen = edit.seen
        current = self.get(seen.workspace_id, seen.id)
        if current is None:
            raise MessageNotFound(seen.id)
        # The adapter's condition: still scheduled (handed over or not) and as read.
        if current.status is not Status.SCHEDULED:
            return NotEditable(current.status)
        if current != seen:
            return EditRaced()
        if edit.claim is not None:
            held = self._held(edit.claim.lock_id, now)
            if held is not None and held.message_id != seen.id:
                return ContentHeld(held.message_id)
            old = self.locks.get(seen.dedup_lock_id or "")
            if old is not None and old.message_id == seen.id:
                del self.locks[seen.dedup_lock_id or ""]
            self.locks[edit.claim.lock_id] = _Lock(seen.id, now, edit.claim.expires_at)
        if edit.tie is not None and self.ties.get(edit.tie.tie_id, ("",))[0] == seen.id:
            self.ties[edit.tie.tie_id] = (seen.id, edit.tie.payload_fingerprint)
        self.messages[seen.id] = edit.edited
        if edit.handoff_due_at is not None and edit.edited.send_at is not None:
            self.outbox_due[seen.id] = edit.handoff_due_at  # a new sendAt; otherwise the due time stays
        return Edited(edit.edited)

    @_atomic
    def owe_handoff(self, edit: MessageEdit, now: datetime) -> bool:
        current = self.get(edit.edited.workspace_id, edit.edited.id)
        if (
            current is None
            or current.status is not Status.SCHEDULED
            or edit.edited.send_at is None
            or current.send_at != edit.edited.send_at
            or edit.handoff_due_at is None
            or self.outbox_due.get(current.id) != edit.handoff_due_at
        ):
            return False
        self.outbox_due[current.id] = now
        return True

    @_atomic
    def get(self, workspace_id: str, message_id: str) -> Message | None:
        message = self.messages.get(message_id)
        return message if message is not None and message.workspace_id == workspace_id else None

    @_atomic
    def list(self, workspace_id: str, which: MessageFilter, limit: int, cursor: str | None) -> Page:
        if cursor is not None and not looks_like_message_id(cursor):
            raise InvalidCursor(cursor)
        found = sorted(
            (m for m in self.messages.values() if m.workspace_id == workspace_id),
            key=lambda m: m.id,
            reverse=True,
        )
        if cursor is not None:
            found = [m for m in found if m.id < cursor]  # listing resumes after the last id seen
        if which.reads_items and len(found) > MAX_FILTERED_READS:
            # The adapter's read budget: the page ends where its reads did.
            read = found[:MAX_FILTERED_READS]
            admitted = [m for m in read if which.admits(m)]
            if len(admitted) <= limit:
                return Page(admitted, read[-1].id)
        found = [m for m in found if which.admits(m)]
        return Page(found[:limit], found[limit - 1].id if len(found) > limit else None)

    @_atomic
    def cancel(self, workspace_id: str, message_id: str, now: datetime) -> Message:
        message = self.get(workspace_id, message_id)
        if message is None:
            raise MessageNotFound(message_id)
        if message.status not in WAITING_STATUSES or message.attempts:
            raise MessageNotCancelable(message.status.value)
        self.messages[message_id] = message.with_status(Status.CANCELED, now)
        self.outbox_due.pop(message_id, None)
        return self.messages[message_id]

    @_atomic
    def claim(
        self,
        workspace_id: str,
        message_id: str,
        now: datetime,
        claim_seconds: int,
        *,
        seen: Message | None = None,
        unless_suppressed: bool = True,
    ) -> ClaimedMessage | ClaimRefused | ClaimSuppressed:
        """The adapter's: a copy that is no longer the message is replaced by the message as it is
        (`seen` changes which requests are made, never what is claimed)."""
        current = self.get(workspace_id, message_id)
        if self.refuse_claims or current is None or current.status not in WAITING_STATUSES:
            return ClaimRefused(current=current)
        if current.send_at is not None and current.send_at > now:
            return ClaimRefused(current=current, not_due_until=current.send_at)
        refused = self.suppressions.refused(workspace_id, current.recipients) if unless_suppressed else {}
        if refused:  # the adapter's: the suppressed recipients dropped, and with nobody left, refused
            left = current.without(refused.keys())
            if left is None:
                return ClaimSuppressed(next(iter(refused.values())).reason.value)
            current = left
        claimed = replace(current.with_status(Status.SENDING, now), attempts=current.attempts + 1, error=None)
        self.messages[message_id] = claimed
        self.outbox_due[message_id] = now + timedelta(seconds=claim_seconds)  # a dead claim's deadline
        first = self.first_attempts.setdefault(message_id, now)
        return ClaimedMessage.of(claimed, first, self.throttled.get(message_id, 0))

    @_atomic
    def finish_attempt(
        self,
        message: Message,
        status: Status,
        now: datetime,
        *,
        error: MessageFailure | None = None,
        provider_message_id: str | None = None,
        handoff_due_at: datetime | None = None,
        throttled: bool = False,
        provider: str | None = None,
        provider_attempts: tuple[ProviderAttempt, ...] | None = None,
    ) -> bool:
        current = self.messages.get(message.id)
        if current is None or current.status is not Status.SENDING or current.attempts != message.attempts:
            return False
        self.messages[message.id] = replace(
            current.with_status(status, now),
            error=error,
            provider_message_id=provider_message_id or current.provider_message_id,
            provider=provider or current.provider,
            provider_attempts=current.provider_attempts if provider_attempts is None else provider_attempts,
        )
        if handoff_due_at is not None:
            self.outbox_due[message.id] = handoff_due_at
        else:
            self.outbox_due.pop(message.id, None)
        if throttled:
            self.throttled[message.id] = self.throttled.get(message.id, 0) + 1
        self.finished.append((message.id, status))
        return True

    @_atomic
    def next_attempt(
        self,
        message: ClaimedMessage,
        now: datetime,
        claim_seconds: int,
        provider_attempts: tuple[ProviderAttempt, ...],
    ) -> ClaimedMessage | None:
        current = self.messages.get(message.id)
        if current is None or current.status is not Status.SENDING or current.attempts != message.attempts:
            return None
        moved = replace(
            current, attempts=current.attempts + 1, updated_at=now, provider_attempts=provider_attempts
        )
        self.messages[message.id] = moved
        self.outbox_due[message.id] = now + timedelta(seconds=claim_seconds)
        self.first_attempts[message.id] = now
        self.throttled.pop(message.id, None)
        return ClaimedMessage.of(moved, now, 0)

    @_atomic
    def record_taken(
        self, message: ClaimedMessage, provider: str, provider_attempts: tuple[ProviderAttempt, ...]
    ) -> bool:
        current = self.messages.get(message.id)
        if (
            current is None
            or current.attempts != message.attempts
            or current.status not in {Status.SENT, Status.DELIVERED, Status.FAILED}
            or len(current.provider_attempts) != len(message.provider_attempts)
        ):
            return False
        self.messages[message.id] = replace(
            current, provider=current.provider or provider, provider_attempts=provider_attempts
        )
        return True

    @_atomic
    def settle_unknown(self, message_id: str, status: Status, now: datetime) -> Message | SettleRefused:
        current = self.messages.get(message_id)
        if current is None or current.status is not Status.UNKNOWN:
            return SettleRefused(current=current)
        error = current.error or MessageFailure("settled_failed", "an operator settled the message as failed")
        settled = replace(current.with_status(status, now), error=error if status is Status.FAILED else None)
        self.messages[message_id] = settled
        return settled

    @_atomic
    def release_dedup_lock(self, message: Message) -> None:
        held = [
            lock_id
            for lock_id in message.lock_ids
            if getattr(self.locks.get(lock_id), "message_id", None) == message.id
        ]
        for lock_id in held:
            del self.locks[lock_id]
        if held:
            self.released.append(message.id)

    def _take_charges(
        self, quota: QuotaCharge | None, sms_budget: QuotaCharge | None
    ) -> QuotaSpent | SmsBudgetSpent | None:
        """The charges' units, each while its ledger's plan for the day has room, or none of them
        (one transaction): the first ledger without room, else None."""
        charges = [charge for charge in (quota, sms_budget) if charge is not None]
        for charge in charges:
            if not self._has_room(charge):
                return QuotaSpent() if charge.ledger is Ledger.QUOTA else SmsBudgetSpent()
        for charge in charges:
            used = self._ledger(charge)[0]
            day = (charge.workspace_id, charge.day)
            used[day] = used.get(day, 0) + charge.units
        return None

    def _ledger(
        self, charge: QuotaCharge
    ) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], QuotaPlan]]:
        if charge.ledger is Ledger.QUOTA:
            return self.quota_used, self.quota_plans
        return self.segments_used, self.segments_plans

    def _has_room(self, charge: QuotaCharge) -> bool:
        """Room for the charge's units under the day's plan: a charge made under an older plan than the
        day has met counts under the later one, as the shards' plan stamp makes it."""
        used, plans = self._ledger(charge)
        day = (charge.workspace_id, charge.day)
        plan = plans.get(day)
        if plan is None or charge.plan.supersedes(plan):
            plan = plans[day] = charge.plan
        return used.get(day, 0) + charge.units <= plan.quota

    @_atomic
    def create_many(
        self,
        entries: Sequence[NewMessage],
        now: datetime,
        quota: QuotaCharge | None = None,
        gate: CampaignGate | None = None,
        sms_budget: QuotaCharge | None = None,
    ) -> list[CreateManyOutcome]:
        """As `create` without a tie, entry by entry; `fail_bulk_after` writes that many, then fails.
        With `gate`: GateClosed while the campaign's gate (`gates`) is not open, and an entry whose
        campaign lock is held by another message is MadeBefore."""
        self.bulk_calls += 1
        outcomes: list[CreateManyOutcome] = []
        for entry in entries:
            if self.fail_bulk_after is not None and self.fail_bulk_after <= 0:
                outcomes.append(NotWritten("the store is down"))
                continue
            if self.fail_bulk_after is not None:
                self.fail_bulk_after -= 1
            claim = entry.claim
            message = claim.taken_by(entry.message)
            if gate is not None and not self.gates.get(gate.campaign_id, False):
                outcomes.append(GateClosed())
                continue
            if claim.campaign_lock_id is not None:
                held = self._held(claim.campaign_lock_id, now)
                if held is not None and held.message_id != message.id:
                    outcomes.append(MadeBefore(original=self.get(message.workspace_id, held.message_id)))
                    continue
            lock = self._held(claim.lock_id, now)
            if lock is None and claim.template_lock_id is not None:
                lock = self._held(claim.template_lock_id, now)
            if message.id in self.messages or (lock is not None and lock.message_id == message.id):
                outcomes.append(Created(message))  # written by an earlier try of this very entry
                continue
            if lock is not None:
                original = self.count_duplicate(entry.message.workspace_id, lock.message_id)
                outcomes.append(DuplicateOf(original=original, locked_at=lock.locked_at))
                continue
            budget = sms_budget.taking(entry.segments) if sms_budget is not None and entry.segments else None
            spent = self._take_charges(quota, budget)
            if spent is not None:
                outcomes.append(spent)
                continue
            self._created(message, entry.handoff_due_at)
            for lock_id in message.lock_ids:
                self.locks[lock_id] = _Lock(message.id, now, claim.expires_at)
            if claim.campaign_lock_id is not None:
                expires_at = claim.campaign_lock_expires_at or claim.expires_at
                self.locks[claim.campaign_lock_id] = _Lock(message.id, now, expires_at)
            outcomes.append(Created(message))
        return outcomes

    @_atomic
    def count_duplicate(
        self,
        workspace_id: str,
        message_id: str,
        answered_under: str | None = None,
        batch_key: str | None = None,
    ) -> Message | None:
        self.duplicates_counted.append(message_id)
        return self.get(workspace_id, message_id)

    # ------------------------------------------------------------------------ the outbox
    def _entry(self, message: Message, due_at: datetime) -> OutboxEntry:
        return OutboxEntry(
            id=message.id,
            workspace_id=message.workspace_id,
            channel=message.channel,
            status=message.status,
            due_at=due_at,
            send_at=message.send_at,
        )

    def due_pages(self, now: datetime, statuses: Collection[Status]) -> Iterator[Sequence[OutboxEntry]]:
        """A page for each shard of the adapter's Outbox index, oldest first within it, the shards in turn."""
        with self.guard:
            due = [
                self._entry(self.messages[message_id], due_at)
                for message_id, due_at in self.outbox_due.items()
                if due_at <= now and self.messages[message_id].status in statuses
            ]
        shards: dict[int, list[OutboxEntry]] = {}
        for entry in due:
            shards.setdefault(int(outbox_shard(entry.id)), []).append(entry)
        for shard in sorted(shards):
            yield sorted(shards[shard], key=lambda entry: entry.due_at)

    def _unmoved(self, entry: OutboxEntry) -> bool:
        """Nobody moved it since it was read: not a claim, nor a cancel, nor another sweep."""
        current = self.messages.get(entry.id)
        return (
            current is not None
            and current.status is entry.status
            and self.outbox_due.get(entry.id) == entry.due_at
        )

    def _move(self, entry: OutboxEntry, now: datetime, status: Status, due_at: datetime | None) -> None:
        self.messages[entry.id] = self.messages[entry.id].with_status(status, now)
        if due_at is None:
            self.outbox_due.pop(entry.id, None)
        else:
            self.outbox_due[entry.id] = due_at

    @_atomic
    def move_outbox_entry(
        self, entry: OutboxEntry, now: datetime, *, status: Status, due_at: datetime | None
    ) -> bool:
        if not self._unmoved(entry):
            return False
        self._move(entry, now, status, due_at)
        return True

    @_atomic
    def reclaim(self, entry: OutboxEntry, now: datetime, *, due_at: datetime, max_reclaims: int) -> Reclaim:
        if not self._unmoved(entry):
            return Reclaim.SUPERSEDED
        if self.reclaims.get(entry.id, 0) >= max_reclaims:
            return Reclaim.CAP_REACHED
        self._move(entry, now, Status.QUEUED, due_at)
        self.reclaims[entry.id] = self.reclaims.get(entry.id, 0) + 1
        return Reclaim.RECLAIMED


class InMemoryPromiseCounts:
    """The promise's daily counts, added to and read as the adapter's counters are (summed per day)."""

    def __init__(self) -> None:
        self.counters: dict[tuple[str, str, PromiseKind], int] = {}
        self.fail = False  # add() raises, as a DynamoDB outage would
        self.guard = threading.Lock()

    def add(self, count: PromiseCount) -> None:
        if self.fail:
            raise DependencyUnavailable("the promise's counters are unavailable")
        with self.guard:
            key = (count.workspace_id, count.day, count.kind)
            self.counters[key] = self.counters.get(key, 0) + count.count

    def days(self, workspace_id: str, days: Sequence[str]) -> list[PromiseDay]:
        return [
            PromiseDay(
                day, {k: n for (ws, d, k), n in self.counters.items() if ws == workspace_id and d == day}
            )
            for day in days
        ]


class InMemoryProviderEventLog:
    def __init__(self) -> None:
        self.recorded: dict[str, list[RecordedProviderEvent]] = {}

    def of_message(self, message_id: str) -> list[RecordedProviderEvent]:
        return sorted(self.recorded.get(message_id, []), key=lambda seen: seen.recorded_at)


@dataclass
class InMemoryProviderEvents:
    """The provider event store in memory, over a store's messages and a suppression list, with the
    DynamoDB adapter's rules: an event is recorded with its effects at once, or is a repeat while its
    record lasts (PROVIDER_EVENT_RETENTION); a status moves only forward (`APPLIES_FROM`); an
    opt-out, a permanent bounce or a complaint suppresses its recipient in the named message's
    workspace, or (an opt-out naming no message) for every workspace."""

    store: InMemoryStore
    suppressions: InMemorySuppressions
    recorded: dict[tuple[str, str], datetime] = field(default_factory=dict)  # (provider, id): expires at
    # Each recorded event that concerns a message, for its timeline (the adapter's index).
    log: InMemoryProviderEventLog = field(default_factory=InMemoryProviderEventLog)

    def release_dedup_lock(self, message: Message) -> None:
        self.store.release_dedup_lock(message)

    def apply_provider_event(self, event: ProviderEvent, now: datetime) -> ApplyResult:
        with self.store.guard:
            current = None
            if event.message_id is not None and looks_like_message_id(event.message_id):
                current = self.store.messages.get(event.message_id)
            if current is not None and not event.concerns(current):
                current = None  # a live provider's word on a test message, or the other way round
            key = (event.provider, event.event_id)
            expires_at = self.recorded.get(key)
            if expires_at is not None and expires_at > now:
                return EventOutcome.REPEATED, current
            self.recorded[key] = now + PROVIDER_EVENT_RETENTION
            if current is not None:
                seen = RecordedProviderEvent(event.provider, event.type.value, now, event.occurred_at)
                self.log.recorded.setdefault(current.id, []).append(seen)
            applied = False
            if current is not None and current.status in APPLIES_FROM[event.type]:
                changed = current.with_status(RESULTING_STATUS[event.type], now)
                self.store.messages[current.id] = replace(changed, error=event.error or current.error)
                self.store.outbox_due.pop(current.id, None)
                applied = True
            for suppression in _suppressions(event, current, now):
                self.suppressions.put(*suppression)
                applied = True
            return (EventOutcome.APPLIED if applied else EventOutcome.IGNORED), current


def _suppressions(
    event: ProviderEvent, current: Message | None, now: datetime
) -> list[tuple[str | None, Suppression]]:
    """(workspace, entry) for each recipient the event suppresses (None: every workspace); an event
    naming a message nobody knows suppresses nothing; an email's bounce, the recipients it names."""
    reason = event.suppression_reason
    if reason is None:
        return []
    if event.message_id is None:
        return [] if event.to is None else [(None, Suppression(to=event.to, reason=reason, created_at=now))]
    if current is None:
        return []
    own = {recipient_key(address): address for address in current.requested_recipients}
    named = {
        recipient_key(to): own.get(recipient_key(to), to) for to in (event.to or current.to, *event.also)
    }
    return [
        (current.workspace_id, Suppression(to=to, reason=reason, created_at=now, message_id=current.id))
        for to in named.values()
    ]


@dataclass
class FakeQueue:
    enqueued: list[tuple[str, int]] = field(default_factory=list)
    fail: bool = False

    def enqueue(self, message: Message, delay_seconds: int = 0) -> None:
        if self.fail:
            raise QueueUnavailable("the queue is down")
        self.enqueued.append((message.id, delay_seconds))

    def enqueue_batch(self, handoffs: Sequence[Handoff]) -> list[Handoff]:
        if self.fail:
            return list(handoffs)
        self.enqueued += [(handoff.message.id, handoff.delay_seconds) for handoff in handoffs]
        return []


def queued_message(
    store: InMemoryStore, clock: ManualClock, dedup_window: timedelta = timedelta(minutes=15), **changes: Any
) -> Message:
    """An sms to +15550100000 created now through the store, queued, with `changes` (any Message
    field): the message a dispatcher test dispatches."""
    fields: dict[str, Any] = {"to": "+15550100000", "body": "hello", "status": Status.QUEUED, **changes}
    message = Message(
        id=new_message_id(),
        workspace_id="ws_a",
        channel=Channel("sms"),
        created_at=clock.now,
        updated_at=clock.now,
        **fields,
    )
    claim = DedupClaim(dedup_identity("ws_a", message.to, None, message.body), clock.now + dedup_window)
    created = store.create(message, claim, None, clock.now, clock.now)
    assert isinstance(created, Created), created
    return created.message


def hand_off(store: InMemoryStore, queue: FakeQueue, clock: Clock) -> dict[str, Any]:
    """HandoffFunction on the creations the store's stream holds since the last call."""
    records, store.stream = store.stream, []
    return hand_off_batch(queue, {"Records": records}, clock)


class FakeEventQueue:
    """The provider events queue: what the webhook published."""

    def __init__(self) -> None:
        self.published: list[ProviderEvent] = []
        self.delays: list[int] = []

    def publish(self, event: ProviderEvent, delay_seconds: int = 0) -> None:
        self.published.append(event)
        self.delays.append(delay_seconds)


@dataclass
class InMemorySimulatorStore:
    """The simulator's records in memory, with the DynamoDB adapter's rules: a delivery is recorded once
    per (workspace, Idempotency-Key), a repeat answered with the first; calls counted per message."""

    delivered: dict[tuple[str, str], SimulatedDelivery] = field(default_factory=dict)
    calls: dict[tuple[str, str], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def count_call(self, workspace_id: str, message_id: str, now: datetime) -> int:
        with self._lock:
            self.calls[(workspace_id, message_id)] = self.calls.get((workspace_id, message_id), 0) + 1
            return self.calls[(workspace_id, message_id)]

    def accept(self, delivery: SimulatedDelivery) -> tuple[SimulatedDelivery, bool]:
        with self._lock:
            key = (delivery.workspace_id, delivery.idempotency_key)
            if key in self.delivered:
                return self.delivered[key], False
            self.delivered[key] = delivery
            return delivery, True

    def deliveries(self, workspace_id: str, message_id: str | None) -> list[SimulatedDelivery]:
        mine = [d for (workspace, _), d in self.delivered.items() if workspace == workspace_id]
        if message_id is not None:
            return [d for d in mine if d.message_id == message_id]
        return sorted(mine, key=lambda d: d.message_id, reverse=True)[:MAX_LISTED]


EVENT_FILES_KEY = "sk_local_dev"  # the key the events/ files send, of the workspace below
EVENT_FILES_WORKSPACE = "ws_local"


def key_of(workspace: str) -> str:
    """The API key a unit test's caller of `workspace` sends (`InMemoryApiKeys.of` knows it)."""
    return EVENT_FILES_KEY if workspace == EVENT_FILES_WORKSPACE else f"sk_unit_{workspace}"


@dataclass
class InMemoryApiKeys:
    """The API key store in memory (hash -> workspace); `failing`: every read raises, as an outage."""

    workspaces: dict[str, str] = field(default_factory=dict)
    revoked: set[str] = field(default_factory=set)
    failing: bool = False
    reads: int = 0

    @classmethod
    def of(cls, *workspaces: str) -> InMemoryApiKeys:
        """The events/ files' key, and `key_of(workspace)` for each workspace."""
        keys = cls()
        for workspace in (EVENT_FILES_WORKSPACE, *workspaces):
            keys.save(hash_api_key(key_of(workspace)), workspace)
        return keys

    def workspace_for(self, key_hash: str) -> str | None:
        self.reads += 1
        if self.failing:
            raise ConnectionError("the key store cannot be reached")
        return None if key_hash in self.revoked else self.workspaces.get(key_hash)

    def save(self, key_hash: str, workspace_id: str) -> None:
        self.workspaces[key_hash] = workspace_id

    def revoke(self, api_key: str) -> None:
        self.revoked.add(hash_api_key(api_key))


@dataclass
class InMemoryWebhookStore:
    """Endpoints and events in memory, with the DynamoDB adapter's conditional rules: an event is
    written once, together with its message's `Applied`, and only if `Applied` is as it was read;
    an endpoint is replaced only over the version it was made from, and its version moves on. Each
    call runs alone, as each DynamoDB request does."""

    endpoint_items: dict[tuple[str, str], Endpoint] = field(default_factory=dict)
    event_items: dict[tuple[str, str], Event] = field(default_factory=dict)
    applied_items: dict[str, Applied] = field(default_factory=dict)
    # Slow-lane flags: until when each endpoint is in the slow lane.
    lane_items: dict[tuple[str, str], datetime] = field(default_factory=dict)
    # Every call made, by name: what a delivery costs the store.
    calls: list[str] = field(default_factory=list)
    fail_lane_writes: bool = False  # the flag's writes raise, as a DynamoDB outage would
    # Faults: raised by the next applied() read, or by the next record() before (or after) it
    # writes, as a crash would.
    crash_before_read: int = 0
    crash_before_record: int = 0
    crash_after_record: int = 0
    # Races: each replace_endpoint() first runs the next of these, as another request's write
    # landing between this one's read and its write would.
    before_replace: list[Callable[[], object]] = field(default_factory=list)
    # What each event recorded added to its campaign's delivery counts, in the event's write; added
    # to `campaigns`' campaign too when given (the adapter's Update of the MessagesTable's item).
    tallies: list[CampaignTally] = field(default_factory=list)
    campaigns: InMemoryCampaignStore | None = None
    # The promise's daily counts each event recorded added, in the event's write.
    promise_counts: InMemoryPromiseCounts = field(default_factory=InMemoryPromiseCounts)
    guard: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    @_atomic
    def add_endpoint(self, endpoint: Endpoint, limit: int) -> None:
        if sum(1 for ws, _ in self.endpoint_items if ws == endpoint.workspace_id) >= limit:
            raise TooManyEndpoints(str(limit))
        self.endpoint_items[(endpoint.workspace_id, endpoint.id)] = endpoint

    @_atomic
    def endpoints(self, workspace_id: str) -> list[Endpoint]:
        return [e for (ws, _), e in self.endpoint_items.items() if ws == workspace_id]

    @_atomic
    def endpoint(self, workspace_id: str, endpoint_id: str) -> Endpoint | None:
        self.calls.append("endpoint")
        return self.endpoint_items.get((workspace_id, endpoint_id))

    @_atomic
    def endpoint_and_lane(
        self, workspace_id: str, endpoint_id: str
    ) -> tuple[Endpoint | None, datetime | None]:
        self.calls.append("endpoint_and_lane")
        key = (workspace_id, endpoint_id)
        return self.endpoint_items.get(key), self.lane_items.get(key)

    @_atomic
    def put_in_slow_lane(self, workspace_id: str, endpoint_id: str, until: datetime) -> None:
        self.calls.append("put_in_slow_lane")
        if self.fail_lane_writes:
            raise DependencyUnavailable("the webhooks table is down")
        self.lane_items[(workspace_id, endpoint_id)] = until

    @_atomic
    def take_out_of_slow_lane(self, workspace_id: str, endpoint_id: str) -> None:
        self.calls.append("take_out_of_slow_lane")
        if self.fail_lane_writes:
            raise DependencyUnavailable("the webhooks table is down")
        self.lane_items.pop((workspace_id, endpoint_id), None)

    @_atomic
    def delete_endpoint(self, workspace_id: str, endpoint_id: str) -> bool:
        return self.endpoint_items.pop((workspace_id, endpoint_id), None) is not None

    @_atomic
    def replace_endpoint(self, endpoint: Endpoint) -> Replacement:
        if self.before_replace:
            self.before_replace.pop(0)()
        key = (endpoint.workspace_id, endpoint.id)
        current = self.endpoint_items.get(key)
        if current is None:
            return Gone()
        if current.version != endpoint.version:
            return Changed(current)
        stored = self.endpoint_items[key] = replace(endpoint, version=endpoint.version + 1)
        return Replaced(stored)

    @_atomic
    def applied(self, message_id: str) -> Applied | None:
        if self.crash_before_read:
            self.crash_before_read -= 1
            raise RuntimeError("crashed before the message's Applied was read")
        return self.applied_items.get(message_id)

    @_atomic
    def record(
        self,
        event: Event,
        position: str,
        previous: Applied | None,
        tally: CampaignTally | None = None,
        promise: PromiseCount | None = None,
    ) -> bool:
        if self.crash_before_record:
            self.crash_before_record -= 1
            raise RuntimeError("crashed before the event was written")
        key = (event.workspace_id, event.id)
        if key in self.event_items:
            return False
        if event.sequence is not None:
            if self.applied_items.get(event.message_id) != previous:
                return False
            self.applied_items[event.message_id] = Applied(event.sequence, position)
        self.event_items[key] = event
        if promise is not None:
            self.promise_counts.add(promise)
        if tally is not None:
            self.tallies.append(tally)
            if self.campaigns is not None:
                self.campaigns.add_delivery_counts(tally)
        if self.crash_after_record:
            self.crash_after_record -= 1
            raise RuntimeError("crashed after the event was written")
        return True

    @_atomic
    def event(self, workspace_id: str, event_id: str) -> Event | None:
        self.calls.append("event")
        return self.event_items.get((workspace_id, event_id))

    @_atomic
    def events(
        self,
        workspace_id: str,
        *,
        message_id: str | None,
        event_type: EventType | None,
        limit: int,
        cursor: str | None,
    ) -> EventPage:
        if cursor is not None and not looks_like_event_id(cursor):
            raise InvalidCursor(cursor)
        chosen = sorted(
            (
                e
                for (ws, _), e in self.event_items.items()
                if ws == workspace_id
                and (message_id is None or e.message_id == message_id)
                and (event_type is None or e.type is event_type)
                and (cursor is None or e.id < cursor)
            ),
            key=lambda e: e.id,
            reverse=True,
        )
        page = chosen[:limit]
        return EventPage(page, page[-1].id if len(chosen) > limit else None)

    @_atomic
    def record_attempt(self, workspace_id: str, event_id: str, endpoint_id: str, attempt: Attempt) -> None:
        self.calls.append("record_attempt")
        event = self.event_items.get((workspace_id, event_id))
        delivery = event.delivery(endpoint_id) if event is not None else None
        if (
            event is None
            or delivery is None
            or (not attempt.succeeded and delivery.status is DeliveryStatus.SUCCEEDED)
        ):
            return
        status = (
            DeliveryStatus.SUCCEEDED
            if attempt.succeeded
            else DeliveryStatus.FAILED
            if attempt.final
            else DeliveryStatus.PENDING
        )
        updated = replace(
            delivery,
            status=status,
            attempts=delivery.attempts + (1 if attempt.made else 0),
            last_attempt_at=attempt.at if attempt.made else delivery.last_attempt_at,
            last_response_status=attempt.response_status
            if attempt.response_status is not None
            else delivery.last_response_status,
        )
        self._put_delivery(event, updated)

    @_atomic
    def reopen(self, workspace_id: str, event_id: str, endpoint_ids: Sequence[str]) -> Event | None:
        event = self.event_items.get((workspace_id, event_id))
        if event is None:
            return None
        for endpoint_id in endpoint_ids:
            delivery = event.delivery(endpoint_id) or Delivery(endpoint_id)
            event = self._put_delivery(event, replace(delivery, status=DeliveryStatus.PENDING))
        return event

    def _put_delivery(self, event: Event, delivery: Delivery) -> Event:
        others = tuple(d for d in event.deliveries if d.endpoint_id != delivery.endpoint_id)
        updated = replace(event, deliveries=tuple(sorted((*others, delivery), key=lambda d: d.endpoint_id)))
        self.event_items[(event.workspace_id, event.id)] = updated
        return updated


@dataclass
class FakeDeliveryQueue:
    tasks: list[DeliveryTask] = field(default_factory=list)
    fail: int = 0  # the next `fail` enqueues raise, as an SQS outage would

    def enqueue(self, tasks: Sequence[DeliveryTask]) -> None:
        if self.fail:
            self.fail -= 1
            raise QueueUnavailable("the delivery queue is down")
        self.tasks.extend(tasks)


def accept_any_target(url: str) -> object:
    return url


def fake_webhooks(
    store: InMemoryWebhookStore | None = None, queue: FakeDeliveryQueue | None = None
) -> WebhookService:
    """The API's webhook use cases on in-memory stores: what a unit test of the API puts in its root."""
    store = store or InMemoryWebhookStore()
    return WebhookService(
        endpoints=store, events=store, queue=queue or FakeDeliveryQueue(), check_target=accept_any_target
    )


@dataclass
class FakeLimits:
    """The limits store in memory: overrides by workspace, and rate counters by (workspace, window,
    shard) that a lease adds to as the adapter's `ADD` does, answering the new count; `leases`
    records every call. `down`: a lease fails, as with the table unreachable (the limits still cached)."""

    defaults: Limits = field(default_factory=lambda: Limits(rate_per_second=50, daily_quota=10_000))
    overrides: dict[str, Limits] = field(default_factory=dict)
    changes: dict[str, tuple[LimitsChange, ...]] = field(default_factory=dict)  # set-limits, by when
    counters: dict[tuple[str, int, int], int] = field(default_factory=dict)
    # Every lease taken: (workspace, window, shard, tokens).
    leases: list[tuple[str, int, int, int]] = field(default_factory=list)
    store: InMemoryStore | None = None  # where the day's quota units are counted
    down: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def timeline(self, workspace_id: str) -> LimitsTimeline:
        return LimitsTimeline(
            self.overrides.get(workspace_id, self.defaults), self.changes.get(workspace_id, ())
        )

    def take_lease(self, workspace_id: str, window: Window, shard: int, tokens: int) -> int:
        if self.down:
            raise DependencyUnavailable("the limits table is down")
        assert tokens >= 1
        with self._lock:
            key = (workspace_id, window.number, shard)
            self.counters[key] = self.counters.get(key, 0) + tokens
            self.leases.append((workspace_id, window.number, shard, tokens))
            return self.counters[key]

    def used_today(
        self, workspace_id: str, timeline: LimitsTimeline, now: datetime, ledger: Ledger = Ledger.QUOTA
    ) -> int:
        charge = QuotaCharge.of(workspace_id, timeline, now, ledger)
        if charge is None or self.store is None:
            return 0
        used = self.store.quota_used if ledger is Ledger.QUOTA else self.store.segments_used
        return used.get((workspace_id, charge.day), 0)


# What an API unit test's settings name: the tables and queues the fakes stand in for.
API_SETTINGS: dict[str, str] = {
    "MESSAGES_TABLE": "MessagesTable",
    "SENDONCE_HASHING_KEY_ARN": "HashingKeySecret",
    "IDEMPOTENCY_TABLE": "IdempotencyTable",
    "API_KEYS_TABLE": "ApiKeysTable",
    "SMS_QUEUE_URL": "https://queue/sms",
    "IMESSAGE_QUEUE_URL": "https://queue/imessage",
    "EMAIL_QUEUE_URL": "https://queue/email",
}


def fake_api_dependencies(
    messages: MessageService,
    api_keys: ApiKeyStore,
    settings: dict[str, str] | None = None,
    **overrides: Any,
) -> ApiDependencies:
    """The API's composition root on fakes: the real handler runs on it once `root.use`d.

    Keyed sends answer `{}` unless `send_once` is given; webhooks run on in-memory stores.
    """
    parts: dict[str, Any] = {
        "settings": ApiSettings.from_environment(settings or API_SETTINGS),
        "messages": messages,
        "idempotency_config": idempotency_config(86_400),
        "send_once": lambda **_: {},
        "events": FakeEventQueue(),
        "build_webhooks": fake_webhooks,
        "api_keys": api_keys,
    }
    return ApiDependencies(**(parts | overrides))
