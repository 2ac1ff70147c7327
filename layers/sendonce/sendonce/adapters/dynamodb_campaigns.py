"""The campaigns' store on DynamoDB (the MessagesTable): campaigns, their gates, pages and errors.

A workspace's campaigns share one partition (`CAMPAIGNS#<workspace>`), so every read and write is
scoped by workspace in its key; a campaign's gate sits beside it. A status change writes both in one
transaction, and a campaign's creates check the gate in theirs (`dynamodb_sending`). A page's
progress is written only over the progress it was read as (its `version`), and the write that marks
a page done adds its counts to the campaign's in the same transaction.

The pace is the workspace limits' fixed windows (`sendonce.limits.model`), counted on their own
items (RATE#campaign:<id>#<window>#<shard>) in the LimitsTable: every worker takes from one count.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from msgspec.structs import replace

from sendonce.adapters.dynamodb_items import (
    cursor_text,
    epoch_seconds,
    opaque_cursor,
    parse_datetime,
    shard_of,
)
from sendonce.adapters.dynamodb_limits import rate_key
from sendonce.adapters.dynamodb_writes import (
    CONFLICT,
    Cancellation,
    ConditionFailed,
    DynamoDbTable,
    Item,
    TryAgain,
    with_retries,
)
from sendonce.campaigns.model import (
    COUNT_NAMES,
    Campaign,
    CampaignStatus,
    Counts,
    LineError,
    PageProgress,
    PageWork,
    PausedReason,
    looks_like_campaign_id,
)
from sendonce.campaigns.ports import CampaignPage, ErrorPage, Transition
from sendonce.clock import rfc3339
from sendonce.errors import DependencyUnavailable, InvalidCursor
from sendonce.limits.model import Grant, Limits, Window
from sendonce.status_webhooks.model import CampaignTally

# A campaign's pages and errors outlive it by far less than its messages: kept 90 days.
KEEP_SECONDS = 90 * 86_400
_COUNTS = {name: f"n_{name}" for name in COUNT_NAMES}
# The delivery counts, kept on counters of their own (`tally_update`).
_TALLIED = ("sent", "delivered", "failed")
# 64 counters: a million messages' two changes in ten minutes are about 50 transactions a second
# on each, and a campaign's read sums them in one BatchGetItem (100 keys at most).
TALLY_SHARDS = 64
# Copies of a campaign's gate: each of its creates' transactions checks one, at random, so that
# about 70 transactions a second (a million messages in ten minutes) are about 4 on each copy, and
# transactions checking the same item at once seldom conflict. A status change writes every copy.
GATE_COPIES = 16


def campaign_key(workspace_id: str, campaign_id: str) -> Item:
    return {"pk": {"S": f"CAMPAIGNS#{workspace_id}"}, "sk": {"S": f"CMP#{campaign_id}"}}


def gate_key(workspace_id: str, campaign_id: str, copy: int) -> Item:
    """One of a campaign's GATE_COPIES copies of its gate: a create checks one, a change writes all."""
    return {"pk": {"S": f"CAMPAIGNS#{workspace_id}"}, "sk": {"S": f"GATE#{campaign_id}#{copy}"}}


def page_key(work: PageWork) -> Item:
    return {"pk": {"S": f"CMPPAGE#{work.workspace_id}#{work.campaign_id}"}, "sk": {"S": f"{work.number:07d}"}}


def error_key(workspace_id: str, campaign_id: str, line: int) -> Item:
    return {"pk": {"S": f"CMPERR#{workspace_id}#{campaign_id}"}, "sk": {"S": f"{line:08d}"}}


def is_campaign_item(item: Item) -> bool:
    """A campaign's own item (not its gate, pages or errors): what the stream tells of."""
    pk, sk = str(item.get("pk", {}).get("S", "")), str(item.get("sk", {}).get("S", ""))
    return pk.startswith("CAMPAIGNS#") and sk.startswith("CMP#")


def campaign_of(item: Item) -> Campaign:
    def when(name: str) -> datetime | None:
        return parse_datetime(item[name]["S"]) if name in item else None

    def number(name: str) -> int:
        return int(item.get(name, {}).get("N", "0"))

    reason = item.get("pausedReason", {}).get("S")
    return Campaign(
        id=item["id"]["S"],
        workspace_id=item["workspaceId"]["S"],
        name=item["name"]["S"],
        channel=item["channel"]["S"],
        status=CampaignStatus(item["status"]["S"]),
        content=json.loads(item["content"]["S"]),
        rate_per_second=number("ratePerSecond"),
        created_at=parse_datetime(item["createdAt"]["S"]),
        counts=Counts(**{name: number(attribute) for name, attribute in _COUNTS.items()}),
        paused_reason=PausedReason(reason) if reason else None,
        send_at=when("sendAt"),
        started_at=when("startedAt"),
        completed_at=when("completedAt"),
        inline=item.get("inline", {}).get("BOOL", False),
        planned=item.get("planned", {}).get("BOOL", False),
        pages=number("pages"),
        pages_done=number("pagesDone"),
    )


def _campaign_item(campaign: Campaign) -> Item:
    item: Item = {
        **campaign_key(campaign.workspace_id, campaign.id),
        "id": {"S": campaign.id},
        "workspaceId": {"S": campaign.workspace_id},
        "name": {"S": campaign.name},
        "channel": {"S": campaign.channel},
        "status": {"S": campaign.status.value},
        "content": {"S": json.dumps(campaign.content, separators=(",", ":"), sort_keys=True)},
        "ratePerSecond": {"N": str(campaign.rate_per_second)},
        "createdAt": {"S": rfc3339(campaign.created_at)},
        "inline": {"BOOL": campaign.inline},
        "planned": {"BOOL": False},
        "pages": {"N": "0"},
        "pagesDone": {"N": "0"},
        **{
            attribute: {"N": str(value)}
            for attribute, value in zip(_COUNTS.values(), campaign.counts.as_tuple(), strict=True)
        },
    }
    if campaign.send_at is not None:
        item["sendAt"] = {"S": rfc3339(campaign.send_at)}
    return item


def _progress_of(item: Item | None) -> PageProgress:
    if item is None:
        return PageProgress()
    counts = Counts(
        **{name: int(item.get(attribute, {}).get("N", "0")) for name, attribute in _COUNTS.items()}
    )
    return PageProgress(
        next_line=int(item["nextLine"]["N"]),
        counts=counts,
        done=item.get("done", {}).get("BOOL", False),
        parked=item.get("parked", {}).get("BOOL", False),
        version=int(item["version"]["N"]),
    )


def _work_of(item: Item) -> PageWork:
    return PageWork(
        workspace_id=item["workspaceId"]["S"],
        campaign_id=item["campaignId"]["S"],
        number=int(item["sk"]["S"]),
        start=int(item["start"]["N"]),
        end=int(item["end"]["N"]),
        first_line=int(item["firstLine"]["N"]),
        repeats=tuple(int(value["N"]) for value in item.get("repeats", {}).get("L", [])),
    )


class DynamoDbCampaignStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._table = DynamoDbTable(client, table_name)

    def create(self, campaign: Campaign) -> None:
        canceled = self._transact(
            [
                {
                    "Put": {
                        "Item": _campaign_item(campaign),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                *self._gate_puts(campaign.workspace_id, campaign.id, False),
            ],
            token=campaign.id,
        )
        if canceled is not None:
            raise DependencyUnavailable(f"the campaign's create was canceled: {canceled.codes}")

    def _transact(self, items: list[dict[str, Any]], token: str | None = None) -> Cancellation | None:
        """The transaction, tried again (jittered) while it only met another one on its items: a
        campaign's item, a page's and its gate copies are each written by few, but at once."""

        def attempt() -> Cancellation | None:
            canceled = self._table.transact(items, token=token)
            conflicted = canceled is not None and CONFLICT in canceled.codes
            if conflicted and canceled is not None and not any(canceled.failed(i) for i in range(len(items))):
                raise TryAgain
            return canceled

        return with_retries(attempt, "a campaign's items stayed contended")

    def get(self, workspace_id: str, campaign_id: str, *, delivery_counts: bool = True) -> Campaign | None:
        if not looks_like_campaign_id(campaign_id):
            return None
        item = self._table.get(campaign_key(workspace_id, campaign_id))
        if item is None:
            return None
        campaign = campaign_of(item)
        return self._with_tallies([campaign])[0] if delivery_counts else campaign

    def _with_tallies(self, campaigns: list[Campaign]) -> list[Campaign]:
        """The campaigns with their delivery counts, summed over their counters (one read)."""
        if not campaigns:
            return campaigns
        keys = [
            tally_key(campaign.workspace_id, campaign.id, shard)
            for campaign in campaigns
            if campaign.started_at is not None
            for shard in range(TALLY_SHARDS)
        ]
        found = self._table.batch_get(keys) if keys else {}
        summed = []
        for campaign in campaigns:
            counts = campaign.counts
            for shard in range(TALLY_SHARDS):
                item = found.get(tally_key(campaign.workspace_id, campaign.id, shard)["pk"]["S"])
                if item is not None:
                    counts = counts.plus(
                        Counts(**{name: int(item.get(_COUNTS[name], {}).get("N", "0")) for name in _TALLIED})
                    )
            summed.append(replace(campaign, counts=counts))
        return summed

    def page(self, workspace_id: str, limit: int, cursor: str | None) -> CampaignPage:
        request: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :cmp)",
            "ExpressionAttributeValues": {":pk": {"S": f"CAMPAIGNS#{workspace_id}"}, ":cmp": {"S": "CMP#"}},
            "ScanIndexForward": False,
            "Limit": limit,
            "ConsistentRead": True,
        }
        if cursor is not None:
            after = cursor_text(cursor)
            if not looks_like_campaign_id(after):
                raise InvalidCursor(cursor)
            request["ExclusiveStartKey"] = campaign_key(workspace_id, after)
        response = self._table.query(**request)
        campaigns = self._with_tallies([campaign_of(item) for item in response.get("Items", [])])
        more = "LastEvaluatedKey" in response and len(campaigns) == limit
        return CampaignPage(campaigns, opaque_cursor(campaigns[-1].id) if more and campaigns else None)

    def transition(self, campaign: Campaign, change: Transition) -> Campaign | None:
        names = {"#status": "status"}
        values: dict[str, Any] = {":to": {"S": change.to.value}, ":at": {"S": rfc3339(change.at)}}
        allowed = []
        for position, status in enumerate(sorted(change.from_statuses)):
            values[f":from{position}"] = {"S": status.value}
            allowed.append(f":from{position}")
        sets = ["#status = :to", "updatedAt = :at"]
        removes = []
        if change.paused_reason is not None:
            sets.append("pausedReason = :reason")
            values[":reason"] = {"S": change.paused_reason.value}
        else:
            removes.append("pausedReason")
        if change.to in (CampaignStatus.SENDING, CampaignStatus.SCHEDULED):
            sets.append("startedAt = if_not_exists(startedAt, :at)")
        if change.to in (CampaignStatus.COMPLETED, CampaignStatus.CANCELED):
            sets.append("completedAt = :at")
        update = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        canceled = self._transact(
            [
                {
                    "Update": {
                        "Key": campaign_key(campaign.workspace_id, campaign.id),
                        "UpdateExpression": update,
                        "ConditionExpression": f"#status IN ({', '.join(allowed)})",
                        "ExpressionAttributeNames": names,
                        "ExpressionAttributeValues": values,
                    }
                },
                *self._gate_puts(campaign.workspace_id, campaign.id, change.gate_open),
            ]
        )
        if canceled is not None:
            if canceled.failed(0):
                return None
            raise DependencyUnavailable(f"the campaign's change was canceled: {canceled.codes}")
        return self.get(campaign.workspace_id, campaign.id)

    def _gate_puts(self, workspace_id: str, campaign_id: str, open_: bool) -> list[dict[str, Any]]:
        """Every copy of the campaign's gate, open or closed: written together, so a create that
        checks any one copy sees the change once it has committed."""
        return [
            {"Put": {"Item": {**gate_key(workspace_id, campaign_id, copy), "open": {"BOOL": open_}}}}
            for copy in range(GATE_COPIES)
        ]

    def planned(self, workspace_id: str, campaign_id: str, pages: int, total: int) -> None:
        self._table.write(
            "update_item",
            Key=campaign_key(workspace_id, campaign_id),
            UpdateExpression="SET planned = :yes, pages = :pages, n_total = :total",
            ExpressionAttributeValues={
                ":yes": {"BOOL": True},
                ":pages": {"N": str(pages)},
                ":total": {"N": str(total)},
            },
        )

    def progress(self, work: PageWork) -> PageProgress:
        return _progress_of(self._table.get(page_key(work)))

    def _page_put(
        self, work: PageWork, seen: PageProgress, progress: PageProgress, now_expiry: int
    ) -> dict[str, Any]:
        item: Item = {
            **page_key(work),
            "workspaceId": {"S": work.workspace_id},
            "campaignId": {"S": work.campaign_id},
            "start": {"N": str(work.start)},
            "end": {"N": str(work.end)},
            "firstLine": {"N": str(work.first_line)},
            "repeats": {"L": [{"N": str(line)} for line in work.repeats]},
            "nextLine": {"N": str(progress.next_line)},
            "done": {"BOOL": progress.done},
            "parked": {"BOOL": progress.parked},
            "version": {"N": str(progress.version)},
            "expiresAt": {"N": str(now_expiry)},
            **{
                attribute: {"N": str(value)}
                for attribute, value in zip(_COUNTS.values(), progress.counts.as_tuple(), strict=True)
            },
        }
        put: dict[str, Any] = {"Item": item}
        if seen.version == 0:
            put["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            put["ConditionExpression"] = "version = :seen"
            put["ExpressionAttributeValues"] = {":seen": {"N": str(seen.version)}}
        return {"Put": put}

    def save_progress(self, work: PageWork, seen: PageProgress, progress: PageProgress) -> bool:
        items = [self._page_put(work, seen, progress, _expiry())]
        if progress.parked:
            items.append(
                {
                    "ConditionCheck": {
                        "Key": campaign_key(work.workspace_id, work.campaign_id),
                        "ConditionExpression": "#status <> :sending",
                        "ExpressionAttributeNames": {"#status": "status"},
                        "ExpressionAttributeValues": {":sending": {"S": CampaignStatus.SENDING.value}},
                    }
                }
            )
        canceled = self._transact(items)
        if canceled is None:
            return True
        if any(canceled.failed(index) for index in range(len(items))):
            return False
        raise DependencyUnavailable(f"a page's progress was not written: {canceled.codes}")

    def finish_page(self, work: PageWork, seen: PageProgress, counts: Counts) -> bool:
        done = PageProgress(next_line=seen.next_line, counts=counts, done=True, version=seen.version + 1)
        adds = {name: value for name, value in counts.as_dict().items() if name != "total" and value}
        expression = "ADD pagesDone :one" + "".join(f", {_COUNTS[name]} :{name}" for name in adds)
        values = {":one": {"N": "1"}, **{f":{name}": {"N": str(value)} for name, value in adds.items()}}
        canceled = self._transact(
            [
                self._page_put(work, seen, done, _expiry()),
                {
                    "Update": {
                        "Key": campaign_key(work.workspace_id, work.campaign_id),
                        "UpdateExpression": expression,
                        "ExpressionAttributeValues": values,
                    }
                },
            ]
        )
        if canceled is None:
            return True
        if canceled.failed(0):
            return False
        raise DependencyUnavailable(f"a page's end was not written: {canceled.codes}")

    def parked(self, workspace_id: str, campaign_id: str) -> list[PageWork]:
        found: list[PageWork] = []
        request: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk",
            "FilterExpression": "parked = :yes",
            "ExpressionAttributeValues": {
                ":pk": {"S": f"CMPPAGE#{workspace_id}#{campaign_id}"},
                ":yes": {"BOOL": True},
            },
            "ConsistentRead": True,
        }
        while True:
            response = self._table.query(**request)
            found.extend(_work_of(item) for item in response.get("Items", []))
            if "LastEvaluatedKey" not in response:
                return found
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def complete_if_done(self, workspace_id: str, campaign_id: str, at: datetime) -> Campaign | None:
        canceled = self._transact(
            [
                {
                    "Update": {
                        "Key": campaign_key(workspace_id, campaign_id),
                        "UpdateExpression": "SET #status = :done, completedAt = :at, updatedAt = :at",
                        "ConditionExpression": "#status = :sending AND planned = :yes AND pagesDone >= pages",
                        "ExpressionAttributeNames": {"#status": "status"},
                        "ExpressionAttributeValues": {
                            ":done": {"S": CampaignStatus.COMPLETED.value},
                            ":sending": {"S": CampaignStatus.SENDING.value},
                            ":yes": {"BOOL": True},
                            ":at": {"S": rfc3339(at)},
                        },
                    }
                },
                *self._gate_puts(workspace_id, campaign_id, False),
            ]
        )
        if canceled is not None:
            if canceled.failed(0):
                return None
            raise DependencyUnavailable(f"the campaign's end was not written: {canceled.codes}")
        return self.get(workspace_id, campaign_id)

    def add_errors(self, workspace_id: str, campaign_id: str, errors: Sequence[LineError]) -> None:
        puts = []
        for error in errors:
            item: Item = {
                **error_key(workspace_id, campaign_id, error.line),
                "line": {"N": str(error.line)},
                "code": {"S": error.code},
                "message": {"S": error.message},
                "expiresAt": {"N": str(_expiry())},
            }
            if error.details is not None:
                item["details"] = {"S": json.dumps(error.details, separators=(",", ":"))}
            puts.append(item)
        self._table.batch_write(puts)

    def errors(self, workspace_id: str, campaign_id: str, limit: int, cursor: str | None) -> ErrorPage:
        request: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": f"CMPERR#{workspace_id}#{campaign_id}"}},
            "Limit": limit,
        }
        if cursor is not None:
            after = cursor_text(cursor)
            if not after.isdigit():
                raise InvalidCursor(cursor)
            request["ExclusiveStartKey"] = error_key(workspace_id, campaign_id, int(after))
        response = self._table.query(**request)
        errors = [
            LineError(
                line=int(item["line"]["N"]),
                code=item["code"]["S"],
                message=item["message"]["S"],
                details=json.loads(item["details"]["S"]) if "details" in item else None,
            )
            for item in response.get("Items", [])
        ]
        more = "LastEvaluatedKey" in response and len(errors) == limit
        return ErrorPage(errors, opaque_cursor(str(errors[-1].line)) if more and errors else None)


def _expiry() -> int:
    return int(time.time()) + KEEP_SECONDS


def tally_key(workspace_id: str, campaign_id: str, shard: int) -> Item:
    return {"pk": {"S": f"CMPTALLY#{workspace_id}#{campaign_id}#{shard}"}, "sk": {"S": "TALLY"}}


def tally_update(table_name: str, tally: CampaignTally) -> dict[str, Any]:
    """The transaction item that adds a campaign's message's change to its campaign's delivery
    counts: on one of TALLY_SHARDS counters, by the message, so that a million messages' changes in
    minutes are no hot item (the campaign's read sums them)."""
    adds = {
        name: value
        for name, value in (("sent", tally.sent), ("delivered", tally.delivered), ("failed", tally.failed))
        if value
    }
    return {
        "Update": {
            "TableName": table_name,
            "Key": tally_key(tally.workspace_id, tally.campaign_id, shard_of(tally.message_id, TALLY_SHARDS)),
            "UpdateExpression": "ADD " + ", ".join(f"{_COUNTS[name]} :{name}" for name in adds),
            "ExpressionAttributeValues": {f":{name}": {"N": str(value)} for name, value in adds.items()},
        }
    }


class DynamoDbCampaignPace:
    """A campaign's rate on the limits' windows: `rate_per_second * WINDOW_SECONDS` tokens a window,
    over as many shards as the workspace rate would use."""

    def __init__(self, client: Any, table_name: str) -> None:
        self._table = DynamoDbTable(client, table_name)

    def take(self, campaign_id: str, rate_per_second: int, wanted: int, now: datetime) -> int:
        limits = Limits(rate_per_second, 0)
        window = Window.at(now)
        shards = list(range(limits.rate_shards))
        random.shuffle(shards)
        for shard in shards:
            response = self._table.write(
                "update_item",
                Key=rate_key(f"campaign:{campaign_id}", window.number, shard),
                UpdateExpression="ADD hits :tokens SET expiresAt = if_not_exists(expiresAt, :expires)",
                ExpressionAttributeValues={
                    ":tokens": {"N": str(wanted)},
                    ":expires": epoch_seconds(
                        datetime.fromtimestamp(window.ends_at_epoch + 60, tz=now.tzinfo)
                    ),
                },
                ReturnValues="UPDATED_NEW",
            )
            if isinstance(response, ConditionFailed):
                raise DependencyUnavailable("the campaign's rate window was refused")
            grant = Grant(wanted, int(response["Attributes"]["hits"]["N"]), limits.rate_shard_cap(shard))
            if grant.granted:
                return grant.granted
        return 0
