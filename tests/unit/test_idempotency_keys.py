"""Idempotency-Key values and the payload they are compared on (README: When to send an Idempotency-Key)."""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sendonce.idempotency.keys import (
    InvalidIdempotencyKey,
    canonical_json,
    parse_idempotency_key,
    payload_fingerprint,
    tie_identity,
)

VISIBLE_ASCII = "".join(chr(code) for code in range(0x21, 0x7F))


@pytest.mark.parametrize("key", ["a", "abc", "order-42", "x" * 255, VISIBLE_ASCII, 'a"b', "\\"])
def test_given_1_to_255_visible_ascii_characters_when_parsed_then_the_key_itself(key: str) -> None:
    assert parse_idempotency_key(key) == key


@pytest.mark.parametrize(
    ("header", "key"),
    [
        ('"abc"', "abc"),
        ('"order-42"', "order-42"),
        ('"a\\"b"', 'a"b'),
        ('"a\\\\b"', "a\\b"),
        ('"' + "y" * 255 + '"', "y" * 255),
    ],
)
def test_given_an_rfc8941_string_when_parsed_then_the_same_key_as_the_bare_value(
    header: str, key: str
) -> None:
    assert parse_idempotency_key(header) == key


@pytest.mark.parametrize(
    "header",
    [
        "",
        '""',
        "x" * 256,
        '"' + "z" * 256 + '"',
        "with space",
        "tab\there",
        "caf\u00e9",
        "emoji\U0001f600",
        "line\nbreak",
        "nul\x00",
        "del\x7f",
        '"a\\b"',  # RFC 8941 escapes only `"` and `\`
        '"a"b"',  # an unescaped quote inside
    ],
)
def test_given_an_invalid_value_when_parsed_then_refused(header: str) -> None:
    with pytest.raises(InvalidIdempotencyKey):
        parse_idempotency_key(header)


@given(st.text(alphabet=VISIBLE_ASCII.replace('"', "").replace("\\", ""), min_size=1, max_size=255))
def test_property_a_quoted_key_means_the_bare_key(key: str) -> None:
    assert parse_idempotency_key(f'"{key}"') == parse_idempotency_key(key) == key


@given(st.text(alphabet=VISIBLE_ASCII, min_size=1, max_size=120))
def test_property_any_key_escaped_as_an_rfc8941_string_round_trips(key: str) -> None:
    quoted = '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'
    assert parse_idempotency_key(quoted) == key


@given(st.text(min_size=1, max_size=40).filter(lambda text: any(not "!" <= c <= "~" for c in text.strip())))
def test_property_a_key_with_any_invisible_or_non_ascii_character_is_refused(key: str) -> None:
    if key.startswith('"') and key.endswith('"'):
        return
    with pytest.raises(InvalidIdempotencyKey):
        parse_idempotency_key(key)


def test_given_two_bodies_differing_in_key_order_and_white_space_then_one_fingerprint() -> None:
    first = json.loads('{"channel":"sms","to":"+15550100000","body":"hi","metadata":{"a":"1","b":"2"}}')
    second = json.loads(
        '{\n  "metadata": {"b": "2", "a": "1"},\n  "body": "hi",\n'
        '  "to": "+15550100000",\n  "channel": "sms"\n}'
    )

    assert payload_fingerprint(first) == payload_fingerprint(second)


def test_given_a_changed_value_then_another_fingerprint() -> None:
    assert payload_fingerprint({"body": "hi"}) != payload_fingerprint({"body": "hi!"})
    assert payload_fingerprint({"body": "1"}) != payload_fingerprint({"body": 1})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


@given(payload=st.dictionaries(st.text(alphabet=string.ascii_letters, max_size=8), json_values, max_size=6))
def test_property_the_fingerprint_ignores_key_order_and_white_space(payload: dict[str, object]) -> None:
    reordered = dict(reversed(list(payload.items())))
    spaced = json.loads(json.dumps(reordered, indent=3, separators=(" ,  ", " :  ")))

    assert payload_fingerprint(spaced) == payload_fingerprint(payload)
    assert canonical_json(spaced) == canonical_json(payload)


def test_given_a_tie_then_workspace_key_and_destination_each_change_it() -> None:
    base = tie_identity("ws", "k", "+15550100000")

    assert tie_identity("ws", "k", "+15550100000") == base
    assert tie_identity("ws2", "k", "+15550100000") != base
    assert tie_identity("ws", "k2", "+15550100000") != base
    assert tie_identity("ws", "k", "+15550100001") != base
    assert tie_identity("ws", "k1", "5") != tie_identity("ws", "k", "15")
