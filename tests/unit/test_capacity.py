"""bench/capacity.py: DynamoDB's billing rules per partition, and one workspace at 10,000 sends a second.

An index entry is written when it enters, leaves or changes (a key change is two writes, one per
partition), and an item's expiry costs its table nothing but each index it leaves. From the real
item images of one message's life, every partition of every table and index stays under 1,000 WCU
and 3,000 RCU a second when one workspace sends 10,000 messages a second (the API key's too, as
the API function caches the keys it found good; without that cache it would not be); and the
shard counts declared in the adapters are the ones docs/scaling.md works out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sendonce.adapters.dynamodb_items import LISTING_SHARDS, OUTBOX_SHARDS
from sendonce.adapters.dynamodb_webhooks import ENDPOINT_COPIES, EVENT_SHARDS

from bench.capacity import (
    EACH_ITS_OWN,
    CapacityProbe,
    Index,
    TableShape,
    busiest_partitions,
    expiry_of,
    family_of,
    index_uses,
    message_life,
    one_workspace,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "scaling.md"
SHAPE = TableShape(keys=("pk", "sk"), indexes=())
BY_STATUS = Index("ByWorkspaceStatus", ("workspaceStatus", "id"), "KEYS_ONLY", ())
BY_WORKSPACE_ALL = Index("ByWorkspace", ("workspaceShard", "id"), "ALL", ())


def _item(status: str, body: str = "hi") -> dict[str, Any]:
    return {
        "pk": {"S": "MSG#m1"},
        "sk": {"S": "MESSAGE"},
        "id": {"S": "m1"},
        "workspaceShard": {"S": "ws#3"},
        "workspaceStatus": {"S": f"ws#{status}#3"},
        "status": {"S": status},
        "body": {"S": body},
    }


def test_an_index_entry_is_written_once_in_and_once_out_and_twice_when_its_key_moves() -> None:
    queued, sending = _item("queued"), _item("sending")

    assert index_uses(BY_STATUS, SHAPE, None, queued) == [("ws#queued#3", 1)]
    assert index_uses(BY_STATUS, SHAPE, queued, sending) == [("ws#queued#3", 1), ("ws#sending#3", 1)]
    assert index_uses(BY_STATUS, SHAPE, sending, None) == [("ws#sending#3", 1)]
    # Keys only: a change of anything else writes nothing; projecting everything writes it whole.
    assert index_uses(BY_STATUS, SHAPE, queued, {**queued, "body": {"S": "x" * 5000}}) == []
    assert index_uses(BY_WORKSPACE_ALL, SHAPE, queued, {**queued, "body": {"S": "x" * 5000}}) == [("ws#3", 5)]


@pytest.fixture(scope="module")
def at_10k() -> dict[str, Any]:
    return one_workspace(10_000)


def _row(figures: dict[str, Any], table: str, index: str | None, partition: str) -> dict[str, Any]:
    (row,) = [
        r
        for r in figures["partitions"]
        if (r["table"], r["index"], r["partition"]) == (table, index, partition)
    ]
    return row


def test_one_workspace_at_10k_a_second_keeps_every_partition_under_the_limits(
    at_10k: dict[str, Any],
) -> None:
    assert json.loads(json.dumps(at_10k)) == at_10k  # JSON as it is
    assert at_10k["all_under"], at_10k["over"]
    for row in at_10k["partitions"]:
        assert row["under"], row
        assert row["wcu_per_second"] <= 1000
        assert row["rcu_per_second"] <= 3000
    tables = {(row["table"], row["index"]) for row in at_10k["partitions"]}
    assert tables >= {
        ("MessagesTable", None),
        ("MessagesTable", "ByWorkspace"),
        ("MessagesTable", "ByWorkspaceStatus"),
        ("MessagesTable", "Outbox"),
        ("WebhooksTable", None),
        ("WebhooksTable", "ByWorkspace"),
        ("WebhooksTable", "ByMessage"),
        ("LimitsTable", None),
        ("IdempotencyTable", None),
        ("ApiKeysTable", None),
    }


def test_without_the_api_key_cache_the_keys_partition_would_be_over() -> None:
    figures = one_workspace(10_000, key_reads_per_send=1.0)

    assert figures["over"] == ["ApiKeysTable <the workspace's API key>"]
    assert _row(figures, "ApiKeysTable", None, "<the workspace's API key>")["rcu_per_second"] == 5000


def test_the_busiest_partitions_at_10k_a_second_are_the_shards_of_docs_scaling(
    at_10k: dict[str, Any],
) -> None:
    listing = [("MessagesTable", "ByWorkspace", "ws_busy#<n>")] + [
        ("MessagesTable", "ByWorkspaceStatus", f"ws_busy#{status}#<n>")
        for status in ("queued", "sending", "sent", "delivered")
    ]
    for key in listing:  # in and out of each, 1 WCU each
        assert _row(at_10k, *key) | {"partition": None} == {
            "table": key[0],
            "index": key[1],
            "partition": None,
            "spread": LISTING_SHARDS,
            "wcu_per_message": 2.0,
            "rcu_per_message": 0.0,
            "wcu_per_second": 10_000 * 2 / LISTING_SHARDS,
            "rcu_per_second": 0.0,
            "under": True,
        }
    events = _row(at_10k, "WebhooksTable", "ByWorkspace", "ws_busy#<n>")
    assert (events["spread"], events["wcu_per_message"]) == (EVENT_SHARDS, 6.0)  # three events, in and out
    endpoints = _row(at_10k, "WebhooksTable", None, "WHEP#ws_busy#<copy>")
    assert (endpoints["spread"], endpoints["rcu_per_message"]) == (ENDPOINT_COPIES, 3.03)
    assert _row(at_10k, "MessagesTable", "Outbox", "<n>")["spread"] == OUTBOX_SHARDS
    assert (
        _row(at_10k, "LimitsTable", None, "RATE#ws_busy#<window>#<n>")["spread"] == 20
    )  # ceil(10,000 / 500)
    assert _row(at_10k, "LimitsTable", None, "QUOTA#ws_busy#<day>#<n>")["spread"] == 512
    assert _row(at_10k, "MessagesTable", None, "MSG#<id>")["spread"] == EACH_ITS_OWN


def test_a_quarter_of_the_listing_shards_would_not_carry_10k_a_second() -> None:
    life = message_life(key_reads_per_send=0.0)
    too_few = busiest_partitions(life, 10_000)
    quarter = {
        row["partition"]: row["wcu_per_second"] * 4
        for row in too_few["partitions"]
        if row["index"] in ("ByWorkspace", "ByWorkspaceStatus") and row["table"] == "MessagesTable"
    }

    assert all(figure > 1000 for figure in quarter.values()), quarter  # so the count is no accident


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LISTING_SHARDS", LISTING_SHARDS),
        ("EVENT_SHARDS", EVENT_SHARDS),
        ("ENDPOINT_COPIES", ENDPOINT_COPIES),
        ("OUTBOX_SHARDS", OUTBOX_SHARDS),
    ],
)
def test_docs_scaling_works_with_the_declared_counts(name: str, value: int) -> None:
    assert f"`{name} = {value}`" in DOCS.read_text(encoding="utf-8")


def test_a_batch_get_prices_every_key_it_asked_for_found_or_not() -> None:
    """A strongly consistent read of a key with no item still costs 1 RRU (the suppression check
    mostly finds nothing); a key DynamoDB left unprocessed was not read."""
    probe = CapacityProbe(endpoint="http://127.0.0.1:9", shapes={"T": SHAPE})  # so no call is made

    def key(pk: str) -> dict[str, Any]:
        return {"pk": {"S": pk}, "sk": {"S": "SUPPRESSION"}}

    found = {**key("b"), "reason": {"S": "x" * 5000}}  # over 4 KB: 2 RRU
    units = probe._batch_get(
        {"RequestItems": {"T": {"Keys": [key("a"), key("b"), key("c")], "ConsistentRead": True}}},
        {"Responses": {"T": [found]}, "UnprocessedKeys": {"T": {"Keys": [key("c")]}}},
    )
    assert units.rru == 1 + 2
    assert sorted(use.partition for use in units.uses) == ["a", "b"]


def test_a_condition_check_in_a_transaction_is_a_transactional_write_on_its_keys_partition() -> None:
    """The suppression check inside the create and the claim: an absent entry still takes 2 WRU (a
    transactional write of the smallest item), on the partition of the key it names, and each
    recipient's entry is a partition of its own."""
    probe = CapacityProbe(endpoint="http://127.0.0.1:9", shapes={"MessagesTable": SHAPE})  # no call made
    key = {"pk": {"S": "SUPPRESSION#abc"}, "sk": {"S": "SUPPRESSION"}}

    units = probe._write(
        "MessagesTable", "ConditionCheck", None, None, None, failed=False, transactional=True, key=key
    )

    assert (units.wru, units.rru) == (2, 0)
    assert [(use.table, use.index, use.partition, use.wcu) for use in units.uses] == [
        ("MessagesTable", None, "SUPPRESSION#abc", 2)
    ]
    family = family_of(units.uses[0], rate_shards=1, quota_shards=1)
    assert (family.label, family.spread) == ("SUPPRESSION#<recipient>", None)


def test_the_expiry_of_a_life_is_the_index_writes_of_its_items_leaving() -> None:
    life = message_life(endpoints=0, keyed=False)

    expiry = expiry_of(life)

    # The message leaves its two listing indexes, each of its three events the two of WebhooksTable,
    # and its provider event its message's timeline index (ProviderEventsByMessage).
    assert expiry.wru == 2 + 3 * 2 + 1
    assert expiry.rru == 0
    assert all("TTL delete" in line for line in expiry.detail)
