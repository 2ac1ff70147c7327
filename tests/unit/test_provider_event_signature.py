"""The HTTP provider's webhook signature: HMAC-SHA256 over "<t>.<raw body>", at most 5 minutes old."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sendonce.provider_events.signature import InvalidSignature, sign, verify

SECRET = "whsec_test"
BODY = b'{"eventId":"ev_1","messageId":"msg_x","type":"delivered","occurredAt":"2026-01-01T00:00:00Z"}'
NOW = 1_800_000_000


def test_given_a_fresh_signature_when_verified_then_it_passes() -> None:
    verify(sign(SECRET, NOW, BODY), BODY, SECRET, now=NOW + 10)


@pytest.mark.parametrize(
    ("header", "body", "secret", "now"),
    [
        pytest.param(sign(SECRET, NOW, BODY), BODY + b" ", SECRET, NOW, id="tampered body"),
        pytest.param(sign("other", NOW, BODY), BODY, SECRET, NOW, id="wrong secret"),
        pytest.param(sign(SECRET, NOW, BODY), BODY, SECRET, NOW + 301, id="stale"),
        pytest.param(sign(SECRET, NOW, BODY), BODY, SECRET, NOW - 301, id="from the future"),
        pytest.param("", BODY, SECRET, NOW, id="empty header"),
        pytest.param(None, BODY, SECRET, NOW, id="no header"),
        pytest.param("v1=abc", BODY, SECRET, NOW, id="no timestamp"),
        pytest.param(f"t=abc,v1={'0' * 64}", BODY, SECRET, NOW, id="timestamp not a number"),
        pytest.param(f"t={NOW}", BODY, SECRET, NOW, id="no v1"),
        pytest.param(sign(SECRET, NOW, BODY), BODY, "", NOW, id="no secret configured"),
    ],
)
def test_given_a_bad_signature_when_verified_then_it_is_refused(
    header: str | None, body: bytes, secret: str, now: int
) -> None:
    with pytest.raises(InvalidSignature):
        verify(header, body, secret, now=now)


def test_given_two_v1_values_during_a_secret_rotation_when_one_matches_then_it_passes() -> None:
    good = sign(SECRET, NOW, BODY).split("v1=")[1]
    verify(f"t={NOW},v1={'0' * 64},v1={good}", BODY, SECRET, now=NOW)


@given(body=st.binary(max_size=512), other=st.binary(max_size=512))
def test_property_a_signature_never_signs_another_body(body: bytes, other: bytes) -> None:
    header = sign(SECRET, NOW, body)
    if other == body:
        verify(header, other, SECRET, now=NOW)
    else:
        with pytest.raises(InvalidSignature):
            verify(header, other, SECRET, now=NOW)
