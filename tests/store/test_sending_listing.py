"""The listing over the write-sharded indexes, on moto and on DynamoDB Local (the adapter's own: the
other engines' listing is the sending store's contract, tests/store/test_sending_store.py).

A workspace's messages are spread over LISTING_SHARDS partitions of ByWorkspace and of
ByWorkspaceStatus; a page merges them. With messages on every shard: pages are newest first and
reach each message once, by status too; messages created between two pages (with a clock ahead or
behind) never make one repeat or go missing; a message whose item moved to another status since
its index entry was read is left out, and the page is still full; a BatchGetItem that leaves keys
unread is asked again.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from sendonce.adapters.dynamodb_items import LISTING_SHARDS, message_key, shard_of, to_item
from sendonce.errors import DependencyUnavailable
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Status
from sendonce.messages.ports import MessageFilter

from tests.store.conftest import NOW, TABLE, DynamoDbEngine, Stores, build_stores, created, draft

START_MS = int(NOW.timestamp() * 1000)


def ids_on_every_shard(per_shard: int, start_ms: int = START_MS) -> list[str]:
    """Message ids a millisecond apart, oldest first, until every listing shard holds `per_shard`."""
    counts: Counter[int] = Counter()
    chosen: list[str] = []
    moment = start_ms
    while len(chosen) < per_shard * LISTING_SHARDS:
        candidate = new_message_id(moment)
        moment += 1
        shard = shard_of(candidate, LISTING_SHARDS)
        if counts[shard] < per_shard:
            counts[shard] += 1
            chosen.append(candidate)
    return chosen


def seed(engine: DynamoDbEngine, ids: list[str], workspace: str = "ws_a") -> list[str]:
    """Messages as the sending store writes them (its own item images), 25 a request: many at once."""
    for start in range(0, len(ids), 25):
        puts = [
            {"PutRequest": {"Item": to_item(made.message, made.handoff_due_at)}}
            for made in (
                draft(workspace=workspace, body=f"m {i}", message_id=i) for i in ids[start : start + 25]
            )
        ]
        engine.client.batch_write_item(RequestItems={TABLE: puts})
    return ids


def all_pages(stores: Stores, workspace: str, status: Status | None, limit: int) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = stores.sending.list(workspace, MessageFilter(status=status), limit, cursor)
        pages.append([message.id for message in page.messages])
        assert len(pages) < 500, "the cursor never ended"
        if page.next_cursor is None:
            return pages
        assert len(page.messages) == limit  # a full page whenever another follows
        assert page.next_cursor == page.messages[-1].id
        cursor = page.next_cursor


def flat(pages: list[list[str]]) -> list[str]:
    return [message_id for page in pages for message_id in page]


def test_given_messages_on_every_shard_then_pages_are_newest_first_and_reach_each_once(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    ids = seed(dynamodb_engine, ids_on_every_shard(2))
    seed(dynamodb_engine, ids_on_every_shard(1, START_MS + 10_000_000), workspace="ws_b")
    canceled = ids[::4]
    for message_id in canceled:
        stores.sending.cancel("ws_a", message_id, NOW)
    queued = [message_id for message_id in ids if message_id not in canceled]

    assert flat(all_pages(stores, "ws_a", None, 45)) == sorted(ids, reverse=True)
    assert flat(all_pages(stores, "ws_a", Status.QUEUED, 40)) == sorted(queued, reverse=True)
    assert all_pages(stores, "ws_a", Status.CANCELED, 100) == [sorted(canceled, reverse=True)]
    assert all_pages(stores, "ws_a", Status.SENT, 5) == [[]]
    assert len(flat(all_pages(stores, "ws_b", None, 100))) == LISTING_SHARDS


def test_given_a_workspace_named_like_anothers_partition_then_each_lists_only_its_own(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    ours = seed(dynamodb_engine, ids_on_every_shard(1))
    lookalike = created(stores, workspace="ws_a#queued", body="lookalike").id

    assert flat(all_pages(stores, "ws_a", Status.QUEUED, 100)) == sorted(ours, reverse=True)
    assert flat(all_pages(stores, "ws_a#queued", None, 100)) == [lookalike]
    assert all_pages(stores, "ws", None, 100) == [[]]


def test_given_messages_created_between_pages_then_none_repeats_and_none_that_existed_is_missed(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    existing = seed(dynamodb_engine, ids_on_every_shard(1))
    seen: list[str] = []
    cursor: str | None = None
    ahead: list[str] = []
    behind: list[str] = []
    for page_number in range(200):
        page = stores.sending.list("ws_a", MessageFilter(), 9, cursor)
        seen.extend(message.id for message in page.messages)
        cursor = page.next_cursor
        if cursor is None:
            break
        # Between two pages, two new messages: one from a clock ahead (newer than every one listed),
        # one from a clock behind (older than the cursor: it belongs to a page still to come).
        ahead.append(created(stores, body=f"a{page_number}", message_id=new_message_id(START_MS + 10**8)).id)
        behind.append(created(stores, body=f"b{page_number}", message_id=new_message_id(START_MS - 1)).id)

    assert len(seen) == len(set(seen)), "a message was listed twice"
    assert set(existing) <= set(seen), "a message that existed was missed"
    assert set(behind) <= set(seen)
    assert not set(ahead) & set(seen)
    assert seen == sorted(seen, reverse=True)


def test_given_a_message_whose_index_entry_lags_its_status_then_left_out_and_the_page_still_full(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    ids = sorted(seed(dynamodb_engine, ids_on_every_shard(1)), reverse=True)
    moved = ids[3:8]
    for message_id in moved:
        # The item says canceled; its index entry still says queued (a GSI lags its table).
        dynamodb_engine.client.update_item(
            TableName=TABLE,
            Key=message_key(message_id),
            UpdateExpression="SET #status = :canceled",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={":canceled": {"S": Status.CANCELED.value}},
        )

    first = stores.sending.list("ws_a", MessageFilter(status=Status.QUEUED), 10, None)

    still_queued = [message_id for message_id in ids if message_id not in moved]
    assert [message.id for message in first.messages] == still_queued[:10]
    assert {message.status for message in first.messages} == {Status.QUEUED}
    assert flat(all_pages(stores, "ws_a", Status.QUEUED, 20)) == still_queued


def test_given_a_batch_read_that_leaves_keys_unread_then_they_are_read_again(
    dynamodb_engine: DynamoDbEngine,
) -> None:
    client = dynamodb_engine.new_client()
    stores = build_stores(client)
    ids = sorted(seed(dynamodb_engine, ids_on_every_shard(1)), reverse=True)
    shortened = _leave_half_unread(client, times=3)

    page = stores.sending.list("ws_a", MessageFilter(), 30, None)

    assert shortened == [3]
    assert [message.id for message in page.messages] == ids[:30]


def test_given_a_batch_read_that_keeps_leaving_keys_unread_then_dependency_unavailable(
    dynamodb_engine: DynamoDbEngine,
) -> None:
    client = dynamodb_engine.new_client()
    stores = build_stores(client)
    seed(dynamodb_engine, ids_on_every_shard(1)[:5])
    _leave_half_unread(client, times=1000)

    with pytest.raises(DependencyUnavailable):
        stores.sending.list("ws_a", MessageFilter(), 5, None)


def _leave_half_unread(client: Any, times: int) -> list[int]:
    """The first `times` BatchGetItem answers of `client` move half their items to UnprocessedKeys,
    as DynamoDB does past 16 MB or when throttled; the answers shortened, counted."""
    shortened = [0]

    def shorten(parsed: dict[str, Any], **_: Any) -> None:
        if shortened[0] >= times:
            return
        for table, items in (parsed.get("Responses") or {}).items():
            if items:
                shortened[0] += 1
                unread = items[: max(1, len(items) // 2)]
                parsed["Responses"][table] = items[len(unread) :]
                keys = [{"pk": item["pk"], "sk": item["sk"]} for item in unread]
                parsed["UnprocessedKeys"] = {table: {"Keys": keys, "ConsistentRead": True}}

    client.meta.events.register("after-call.dynamodb.BatchGetItem", shorten)
    return shortened


def test_the_listing_writes_each_message_to_its_shard_of_both_indexes(
    dynamodb_engine: DynamoDbEngine, stores: Stores
) -> None:
    message = created(stores, body="one")
    stores.sending.cancel("ws_a", message.id, NOW + timedelta(seconds=1))

    item = dynamodb_engine.item(message_key(message.id))

    assert item is not None
    shard = shard_of(message.id, LISTING_SHARDS)
    assert item["workspaceShard"]["S"] == f"ws_a#{shard}"
    assert item["workspaceStatus"]["S"] == f"ws_a#canceled#{shard}"
