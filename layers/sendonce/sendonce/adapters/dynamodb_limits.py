"""The limits on DynamoDB (LimitsTable): per-workspace overrides, rate counters and the quota's ledger.

Overrides are one item per workspace holding its changes, each with the instant it takes effect
(`limits.model.change_at`), read through a Powertools parameters provider (its documented
custom-provider extension), so each execution environment reads a workspace's limits at most once
per cache period. A rate lease is one atomic `ADD` of its size on one shard of its window, whose
answer (the shard's new count) tells what it was granted; the count only grows within its window.

The quota is a ledger of shard items per (workspace, day), each holding what it has taken (`used`),
what it may still take (`left`) and the plan that gave it its allowance (`plan`). A create takes its
units in its own transaction, only from a shard carrying the plan in force with room left, so the
day never accepts more than that plan allows; a plan fresh since the day began gives a shard its
share at its first charge. The first charge under a new quota finds the shards on an older plan and
re-plans the day: it freezes every shard (no charge matches a frozen one, so `used` is final), sums
what they used, and gives them their shares of what is left under the new quota. One planner at a
time holds the day's plan lock; every step is conditional on what it read, so a planner that died
or was overtaken leaves the next one a ledger it can plan from. Units used are never moved nor
lost, whatever the quotas were: the day's usage is the sum of `used`.

The sms budget is a second ledger of the same kind (CONTRACT section 18): its items are keyed by
its own prefix (`Ledger`), its units are a message's sms segments, and a create that takes of both
carries a shard of each in its one transaction. A message's segments come from one shard: near a
several-shard budget's end, each shard may keep less than a message needs unused; the day is never
over the budget.

The shards this environment found full under a plan are remembered a while, so a spent quota costs
no probing twice. Counters carry `expiresAt`, which the table's TTL removes.
"""

from __future__ import annotations

import random
import secrets
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.parameters.base import BaseProvider
from msgspec import Struct
from msgspec.structs import replace

from sendonce.adapters.dynamodb_items import epoch_seconds
from sendonce.adapters.dynamodb_writes import ConditionFailed, DynamoDbTable, Item
from sendonce.errors import DependencyUnavailable
from sendonce.limits.model import (
    MAX_CACHE_SECONDS,
    QUOTA_SHARDS,
    Ledger,
    Limits,
    LimitsChange,
    LimitsTimeline,
    ProtectionChange,
    QuotaCharge,
    QuotaPlan,
    SendControlsChange,
    Window,
    change_at,
    check_daily_quota,
    check_rate,
    day_of,
)
from sendonce.messages.ports import Capped
from sendonce.side_by_side import side_by_side

if TYPE_CHECKING:
    from sendonce.controls.cap import RecipientCap

COUNTER = "count"  # the sort key of every counter item
CHANGES = "changes"  # the sort key of a workspace's overrides
PLAN_LOCK = "plan"  # the sort key of a day's plan lock
# A planner holds the day's lock at most this long; one that died is taken over after it.
PLAN_LOCK_SECONDS = 10
# A charge that meets a day being re-planned waits this long in all, then answers 503.
PLAN_WAIT_SECONDS = 10.0
# A charge that has waited this long on frozen shards also tries to take the day's plan over.
PLAN_TAKEOVER_SECONDS = 2.0
# A shard found full is not tried again for this long (a re-plan may give it room again).
FULL_MEMORY_SECONDS = 60.0
FROZEN = "replanning:"  # a frozen shard's plan: `FROZEN` and the planner's id
PLAN_WORKERS = 8
# TransactWriteItems takes at most 100 items.
MAX_TRANSACTION_ITEMS = 100


def overrides_key(workspace_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"LIMITS#{workspace_id}"}, "sk": {"S": CHANGES}}


def cap_key(recipient: str, window_seconds: int, group: int) -> dict[str, Any]:
    """A recipient's group of frames under a cap of `window_seconds` (`sendonce.controls.cap`):
    `recipient` is its digest, never the address. A change of the window starts a fresh count."""
    return {"pk": {"S": f"CAP#{recipient}#{window_seconds}#{group}"}, "sk": {"S": COUNTER}}


def rate_key(workspace_id: str, window: int, shard: int) -> dict[str, Any]:
    return {"pk": {"S": f"RATE#{workspace_id}#{window}#{shard}"}, "sk": {"S": COUNTER}}


def quota_key(workspace_id: str, day: str, shard: int, ledger: Ledger = Ledger.QUOTA) -> dict[str, Any]:
    return {"pk": {"S": f"{ledger.value}#{workspace_id}#{day}#{shard}"}, "sk": {"S": COUNTER}}


def shard_key(charge: QuotaCharge, shard: int) -> dict[str, Any]:
    """The counter item of `shard` of the charge's ledger and day."""
    return quota_key(charge.workspace_id, charge.day, shard, charge.ledger)


def plan_lock_key(charge: QuotaCharge) -> dict[str, Any]:
    return {
        "pk": {"S": f"{charge.ledger.value}PLAN#{charge.workspace_id}#{charge.day}"},
        "sk": {"S": PLAN_LOCK},
    }


# ---------------------------------------------------------------------------- refusals of a charge
class NoRoom(Struct, frozen=True):
    """The shard carries the charge's plan and has less left than the charge's units."""

    left: int


class Replan(Struct, frozen=True):
    """The shard carries an older plan, or none while the plan is not fresh: the day needs a re-plan."""


class Replanning(Struct, frozen=True):
    """Another planner has frozen the shard: wait for its plan."""


class Adopt(Struct, frozen=True):
    """The shard carries a later plan than this environment's (or, for the stack's defaults, another
    one in force as long): charge under it."""

    plan: QuotaPlan


Refusal = NoRoom | Replan | Replanning | Adopt


def _number(item: Item, name: str) -> int:
    return int(item.get(name, {}).get("N", "0"))


# ---------------------------------------------------------------------------- overrides
def _change_of(entry: dict[str, Any]) -> LimitsChange:
    fields = entry["M"]

    def value(name: str) -> int | None:
        return int(fields[name]["N"]) if "N" in fields.get(name, {}) else None

    def text(name: str) -> str | None:
        return str(fields[name]["S"]) if "S" in fields.get(name, {}) else None

    countries = text("smsCountries")  # absent from items written before CONTRACT section 18
    premium = fields.get("allowPremium", {})
    return LimitsChange(
        at=int(fields["at"]["N"]),
        rate_per_second=value("rate"),
        daily_quota=value("quota"),
        per_recipient=value("perRecipient"),
        per_recipient_window=value("perRecipientWindow"),
        quiet_hours=text("quietHours"),
        timezone=text("timezone"),
        sms_countries=None if countries is None else tuple(code for code in countries.split(",") if code),
        allow_premium_numbers=bool(premium["BOOL"]) if "BOOL" in premium else None,
        daily_sms_segments=value("smsSegments"),
        retention_days=value("retentionDays"),
    )


def _entry_of(change: LimitsChange) -> dict[str, Any]:
    def value(number: int | None) -> dict[str, Any]:
        return {"NULL": True} if number is None else {"N": str(number)}

    def text(string: str | None) -> dict[str, Any]:
        return {"NULL": True} if string is None else {"S": string}

    return {
        "M": {
            "at": {"N": str(change.at)},
            "rate": value(change.rate_per_second),
            "quota": value(change.daily_quota),
            "perRecipient": value(change.per_recipient),
            "perRecipientWindow": value(change.per_recipient_window),
            "quietHours": text(change.quiet_hours),
            "timezone": text(change.timezone),
            "smsCountries": text(None if change.sms_countries is None else ",".join(change.sms_countries)),
            "allowPremium": (
                {"NULL": True}
                if change.allow_premium_numbers is None
                else {"BOOL": change.allow_premium_numbers}
            ),
            "smsSegments": value(change.daily_sms_segments),
            "retentionDays": value(change.retention_days),
        }
    }


class _Overrides(BaseProvider):
    """Powertools' cache over one GetItem of a workspace's overrides: its changes, oldest first."""

    def __init__(self, table: DynamoDbTable) -> None:
        super().__init__(client=table.client)  # type: ignore[no-untyped-call]
        self._table = table

    def _get(self, name: str, **sdk_options: Any) -> dict[str, Any]:
        item = self._table.get(overrides_key(name)) or {}
        return {"changes": tuple(_change_of(entry) for entry in item.get(CHANGES, {}).get("L", []))}

    def _get_multiple(self, path: str, **sdk_options: Any) -> dict[str, str]:
        raise NotImplementedError("a workspace's overrides are one item, read with get")


class DynamoDbLimits:
    def __init__(
        self,
        client: Any,
        table_name: str,
        defaults: Limits,
        cache_seconds: int = MAX_CACHE_SECONDS,
        shard_of: Callable[[int], int] = random.randrange,
        *,
        sleep: Callable[[float], None] = time.sleep,
        plan_wait_seconds: float = PLAN_WAIT_SECONDS,
    ) -> None:
        """`plan_wait_seconds`: how long a charge waits on the day's planners before a 503 (a test
        engine on a loaded machine plans slower than DynamoDB does)."""
        self._table = DynamoDbTable(client, table_name)
        self._defaults = defaults
        self._cache_seconds = min(cache_seconds, MAX_CACHE_SECONDS)
        self._overrides = _Overrides(self._table)
        self._shard_of = shard_of
        self._sleep = sleep
        self._plan_wait = plan_wait_seconds
        # (ledger, workspace, day, plan) -> the shards found full, and when each was found so.
        self._full: dict[tuple[str, str, str, str], dict[int, float]] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._table.name

    # ------------------------------------------------------------------ overrides
    def timeline(self, workspace_id: str) -> LimitsTimeline:
        try:
            found = self._overrides.get(workspace_id, max_age=self._cache_seconds)
        except Exception as error:
            raise DependencyUnavailable(str(error)) from error
        changes = found.get("changes", ()) if isinstance(found, dict) else ()
        return LimitsTimeline(self._defaults, tuple(changes))

    def set_limits(
        self,
        workspace_id: str,
        rate: int | None,
        daily_quota: int | None,
        *,
        now: datetime | None = None,
        cache_seconds: int = MAX_CACHE_SECONDS,
        controls: SendControlsChange | None = None,
        protection: ProtectionChange | None = None,
    ) -> LimitsChange:
        """The operator's override (the CLI's), and when it takes effect: at most `cache_seconds`
        (the functions' SENDONCE_LIMITS_CACHE_SECONDS) plus three seconds after `now`, by default the
        table's own clock (its answer's Date), so an operator's clock can never put it earlier.
        Every value is checked first (ValueError), so a bad one changes nothing. A value left out
        keeps the one last set; two writers at once are ordered by a condition on what each read.
        `controls`: the send controls to change (`SendControlsChange`), `protection` the protections
        (`ProtectionChange`), the others kept."""
        controls = controls or SendControlsChange()
        protection = protection or ProtectionChange()
        if rate is None and daily_quota is None and controls.empty and protection.empty:
            raise ValueError("give a rate, a daily quota, a send control, a protection, or several")
        if rate is not None:
            check_rate(rate)
        if daily_quota is not None:
            check_daily_quota(daily_quota)
        for _ in range(8):
            item, table_now = self._read_overrides(workspace_id)
            written_at = now or table_now
            entries = item.get(CHANGES, {}).get("L", [])
            timeline = LimitsTimeline(self._defaults, tuple(_change_of(entry) for entry in entries))
            pending = timeline.pending() or LimitsChange(0, None, None)
            kept = replace(
                pending,
                at=change_at(written_at, cache_seconds),
                rate_per_second=pending.rate_per_second if rate is None else rate,
                daily_quota=pending.daily_quota if daily_quota is None else daily_quota,
            )
            change = protection.applied_to(controls.applied_to(kept))
            changed = timeline.with_change(change, written_at)
            condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
            if entries:
                condition = {
                    "ConditionExpression": "#changes = :seen",
                    "ExpressionAttributeNames": {"#changes": CHANGES},
                    "ExpressionAttributeValues": {":seen": {"L": entries}},
                }
            answer = self._table.write(
                "put_item",
                Item={**overrides_key(workspace_id), CHANGES: {"L": [_entry_of(c) for c in changed.changes]}},
                **condition,
            )
            if not isinstance(answer, ConditionFailed):
                return change
        raise DependencyUnavailable("the workspace's limits kept changing while they were being set")

    def _read_overrides(self, workspace_id: str) -> tuple[Item, datetime]:
        try:
            response = self._table.client.get_item(
                TableName=self._table.name, Key=overrides_key(workspace_id), ConsistentRead=True
            )
        except Exception as error:
            raise DependencyUnavailable(str(error)) from error
        from email.utils import parsedate_to_datetime  # noqa: PLC0415 - the operator's command only

        date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
        table_now = parsedate_to_datetime(date) if date else datetime.now().astimezone()
        return response.get("Item") or {}, table_now

    # ------------------------------------------------------------------ request rate
    def take_lease(self, workspace_id: str, window: Window, shard: int, tokens: int) -> int:
        if tokens < 1:
            raise ValueError(f"a lease takes at least one token, not {tokens}")
        response = self._table.write(
            "update_item",
            Key=rate_key(workspace_id, window.number, shard),
            UpdateExpression="ADD hits :tokens SET expiresAt = if_not_exists(expiresAt, :expires)",
            ExpressionAttributeValues={
                ":tokens": {"N": str(tokens)},
                ":expires": {"N": str(window.ends_at_epoch + 60)},
            },
            ReturnValues="UPDATED_NEW",
        )
        if not isinstance(response, dict):  # the update has no condition: it cannot be refused
            raise DependencyUnavailable("the rate window's update was refused")
        return int(response["Attributes"]["hits"]["N"])

    # ------------------------------------------------------------------ frequency cap
    def cap_items(self, cap: RecipientCap) -> list[dict[str, Any]]:
        """The transaction items that count a new message in the eleven frames of its bucket, for each
        of its recipients, on the conditions `sendonce.controls.cap` proves enough: frame k-10 has
        room, and no count was made in a later bucket (`last`). One item per recipient and group of
        frames, removed by the table's TTL once its last frame has ended."""
        items = []
        for frames in cap.frames():
            names = {f"#f{i}": f"f{frame}" for i, frame in enumerate(frames.frames)}
            counted = [f"{name} = if_not_exists({name}, :zero) + :one" for name in names]
            values = {":zero": {"N": "0"}, ":one": {"N": "1"}, ":expires": {"N": str(frames.expires_at)}}
            conditions = []
            if frames.fullest is not None:
                conditions.append("(attribute_not_exists(#f0) OR #f0 < :cap)")  # frame k-10 comes first
                values[":cap"] = {"N": str(cap.limit)}
            if frames.holds_last:
                names["#last"] = "last"
                counted.append("#last = :bucket")
                conditions.append("(attribute_not_exists(#last) OR #last <= :bucket)")
                values[":bucket"] = {"N": str(cap.bucket)}
            update: dict[str, Any] = {
                "TableName": self._table.name,
                "Key": cap_key(frames.recipient, cap.window_seconds, frames.group),
                "UpdateExpression": f"SET {', '.join(counted)}, expiresAt = :expires",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
            if conditions:
                update["ConditionExpression"] = " AND ".join(conditions)
                update["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
            items.append({"Update": update})
        return items

    # ------------------------------------------------------------------ daily quota: usage
    def used_today(
        self, workspace_id: str, timeline: LimitsTimeline, now: datetime, ledger: Ledger = Ledger.QUOTA
    ) -> int:
        """The sum of `used` over every shard a plan may have: whatever the allowance was, or is now."""
        if not any(plan.quota > 0 for plan in timeline.quota_plans(now, ledger)):
            return 0
        day = day_of(now)
        keys = [quota_key(workspace_id, day, shard, ledger) for shard in range(QUOTA_SHARDS)]
        shards = self._table.batch_get(keys)
        return sum(_number(item, "used") for item in shards.values())

    # ------------------------------------------------------------------ daily quota: charging
    def charge_item(self, charge: QuotaCharge, shard: int, units: int) -> dict[str, Any]:
        """The transaction item that takes `units` of `shard` under the charge's plan, only while it
        has them left (a fresh plan's shard not charged yet starts from its share)."""
        plan = charge.plan
        share = plan.share(shard) if shard < plan.shards else 0
        condition = "(#plan = :plan AND #left >= :units)"
        if charge.fresh and share >= units:
            condition += " OR attribute_not_exists(#plan)"
        return {
            "Update": {
                "TableName": self._table.name,
                "Key": shard_key(charge, shard),
                "UpdateExpression": (
                    "SET #left = if_not_exists(#left, :share) - :units, #plan = if_not_exists(#plan, :plan), "
                    "expiresAt = if_not_exists(expiresAt, :expires) ADD used :units"
                ),
                "ConditionExpression": condition,
                "ExpressionAttributeNames": {"#left": "left", "#plan": "plan"},
                "ExpressionAttributeValues": {
                    ":units": {"N": str(units)},
                    ":share": {"N": str(share)},
                    ":plan": {"S": plan.stamp},
                    ":expires": epoch_seconds(charge.expires_at),
                },
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def refusal(self, charge: QuotaCharge, shard: int, item: Item | None) -> Refusal:
        """What a refused charge of `shard` met (`item`: the shard as it was, None if absent)."""
        stamp = item.get("plan", {}).get("S") if item is not None else None
        if stamp is None:
            # Absent: a fresh plan's shard whose share is less than the units; otherwise unplanned.
            return NoRoom(0) if charge.fresh else Replan()
        if stamp == charge.plan.stamp:
            left = _number(item or {}, "left")
            if left <= 0:
                self.mark_full(charge, shard)
            return NoRoom(left)
        if stamp.startswith(FROZEN):
            return Replanning()
        carried = QuotaPlan.from_stamp(stamp)
        if carried is None:
            raise DependencyUnavailable(f"a quota shard carries an unknown plan: {stamp!r}")
        return Replan() if charge.plan.supersedes(carried) else Adopt(carried)

    def settle(self, charge: QuotaCharge, refusal: Replan | Replanning | Adopt, since: float) -> QuotaCharge:
        """Act on a refusal that is not a lack of room: the charge to try again with. `since`: when
        (time.monotonic) this create began; after `plan_wait_seconds` of planners, it is a 503."""
        waited = time.monotonic() - since
        if waited >= self._plan_wait:
            raise DependencyUnavailable("the day's quota is being re-planned; try again")
        if isinstance(refusal, Adopt):
            return charge.adopting(refusal.plan)
        # A planner at work has its plan ready shortly: wait for it. One that died left its shards
        # frozen: its lock expires, and a waiter takes the day over.
        planned = (
            self.replan(charge) if isinstance(refusal, Replan) or waited > PLAN_TAKEOVER_SECONDS else False
        )
        if isinstance(planned, QuotaPlan):
            return charge.adopting(planned)
        if not planned:  # waits that grow with the wait so far: many waiters make few calls
            self._sleep(min(1.0, 0.1 + waited / 2) * random.uniform(0.5, 1.0))
        return charge

    # ------------------------------------------------------------------ daily quota: planning
    def replan(self, charge: QuotaCharge) -> bool | QuotaPlan:
        """Give the day's shards the charge's plan, keeping every unit used: True once they have it.
        False when another planner holds the day (the caller waits for its plan); the plan a shard
        carries when it supersedes the charge's (the caller adopts it). Raises DependencyUnavailable."""
        owner = secrets.token_hex(16)
        if not self._take_plan_lock(charge, owner):
            return False
        try:
            later = self._replan(charge, FROZEN + owner)
        finally:
            self._table.write(
                "delete_item",
                Key=plan_lock_key(charge),
                ConditionExpression="#owner = :owner",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":owner": {"S": owner}},
            )
        with self._lock:
            self._full.pop(_full_key(charge), None)
        return later or True

    def _take_plan_lock(self, charge: QuotaCharge, owner: str) -> bool:
        now = time.time()
        answer = self._table.write(
            "put_item",
            Item={
                **plan_lock_key(charge),
                "owner": {"S": owner},
                "until": {"N": str(now + PLAN_LOCK_SECONDS)},
                "expiresAt": epoch_seconds(charge.expires_at),
            },
            ConditionExpression="attribute_not_exists(pk) OR #until < :now",
            ExpressionAttributeNames={"#until": "until"},
            ExpressionAttributeValues={":now": {"N": str(now)}},
        )
        return not isinstance(answer, ConditionFailed)

    def _replan(self, charge: QuotaCharge, frozen: str) -> QuotaPlan | None:
        """Freeze every shard a plan may have (one never charged is made, frozen, so nothing can start
        it late; a plan of the stack's defaults leaves no trace of how many it had), sum what they
        used, then give each its share of what the quota leaves.
        A shard that carries a plan superseding the charge's is left to it: that plan is answered."""
        plan = charge.plan
        keys = [shard_key(charge, shard) for shard in range(QUOTA_SHARDS)]
        found = self._table.batch_get(keys)
        seen = [found.get(key["pk"]["S"]) for key in keys]
        carried = {
            QuotaPlan.from_stamp(item.get("plan", {}).get("S", "")) for item in seen if item is not None
        }
        later = [other for other in carried if other is not None and other.supersedes(plan)]
        if later:
            return later[0]  # another planner gave the day a later plan
        if all(item is not None and item.get("plan", {}).get("S") == plan.stamp for item in seen):
            return None  # another planner gave the day this plan
        expires = epoch_seconds(charge.expires_at)
        freezes = []
        for key, item in zip(keys, seen, strict=True):
            if item is None:
                freezes.append(
                    {
                        "Put": {
                            "Item": {
                                **key,
                                "plan": {"S": frozen},
                                "left": {"N": "0"},
                                "used": {"N": "0"},
                                "expiresAt": expires,
                            },
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    }
                )
            else:
                freezes.append(
                    {
                        "Update": {
                            "Key": key,
                            "UpdateExpression": "SET #plan = :frozen, #left = :zero",
                            "ConditionExpression": "#plan = :seen",
                            "ExpressionAttributeNames": {"#plan": "plan", "#left": "left"},
                            "ExpressionAttributeValues": {
                                ":frozen": {"S": frozen},
                                ":zero": {"N": "0"},
                                ":seen": item["plan"],
                            },
                        }
                    }
                )
        self._write_all(freezes)
        # Frozen: no charge matches them, so what they used is final.
        used = sum(_number(item, "used") for item in self._table.batch_get(keys).values())
        left = max(0, plan.quota - used)
        self._write_all(
            [
                {
                    "Update": {
                        "Key": key,
                        "UpdateExpression": "SET #plan = :plan, #left = :share",
                        "ConditionExpression": "#plan = :frozen",
                        "ExpressionAttributeNames": {"#plan": "plan", "#left": "left"},
                        "ExpressionAttributeValues": {
                            ":plan": {"S": plan.stamp},
                            ":share": {"N": str(plan.share(shard, left) if shard < plan.shards else 0)},
                            ":frozen": {"S": frozen},
                        },
                    }
                }
                for shard, key in enumerate(keys)
            ]
        )
        return None

    def _write_all(self, writes: list[dict[str, Any]]) -> None:
        """Every conditional write, a transaction of up to 100 at a time; a chunk that meets a charge
        on one of its shards at that moment (a conflict, which a busy day makes likely) is written
        item by item instead. A failed condition means another planner moved on: 503."""
        chunks = [
            writes[start : start + MAX_TRANSACTION_ITEMS]
            for start in range(0, len(writes), MAX_TRANSACTION_ITEMS)
        ]

        def write(chunk: list[dict[str, Any]]) -> None:
            canceled = self._table.transact(chunk)
            if canceled is None:
                return
            if any(canceled.failed(index) for index in range(len(chunk))):
                raise DependencyUnavailable("another planner moved the day's quota shards")
            side_by_side(self._write_one, chunk, PLAN_WORKERS)

        side_by_side(write, chunks, PLAN_WORKERS)

    def _write_one(self, write: dict[str, Any]) -> None:
        ((operation, request),) = write.items()
        answer = self._table.write("put_item" if operation == "Put" else "update_item", **request)
        if isinstance(answer, ConditionFailed):
            raise DependencyUnavailable("another planner moved the day's quota shards")

    # ------------------------------------------------------------------ daily quota: full shards
    def learn_full(self, charge: QuotaCharge) -> None:
        """Read every shard of the plan once and remember the full ones: near the quota's end, one
        read of all shards costs less than probing them one by one."""
        plan = charge.plan
        keys = [shard_key(charge, shard) for shard in range(plan.shards)]
        found = self._table.batch_get(keys)
        for shard, key in enumerate(keys):
            item = found.get(key["pk"]["S"])
            if (
                item is not None
                and item.get("plan", {}).get("S") == plan.stamp
                and _number(item, "left") <= 0
            ):
                self.mark_full(charge, shard)

    def shards_to_try(self, charge: QuotaCharge) -> list[int]:
        """The plan's shards not known full, starting at a random one: concurrent sends spread out."""
        now = time.monotonic()
        with self._lock:
            found = self._full.get(_full_key(charge), {})
            full = frozenset(shard for shard, at in found.items() if now - at < FULL_MEMORY_SECONDS)
        shards = charge.plan.shards
        start = self._shard_of(shards)
        # Built from two ranges, not shard by shard: every send asks, and a quota has hundreds.
        in_turn = [*range(start, shards), *range(start)]
        return [shard for shard in in_turn if shard not in full] if full else in_turn

    def mark_full(self, charge: QuotaCharge, shard: int) -> None:
        with self._lock:
            self._full.setdefault(_full_key(charge), {})[shard] = time.monotonic()


def _full_key(charge: QuotaCharge) -> tuple[str, str, str, str]:
    return (charge.ledger.value, charge.workspace_id, charge.day, charge.plan.stamp)


def cap_refusal(cap: RecipientCap, items: list[Item | None]) -> int | Capped:
    """What a refused count met (`items`: the refused cap items as they were, `ALL_OLD`): a later
    bucket counted already (a clock ahead of this one's), to count in instead; else no room."""
    counts: dict[int, int] = {}
    last = cap.bucket
    for item in items:
        for name, value in (item or {}).items():
            if name[:1] == "f" and name[1:].lstrip("-").isdigit() and "N" in value:
                counts[int(name[1:])] = int(value["N"])
        last = max(last, int((item or {}).get("last", {}).get("N", "0")))
    return last if last > cap.bucket else Capped(cap.retry_after(counts))
