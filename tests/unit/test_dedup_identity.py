"""The dedup identity (docs/guarantees.md, Sending): deterministic; no two different tuples collide."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from sendonce.dedup.identity import dedup_identity

BASE = ("ws_a", "+15550100000", None, "hello")


def test_given_the_same_tuple_when_hashed_twice_then_the_same_identity() -> None:
    assert dedup_identity(*BASE) == dedup_identity(*BASE)


def test_given_each_field_changed_when_hashed_then_the_identity_changes() -> None:
    base = dedup_identity(*BASE)

    assert dedup_identity("ws_b", "+15550100000", None, "hello") != base
    assert dedup_identity("ws_a", "+15550100001", None, "hello") != base
    assert dedup_identity("ws_a", "+15550100000", "subject", "hello") != base
    assert dedup_identity("ws_a", "+15550100000", None, "hello!") != base


def test_given_shifted_field_boundaries_when_hashed_then_no_collision() -> None:
    # Plain concatenation would make both "a@b.comhi".
    assert dedup_identity("ws", "a@b.co", None, "mhi") != dedup_identity("ws", "a@b.com", None, "hi")
    assert dedup_identity("ws", "x", "ab", "c") != dedup_identity("ws", "x", "a", "bc")
    assert dedup_identity("wsx", "y", None, "b") != dedup_identity("ws", "xy", None, "b")


def test_given_no_subject_and_an_empty_subject_when_hashed_then_they_differ() -> None:
    assert dedup_identity("ws", "a@b.co", None, "hi") != dedup_identity("ws", "a@b.co", "", "hi")
    assert dedup_identity("ws", "a@b.co", None, "hi") != dedup_identity("ws", "a@b.co", "null", "hi")


def test_given_an_identity_then_it_is_a_sha256_hex_digest() -> None:
    identity = dedup_identity(*BASE)

    assert len(identity) == 64
    assert set(identity) <= set("0123456789abcdef")


tuples = st.tuples(st.text(), st.text(), st.none() | st.text(), st.text())


@given(first=tuples, second=tuples)
def test_property_different_tuples_give_different_identities(
    first: tuple[str, str, str | None, str], second: tuple[str, str, str | None, str]
) -> None:
    if first == second:
        assert dedup_identity(*first) == dedup_identity(*second)
    else:
        assert dedup_identity(*first) != dedup_identity(*second)


@given(
    workspace=st.text(max_size=8),
    left=st.text(min_size=1, max_size=12),
    right=st.text(min_size=1, max_size=12),
    cut=st.integers(min_value=1, max_value=11),
)
def test_property_moving_characters_between_recipient_and_body_changes_the_identity(
    workspace: str, left: str, right: str, cut: int
) -> None:
    joined = left + right
    cut = min(cut, len(joined) - 1)
    if joined[:cut] == left:
        return  # the same split: the same tuple
    assert dedup_identity(workspace, left, None, right) != dedup_identity(
        workspace, joined[:cut], None, joined[cut:]
    )
