"""The dedup identity and key tie of an email to several recipients (docs/guarantees.md, Sending):
the set of its recipients, in any order and any of to, cc and bcc, in any ASCII case, with its
subject, text and html; a message to one address without html keeps the identity it always had."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from sendonce.api.commands import SendMessageRequest, command_of
from sendonce.dedup.identity import dedup_identity, message_identity
from sendonce.idempotency.keys import tie_identity
from sendonce.messages.service import lock_of

# Local parts of ASCII letters only, so that a change of case is a change of ASCII case.
locals_ = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)
address_sets = st.sets(locals_, min_size=1, max_size=12).map(
    lambda parts: sorted(f"{p}@example.com" for p in parts)
)


def _lock(body: dict[str, Any]) -> str:
    request = SendMessageRequest.model_validate({"channel": "email", "subject": "s", "body": "hi", **body})
    return lock_of(command_of(request, "ws_a", None))


def _spread(addresses: list[str], fields: list[int], upper: list[bool]) -> dict[str, Any]:
    """The addresses spread over to, cc and bcc (to never empty), each in upper case or not."""
    spread: dict[str, list[str]] = {"to": [], "cc": [], "bcc": []}
    for address, field, up in zip(addresses, fields, upper, strict=False):
        spread[("to", "cc", "bcc")[field]].append(address.upper() if up else address)
    if not spread["to"]:
        spread["to"].append(spread["cc"].pop() if spread["cc"] else spread["bcc"].pop())
    return {name: value for name, value in spread.items() if value or name == "to"}


@settings(max_examples=60, deadline=None)
@given(
    addresses=address_sets,
    data=st.data(),
)
def test_property_the_identity_is_the_set_whatever_its_order_field_and_ascii_case(
    addresses: list[str], data: st.DataObject
) -> None:
    n = len(addresses)
    first = data.draw(st.permutations(addresses))
    second = data.draw(st.permutations(addresses))
    fields = st.lists(st.integers(0, 2), min_size=n, max_size=n)
    cases = st.lists(st.booleans(), min_size=n, max_size=n)

    one = _lock(_spread(first, data.draw(fields), data.draw(cases)))
    other = _lock(_spread(second, data.draw(fields), data.draw(cases)))

    assert one == other
    assert one == message_identity("ws_a", addresses, "s", "hi")


@settings(max_examples=60, deadline=None)
@given(first=address_sets, second=address_sets)
def test_property_different_sets_give_different_identities(first: list[str], second: list[str]) -> None:
    if set(first) == set(second):
        return
    assert _lock({"to": first}) != _lock({"to": second})
    assert tie_identity("ws_a", "key", first) != tie_identity("ws_a", "key", second)


def test_given_one_recipient_without_html_then_the_identity_and_tie_are_those_before_lists() -> None:
    """The locks and ties of messages already in the table still match."""
    before = hashlib.sha256(
        json.dumps(["v1", "ws_a", "ann@x.io", "s", "hi"], separators=(",", ":")).encode()
    ).hexdigest()

    assert _lock({"to": "Ann@X.io"}) == before
    assert _lock({"to": ["ann@x.io"]}) == before
    assert _lock({"to": ["ann@x.io"], "cc": ["ANN@x.io"], "bcc": ["Ann@X.IO"]}) == before
    assert dedup_identity("ws_a", "ann@x.io", "s", "hi") == before
    assert tie_identity("ws_a", "key", ["Ann@x.io"]) == tie_identity("ws_a", "key", "Ann@x.io")


def test_given_html_or_another_recipient_then_another_identity() -> None:
    base = _lock({"to": "a@x.io"})

    assert _lock({"to": "a@x.io", "html": "<p>hi</p>"}) != base
    assert _lock({"to": "a@x.io", "html": "<p>hi</p>"}) != _lock({"to": "a@x.io", "html": "<p>ho</p>"})
    assert _lock({"to": "a@x.io", "cc": ["b@x.io"]}) != base
    assert _lock({"to": "a@x.io", "replyTo": "r@x.io"}) == base  # where replies go is no content


def test_given_a_set_then_no_single_recipient_value_equals_it() -> None:
    """A v2 value's recipients are a list: no v1 string, however written, encodes the same."""
    pair = message_identity("ws", ["a@x.io", "b@x.io"], "s", "hi")
    assert pair != dedup_identity("ws", '["a@x.io","b@x.io"]', "s", "hi")
    assert message_identity("ws", ["a@x.io"], "s", "hi", "") != message_identity("ws", ["a@x.io"], "s", "hi")
