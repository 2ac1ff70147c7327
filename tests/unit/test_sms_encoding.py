"""An sms body's encoding and segments by GSM 03.38, and smart encoding, from the domain to the API.

The counting rules are the module's (`sendonce.messages.sms`); the sends run the API function's
real handler on in-memory fakes, as `test_composition_roots.py` does.
"""

# ruff: noqa: RUF001  (the look-alike characters are what these tests are about)
from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sendonce import composition
from sendonce.api import dependencies
from sendonce.api.app import handle
from sendonce.messages.service import MessageService
from sendonce.messages.sms import Encoding, SmsCount, count, smart_encoded

from tests.support.lambda_context import FakeLambdaContext
from tests.unit.unit_fakes import (
    FakeQueue,
    InMemoryApiKeys,
    InMemoryStore,
    ManualClock,
    fake_api_dependencies,
)

EVENTS = Path(__file__).resolve().parents[2] / "events"
GSM_BASIC = (
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
GSM_EXTENSION = "\f^{}\\[~]|€"
EMOJI = "\U0001f600"  # outside the Basic Multilingual Plane: two UTF-16 units


# ---------------------------------------------------------------------------- counting
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("hello", SmsCount(Encoding.GSM_7, 1)),
        ("a" * 160, SmsCount(Encoding.GSM_7, 1)),
        ("a" * 161, SmsCount(Encoding.GSM_7, 2)),
        ("a" * 306, SmsCount(Encoding.GSM_7, 2)),
        ("a" * 307, SmsCount(Encoding.GSM_7, 3)),
        # an extension character is two septets
        ("€" * 80, SmsCount(Encoding.GSM_7, 1)),
        ("€" * 81, SmsCount(Encoding.GSM_7, 2)),
        ("a" * 159 + "[", SmsCount(Encoding.GSM_7, 2)),
        # 306 septets, but 76 escapes fill a 153-septet part: the 153rd goes on a third
        ("€" * 153, SmsCount(Encoding.GSM_7, 3)),
        # every accented letter of the basic set stays GSM-7
        ("Ça coûte 5 € à Zürich", SmsCount(Encoding.UCS_2, 1, ("û",))),
        ("Ça va, Zürich? 5 € ¿Qué?", SmsCount(Encoding.GSM_7, 1)),
        ("x" * 70 + "✓", SmsCount(Encoding.UCS_2, 2, ("✓",))),
        ("✓" * 70, SmsCount(Encoding.UCS_2, 1, ("✓",))),
        ("✓" * 134, SmsCount(Encoding.UCS_2, 2, ("✓",))),
        ("✓" * 135, SmsCount(Encoding.UCS_2, 3, ("✓",))),
        (EMOJI * 35, SmsCount(Encoding.UCS_2, 1, (EMOJI,))),
        (EMOJI * 36, SmsCount(Encoding.UCS_2, 2, (EMOJI,))),
        # 134 units, but a pair is never split: 33 pairs to a 67-unit part
        (EMOJI * 67, SmsCount(Encoding.UCS_2, 3, (EMOJI,))),
        ("“quoted” — ok ✓ “again”", SmsCount(Encoding.UCS_2, 1, ("“", "”", "—", "✓"))),
    ],
)
def test_an_sms_body_is_counted_by_gsm_03_38(body: str, expected: SmsCount) -> None:
    assert count(body) == expected


def test_the_alphabets_are_gsm_03_38s() -> None:
    assert len(set(GSM_BASIC)) == 127  # 128 codes, one of them the escape
    assert count(GSM_BASIC) == SmsCount(Encoding.GSM_7, 1)
    assert count(GSM_EXTENSION) == SmsCount(Encoding.GSM_7, 1)
    assert count("a" * 140 + GSM_EXTENSION) == SmsCount(Encoding.GSM_7, 1)  # 160 septets
    assert count("a" * 141 + GSM_EXTENSION).segments == 2


@given(st.text(alphabet=GSM_BASIC, min_size=1, max_size=2000))
def test_a_basic_gsm_body_takes_one_segment_to_160_then_one_per_153(body: str) -> None:
    expected = 1 if len(body) <= 160 else math.ceil(len(body) / 153)
    assert count(body) == SmsCount(Encoding.GSM_7, expected)


@given(st.text(alphabet=st.characters(min_codepoint=0x0400, max_codepoint=0x04FF), min_size=1, max_size=2000))
def test_a_cyrillic_body_takes_one_segment_to_70_then_one_per_67(body: str) -> None:
    expected = 1 if len(body) <= 70 else math.ceil(len(body) / 67)
    assert count(body).encoding is Encoding.UCS_2
    assert count(body).segments == expected


@given(st.text(max_size=400), st.characters())
def test_one_more_character_never_takes_a_segment_away(body: str, more: str) -> None:
    assert count(body + more).segments >= count(body).segments


@given(st.text(max_size=400))
def test_the_characters_outside_gsm_are_named_once_in_order(body: str) -> None:
    named = count(body).non_gsm_characters
    assert len(set(named)) == len(named)
    assert all(c not in GSM_BASIC + GSM_EXTENSION for c in named)
    assert [c for c in dict.fromkeys(body) if c not in GSM_BASIC + GSM_EXTENSION] == list(named)


# ---------------------------------------------------------------------------- smart encoding
@pytest.mark.parametrize(
    ("written", "sent"),
    [
        ("“Hi” – it’s…", '"Hi" - it\'s...'),
        ("5\u00a0pm\u202fsharp", "5 pm sharp"),
        ("zero\u200bwidth\ufeff", "zerowidth"),
        ("«quote» ‹one›", '"quote" <one>'),
        ("Zürich, 5 €, ¿Qué?", "Zürich, 5 €, ¿Qué?"),  # GSM-7 already: unchanged
        ("日本 ✓", "日本 ✓"),  # no look-alike: unchanged, and UCS-2 it stays
    ],
)
def test_smart_encoding_replaces_look_alikes_only(written: str, sent: str) -> None:
    assert smart_encoded(written) == sent


@given(st.text(alphabet=GSM_BASIC + GSM_EXTENSION, max_size=300))
def test_smart_encoding_never_changes_a_gsm_body(body: str) -> None:
    assert smart_encoded(body) == body


@given(st.text(alphabet=GSM_BASIC + "‘’“”–—…\u00a0\u200b«»", max_size=300))
def test_a_body_of_gsm_and_look_alikes_is_gsm_7_once_smart_encoded(body: str) -> None:
    assert count(smart_encoded(body)).encoding is Encoding.GSM_7
    assert smart_encoded(smart_encoded(body)) == smart_encoded(body)


# ---------------------------------------------------------------------------- through the API
@pytest.fixture
def store() -> Iterator[InMemoryStore]:
    store = InMemoryStore()
    messages = MessageService(
        store=store, queue=FakeQueue(), dedup_window=timedelta(minutes=15), clock=ManualClock()
    )

    def never(**_: Any) -> dict[str, Any]:
        raise AssertionError("no key was sent")

    dependencies.root.use(fake_api_dependencies(messages, InMemoryApiKeys.of(), send_once=never))
    yield store
    composition.reset_all()


def _send(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    event = json.loads((EVENTS / "api_send_sms.json").read_text(encoding="utf-8"))
    event["body"] = json.dumps(body)
    response = handle(event, FakeLambdaContext())  # type: ignore[arg-type]
    return response["statusCode"], json.loads(response["body"])


def test_an_sms_message_shows_its_encoding_and_segments(store: InMemoryStore) -> None:
    status, answer = _send({"channel": "sms", "to": "+15550100000", "body": "Your code is 123456 ✓"})

    assert status == 201
    assert (answer["message"]["encoding"], answer["message"]["segments"]) == ("UCS-2", 1)


def test_a_message_on_another_channel_shows_neither(store: InMemoryStore) -> None:
    status, answer = _send({"channel": "email", "to": "ann@example.com", "subject": "Hi", "body": "x" * 500})

    assert status == 201
    assert (answer["message"]["encoding"], answer["message"]["segments"]) == (None, None)


def test_smart_encoding_sends_stores_and_deduplicates_the_replaced_text(store: InMemoryStore) -> None:
    status, answer = _send(
        {"channel": "sms", "to": "+15550100000", "body": "It’s “ready” – 5\u00a0pm…", "smartEncoding": True}
    )

    assert status == 201
    replaced = 'It\'s "ready" - 5 pm...'
    assert answer["message"]["body"] == replaced
    assert (answer["message"]["encoding"], answer["message"]["segments"]) == ("GSM-7", 1)
    assert store.messages[answer["message"]["id"]].body == replaced
    # The same text written plainly is the same message: the dedup guard saw the replaced text.
    again_status, again = _send({"channel": "sms", "to": "+15550100000", "body": replaced})
    assert again_status == 200
    assert again["duplicateOnly"] is True
    assert again["message"]["id"] == answer["message"]["id"]


def test_without_smart_encoding_the_body_is_sent_as_written(store: InMemoryStore) -> None:
    status, answer = _send({"channel": "sms", "to": "+15550100000", "body": "It’s ready"})

    assert status == 201
    assert answer["message"]["body"] == "It’s ready"
    assert answer["message"]["encoding"] == "UCS-2"


@pytest.mark.parametrize(
    "body",
    [
        {"channel": "email", "to": "ann@example.com", "subject": "Hi", "body": "It’s", "smartEncoding": True},
        {"channel": "imessage", "to": "+15550100000", "body": "It’s", "smartEncoding": True},
        {"channel": "sms", "to": "+15550100000", "body": "\u200b\ufeff", "smartEncoding": True},
        {"channel": "sms", "to": "+15550100000", "body": "hi", "smartEncoding": "yes"},
    ],
)
def test_smart_encoding_where_it_cannot_apply_is_a_400_and_nothing_is_stored(
    store: InMemoryStore, body: dict[str, Any]
) -> None:
    status, answer = _send(body)

    assert status == 400
    assert answer["error"]["code"] == "validation_error"
    assert store.messages == {}
