"""A workspace's listing over its write-sharded index partitions, merged newest first.

A listing index spreads one workspace's entries over many partitions (shards), by a hash of each
entry's id, so that one busy workspace is no hot partition. Each shard is read newest first, in
chunks, the shards that need reading side by side. The merge yields an entry only once every shard
that may still hold a greater id has been read past it: a shard's unread entries are all below the
last entry it returned (its `LastEvaluatedKey`). So the entries come out in one order, greatest id
first, each once, whatever their spread over the shards and however the reads were cut (a filter
or DynamoDB's 1 MB may end a chunk early, even empty). Ids are ULIDs: greatest is newest.

A page resumes strictly below the last id of the page before (`below`), so following the pages
skips nothing that existed and repeats nothing, even when entries are written between two pages.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from typing import Any, Generic, TypeVar

from msgspec import Struct, field

from sendonce.adapters.dynamodb_writes import DynamoDbTable, Item
from sendonce.side_by_side import side_by_side

S = TypeVar("S")
# A chunk read again is twice the one before, up to this: a filtered shard is read to its end in few calls.
MOST_READ = 1000
# Threads reading shards at once: a page's first round of 64 queries in four turns.
SHARD_READERS = 16


class Chunk(Struct, frozen=True):
    """What one read of one shard returned: entries newest first, and where the next read starts
    (None: the shard is read to its end)."""

    entries: list[Item]
    next_start: Item | None


# Reads `limit` entries of `shard` from `start` (None: its newest).
ReadShard = Callable[[S, Item | None, int], Chunk]


class _ShardReading(Struct, Generic[S]):
    name: S
    size: int
    buffer: deque[Item] = field(default_factory=deque)
    start: Item | None = None
    read: bool = False
    done: bool = False


def entry_id(entry: Item) -> str:
    return str(entry["id"]["S"])


def first_read(wanted: int, shards: int) -> int:
    """A first chunk large enough that a shard seldom holds more of the `wanted` newest entries:
    the mean share, two standard deviations (the ids spread as a binomial), and one; never more
    than `wanted`. A shard that does hold more is read again, alone."""
    mean = wanted / shards
    return min(wanted, math.ceil(mean + 2 * math.sqrt(mean)) + 1)


def newest_first(
    shards: Sequence[S],
    read: ReadShard[S],
    first: int,
    most: int = MOST_READ,
    readers: int = SHARD_READERS,
) -> Iterator[Item]:
    """Every entry of every shard, greatest id first, each once; read lazily, a chunk at a time."""
    states = [_ShardReading(shard, max(1, first)) for shard in shards]
    while True:
        best = max((s for s in states if s.buffer), key=lambda s: entry_id(s.buffer[0]), default=None)
        best_id = entry_id(best.buffer[0]) if best is not None else None
        behind = [s for s in states if not s.buffer and not s.done and _may_hold_above(s, best_id)]
        if behind:
            chunks = side_by_side(lambda s: read(s.name, s.start, s.size), behind, workers=readers)
            for state, chunk in zip(behind, chunks, strict=True):
                state.buffer.extend(chunk.entries)
                state.start, state.done, state.read = chunk.next_start, chunk.next_start is None, True
                state.size = min(most, state.size * 2)
            continue
        if best is None:
            return
        yield best.buffer.popleft()


def _may_hold_above(shard: _ShardReading[Any], best_id: str | None) -> bool:
    """Whether an unread entry of this (empty, unfinished) shard may come before `best_id`."""
    if not shard.read or best_id is None or shard.start is None:
        return True
    return entry_id(shard.start) > best_id


def query_shard(
    table: DynamoDbTable,
    index: str,
    partition_name: str,
    below: str | None,
    extra: dict[str, Any] | None = None,
) -> ReadShard[str]:
    """Reads one partition of `index` newest first, only ids below `below` when given. `extra`: more
    of the Query (a FilterExpression with its names and values)."""

    def read(partition: str, start: Item | None, limit: int) -> Chunk:
        names = {"#p": partition_name, **(extra or {}).get("ExpressionAttributeNames", {})}
        values = {":p": {"S": partition}, **(extra or {}).get("ExpressionAttributeValues", {})}
        condition = "#p = :p"
        if below is not None:
            condition += " AND #id < :below"
            names["#id"] = "id"
            values[":below"] = {"S": below}
        query: dict[str, Any] = {
            **(extra or {}),
            "IndexName": index,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if start is not None:
            query["ExclusiveStartKey"] = start
        answer = table.query(**query)
        return Chunk(answer.get("Items", []), answer.get("LastEvaluatedKey"))

    return read


class Fetched(Struct, frozen=True):
    """A page's items; whether one more follows; and, when the read budget ran out first, the id of
    the last entry read (a page resumes below it: nothing skipped, nothing read twice)."""

    items: list[Item]
    more: bool
    stopped_at: str | None = None


def fetch_page(
    table: DynamoDbTable,
    entries: Iterator[Item],
    limit: int,
    keep: Callable[[Item], bool],
    budget: int | None = None,
) -> Fetched:
    """The items of the first `limit` entries whose item `keep` accepts, in the entries' order, and
    whether one more follows. The index holds keys only: the items are read (BatchGetItem, strongly
    consistent), so each is as it is now. An item gone since (expired) or no longer what the index
    said (a status moved on) is left out, and the next entries are read in its place. With a
    `budget`, at most that many entries are read: a filter that admits few ends its page early."""
    kept: list[Item] = []
    read = 0
    last: str | None = None
    while len(kept) <= limit:
        wanted = limit + 1 - len(kept)
        if budget is not None:
            if read >= budget:  # the loop goes on only while the page is not full
                return Fetched(kept, True, last)
            wanted = min(max(wanted, 25), budget - read)  # a sparse filter reads in larger bites
        batch = list(islice(entries, wanted))
        if not batch:
            break
        read += len(batch)
        last = entry_id(batch[-1])
        found = table.batch_get([{"pk": entry["pk"], "sk": entry["sk"]} for entry in batch])
        for entry in batch:
            item = found.get(entry["pk"]["S"])
            if item is not None and keep(item):
                kept.append(item)
    return Fetched(kept[:limit], len(kept) > limit)
