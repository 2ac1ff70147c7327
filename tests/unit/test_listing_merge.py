"""The merge of a listing's shards (`dynamodb_listing.newest_first`), on shards held in memory.

Whatever the spread of the ids over the shards, and however each read is cut (its Limit, a filter
that drops entries, DynamoDB's 1 MB ending a read early, even empty, a LastEvaluatedKey at a
shard's very end), the entries come out greatest id first, each once; and pages that resume below
the last id of the page before reach every entry that existed, once, with new ones written between
pages.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sendonce import aws_clients
from sendonce.adapters.dynamodb_listing import SHARD_READERS, Chunk, ReadShard, first_read, newest_first
from sendonce.adapters.dynamodb_writes import Item


def _entry(entry_id: str) -> Item:
    return {"id": {"S": entry_id}}


class Shards:
    """Shards of ids, read as a DynamoDB Query reads a partition newest first: `Limit` entries
    evaluated, those the filter drops not returned, and a read cut short after `cuts[n]` entries."""

    def __init__(self, shards: list[set[str]], dropped: set[str], cuts: list[int]) -> None:
        self.shards = shards
        self.dropped = dropped
        self.cuts = cuts or [1000]
        self.reads = 0

    def read(self, below: str | None) -> ReadShard[int]:
        def read(shard: int, start: Item | None, limit: int) -> Chunk:
            cut = self.cuts[self.reads % len(self.cuts)]
            self.reads += 1
            ids = sorted((i for i in self.shards[shard] if below is None or i < below), reverse=True)
            if start is not None:
                ids = [i for i in ids if i < start["id"]["S"]]
            evaluated = ids[: max(1, min(limit, cut))]
            ended = len(evaluated) == len(ids) and len(evaluated) < limit
            return Chunk(
                [_entry(i) for i in evaluated if i not in self.dropped],
                None if ended or not evaluated else _entry(evaluated[-1]),
            )

        return read

    def listed(self, below: str | None = None, first: int = 1) -> Iterator[str]:
        read = self.read(below)
        for entry in newest_first(range(len(self.shards)), read, first=first, readers=1):
            yield entry["id"]["S"]


ids = st.text(alphabet="0123456789ABCDEFGHJKMNPQRSTVWXYZ", min_size=3, max_size=3)


@st.composite
def spread(draw: st.DrawFn) -> tuple[list[set[str]], set[str], list[int]]:
    every = draw(st.sets(ids, max_size=60))
    count = draw(st.integers(1, 9))
    shards: list[set[str]] = [set() for _ in range(count)]
    for entry_id in sorted(every):
        shards[draw(st.integers(0, count - 1))].add(entry_id)
    dropped = draw(st.sets(st.sampled_from(sorted(every)), max_size=len(every) // 3)) if every else set()
    cuts = draw(st.lists(st.integers(1, 7), max_size=5))
    return shards, dropped, cuts


@settings(max_examples=300, deadline=None)
@given(spread(), st.integers(1, 8))
def test_the_merge_gives_every_kept_entry_once_greatest_id_first(
    case: tuple[list[set[str]], set[str], list[int]], first: int
) -> None:
    shards, dropped, cuts = case
    every = set().union(*shards) - dropped

    assert list(Shards(shards, dropped, cuts).listed(first=first)) == sorted(every, reverse=True)


@settings(max_examples=300, deadline=None)
@given(spread(), st.integers(1, 6), st.lists(st.sets(ids, max_size=4), max_size=12), st.data())
def test_pages_reach_every_entry_once_with_entries_written_between_pages(
    case: tuple[list[set[str]], set[str], list[int]],
    limit: int,
    written_later: list[set[str]],
    data: st.DataObject,
) -> None:
    shards, _, cuts = case
    existing = set().union(*shards)
    store = Shards(shards, set(), cuts)
    seen: list[str] = []
    below: str | None = None
    for page_number in range(200):
        page = list(islice(store.listed(below, first=first_read(limit + 1, len(shards))), limit + 1))
        seen.extend(page[:limit])
        if len(page) <= limit:
            break
        below = page[limit - 1]
        for new_id in written_later[page_number] if page_number < len(written_later) else ():
            if new_id not in set().union(*shards):
                shards[data.draw(st.integers(0, len(shards) - 1))].add(new_id)

    assert len(seen) == len(set(seen)), seen  # nothing repeated
    assert existing <= set(seen)  # nothing that existed skipped
    assert seen == sorted(seen, reverse=True)


def test_a_first_read_covers_a_shards_share_of_a_page_with_room() -> None:
    assert first_read(21, 64) == 3
    assert first_read(101, 64) == 6
    assert first_read(2, 1) == 2  # one shard: the page itself
    assert first_read(101, 1) == 101


def test_the_clients_pool_holds_a_connection_for_each_shard_read_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")

    assert aws_clients.client("dynamodb").meta.config.max_pool_connections >= SHARD_READERS
