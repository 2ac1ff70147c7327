"""Templates on DynamoDB, in the messages table: a head item per name, an item per version, never changed.

Every key names the workspace, so another workspace's template is never even read:
- the head, `TEMPLATES#<workspace>` / `<name>`: the latest version (`version`, its content, `channel`
  and `createdAt`) and, once deleted, `deletedAt`. A head is never removed: a name created again
  goes on from its `version`. A workspace's heads are one partition, sorted by name; the listing
  is a Query of it, deleted heads filtered out, resuming after the last name of the page before.
- a version, `TEMPLATE#<workspace>#<name>` / `v#<version, zero-padded>`: that version's content,
  `channel` and `createdAt`, written once (`attribute_not_exists(pk)`). A name has no `#` (NAME),
  so the key names one (workspace, name): a name that is no NAME is never created.

Each new version is one transaction of two Puts: the head, conditional on still being the head the
writer last saw (absent; deleted at its version; live at its version), and the version's item,
conditional on being absent. Of the writers that saw one head, exactly one writes; each of the others
is told the head as it is now (ALL_OLD) and writes over that, so every writer gets a number of its
own, one after another, and no version is written twice. A transaction canceled by a conflict is
tried again (`with_retries`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any, TypeGuard, TypeVar

from msgspec.structs import replace

from sendonce.adapters.dynamodb_items import cursor_text, opaque_cursor, parse_datetime
from sendonce.adapters.dynamodb_writes import (
    CONFLICT,
    ConditionFailed,
    DynamoDbTable,
    Item,
    TryAgain,
    with_retries,
)
from sendonce.clock import rfc3339
from sendonce.errors import DependencyUnavailable, InvalidCursor
from sendonce.messages.model import Channel
from sendonce.templates.model import NAME, Template, TemplateContent, TemplatePage
from sendonce.templates.ports import NameTaken, TemplateMissing

R = TypeVar("R")

HEAD_PREFIX = "TEMPLATES#"
VERSION_PREFIX = "TEMPLATE#"
# Version items sort by number in their partition, should versions ever be listed.
VERSION_DIGITS = 10
# Each lost race is another writer's version written since this writer saw the head: it gives up
# (DependencyUnavailable) only after this many were written during its own call.
MAX_LOSSES = 100
# Deleted heads stay (their numbers go on): past a page's first read, read at least this many heads
# a Query, so that a workspace that deleted many names still lists in few calls.
FILTERED_READ = 100
LIVE = "attribute_not_exists(deletedAt)"


def head_key(workspace_id: str, name: str) -> Item:
    return {"pk": {"S": f"{HEAD_PREFIX}{workspace_id}"}, "sk": {"S": name}}


def version_key(workspace_id: str, name: str, version: int) -> Item:
    return {
        "pk": {"S": f"{VERSION_PREFIX}{workspace_id}#{name}"},
        "sk": {"S": f"v#{version:0{VERSION_DIGITS}d}"},
    }


def _attributes(template: Template) -> Item:
    """What a head and a version item both hold of a version."""
    content = template.content
    item: Item = {
        "workspaceId": {"S": template.workspace_id},
        "name": {"S": template.name},
        "channel": {"S": template.channel.value},
        "version": {"N": str(template.version)},
        "body": {"S": content.body},
        "createdAt": {"S": rfc3339(template.created_at)},
    }
    if content.subject is not None:
        item["subject"] = {"S": content.subject}
    if content.html is not None:
        item["html"] = {"S": content.html}
    return item


def _template(item: Item) -> Template:
    return Template(
        workspace_id=item["workspaceId"]["S"],
        name=item["name"]["S"],
        channel=Channel(item["channel"]["S"]),
        version=int(item["version"]["N"]),
        content=TemplateContent(
            body=item["body"]["S"],
            subject=item["subject"]["S"] if "subject" in item else None,
            html=item["html"]["S"] if "html" in item else None,
        ),
        created_at=parse_datetime(item["createdAt"]["S"]),
    )


def _live(head: Item | None) -> TypeGuard[Item]:
    return head is not None and "deletedAt" not in head


def _still(seen: Item | None) -> dict[str, Any]:
    """The condition that the head is still `seen` (None: absent). A version number is the head's
    only once live and once deleted: a delete changes no number, a create after it writes the next."""
    if seen is None:
        return {"ConditionExpression": "attribute_not_exists(pk)"}
    state = LIVE if _live(seen) else "attribute_exists(deletedAt)"
    return {
        "ConditionExpression": f"#version = :seen AND {state}",
        "ExpressionAttributeNames": {"#version": "version"},
        "ExpressionAttributeValues": {":seen": seen["version"]},
    }


def name_cursor(name: str) -> str:
    """The cursor of the page after the one that ends with `name`."""
    return opaque_cursor(name)


def cursor_name(cursor: str) -> str:
    """The last name of the page before; InvalidCursor for a cursor this listing never gave."""
    name = cursor_text(cursor)
    if not NAME.fullmatch(name):
        raise InvalidCursor(cursor)
    return name


class DynamoDbTemplateStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._table = DynamoDbTable(client, table_name)

    def create(self, template: Template) -> Template | NameTaken:
        if not NAME.fullmatch(template.name):
            raise ValueError(f"{template.name!r} is no template name")  # the service checks it first

        def first_or_next(head: Item | None) -> Template | NameTaken:
            if _live(head):
                return NameTaken(_template(head))
            last = int(head["version"]["N"]) if head is not None else 0
            return replace(template, version=last + 1)

        # Assumed absent, so no read: a head that is there is told by the refusal (ALL_OLD).
        return self._write_over(None, first_or_next)

    def add_version(
        self, workspace_id: str, name: str, content: TemplateContent, now: datetime
    ) -> Template | TemplateMissing:
        def next_of(head: Item | None) -> Template | TemplateMissing:
            if not _live(head):
                return TemplateMissing()
            latest = _template(head)
            return replace(latest, version=latest.version + 1, content=content, created_at=now)

        return self._write_over(self._table.get(head_key(workspace_id, name)), next_of)

    def latest(self, workspace_id: str, name: str) -> Template | None:
        head = self._table.get(head_key(workspace_id, name))
        return _template(head) if _live(head) else None

    def version(self, workspace_id: str, name: str, version: int) -> Template | None:
        if version < 1:
            return None
        head, wanted = head_key(workspace_id, name), version_key(workspace_id, name, version)
        found = self._table.batch_get([head, wanted])  # both in one call: keyed by their distinct `pk`
        item = found.get(wanted["pk"]["S"])
        return _template(item) if item is not None and _live(found.get(head["pk"]["S"])) else None

    def page(self, workspace_id: str, limit: int, cursor: str | None) -> TemplatePage:
        after = cursor_name(cursor) if cursor is not None else None
        condition = "pk = :pk"
        values: dict[str, Any] = {":pk": head_key(workspace_id, "")["pk"]}
        if after is not None:
            condition += " AND sk > :after"  # resumes after it even once it is deleted
            values[":after"] = {"S": after}
        query: dict[str, Any] = {
            "KeyConditionExpression": condition,
            "FilterExpression": LIVE,
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
            "Limit": limit + 1,  # one more tells whether another page exists
        }
        items: list[Item] = []
        while True:
            # The filter and DynamoDB's 1 MB both end a read early: read on until the page is full.
            answer = self._table.query(**query)
            items.extend(answer.get("Items", []))
            if len(items) > limit or "LastEvaluatedKey" not in answer:
                break
            query["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
            query["Limit"] = max(limit + 1 - len(items), FILTERED_READ)
        page = items[:limit]
        more = len(items) > limit and bool(page)
        return TemplatePage(
            templates=[_template(item) for item in page],
            next_cursor=name_cursor(page[-1]["sk"]["S"]) if more else None,
        )

    def delete(self, workspace_id: str, name: str, now: datetime) -> bool:
        answer = self._table.write(
            "update_item",
            Key=head_key(workspace_id, name),
            UpdateExpression="SET deletedAt = :now",
            ConditionExpression=f"attribute_exists(pk) AND {LIVE}",
            ExpressionAttributeValues={":now": {"S": rfc3339(now)}},
        )
        return not isinstance(answer, ConditionFailed)

    # -- writing a version
    def _write_over(self, seen: Item | None, next_of: Callable[[Item | None], Template | R]) -> Template | R:
        """`next_of(head)` written over the head as seen; when another writer got there first, made
        again from the head as that one left it, and written over that. `next_of` answers a refusal
        instead of a template when that head takes no new version."""
        for _ in range(MAX_LOSSES):
            wanted = next_of(seen)
            if not isinstance(wanted, Template):
                return wanted
            written = with_retries(partial(self._write, seen, wanted), "the template stayed contended")
            if not isinstance(written, ConditionFailed):
                return written
            seen = written.item
        raise DependencyUnavailable(f"{MAX_LOSSES} other versions were written while this one tried")

    def _write(self, seen: Item | None, template: Template) -> Template | ConditionFailed:
        """`template` as the head and as its version's item, if the head is still `seen`; else the
        head as it is now. TryAgain when another transaction held one of the items."""
        attributes = _attributes(template)
        canceled = self._table.transact(
            [
                {
                    "Put": {
                        "Item": {**head_key(template.workspace_id, template.name), **attributes},
                        **_still(seen),
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
                {
                    "Put": {
                        "Item": {
                            **version_key(template.workspace_id, template.name, template.version),
                            **attributes,
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )
        if canceled is None:
            return _template(attributes)
        if canceled.failed(0):
            return ConditionFailed(canceled.item(0))
        if CONFLICT in canceled.codes:
            raise TryAgain
        if canceled.failed(1):
            # A version item is only ever written with its head: this one was written by hand.
            raise DependencyUnavailable(
                f"template {template.name!r} has a version {template.version} its head does not know"
            )
        raise DependencyUnavailable(f"the template could not be written: {canceled.codes}")
