"""The POST /v1/messages body schema, one test per rule of docs/api.md."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError
from sendonce.api.commands import SendMessageRequest
from sendonce.api.shapes import parse_rfc3339


def _valid(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"channel": "sms", "to": "+1 (555) 010-0000", "body": "hi"}
    body.update(changes)
    return {key: value for key, value in body.items() if value is not ...}


def _fields_in_error(body: dict[str, Any]) -> set[str]:
    with pytest.raises(ValidationError) as caught:
        SendMessageRequest.model_validate(body)
    return {".".join(str(part) for part in error["loc"]) for error in caught.value.errors()}


def _in(days: float) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).isoformat().replace("+00:00", "Z")


def test_given_a_minimal_sms_when_validated_then_accepted_and_to_normalised() -> None:
    request = SendMessageRequest.model_validate(_valid())

    assert request.to == "+15550100000"
    assert request.subject is None
    assert request.send_at() is None


@pytest.mark.parametrize("missing", ["channel", "to", "body"])
def test_given_a_required_field_missing_then_refused_naming_it(missing: str) -> None:
    assert missing in _fields_in_error(_valid(**{missing: ...}))


def test_given_an_unknown_channel_then_refused() -> None:
    assert "channel" in _fields_in_error(_valid(channel="fax"))


@pytest.mark.parametrize("field", ["sendat", "Body", "priority", "from"])
def test_given_an_unknown_field_then_refused_naming_it(field: str) -> None:
    assert field in _fields_in_error(_valid(**{field: "x"}))


def test_given_email_without_subject_then_refused_naming_subject() -> None:
    assert "subject" in _fields_in_error({"channel": "email", "to": "a@example.com", "body": "hi"})


def test_given_email_with_subject_then_accepted() -> None:
    request = SendMessageRequest.model_validate(
        {"channel": "email", "to": "A@Example.COM", "body": "hi", "subject": "s"}
    )
    assert request.to == "A@example.com"


@pytest.mark.parametrize("channel", ["sms", "imessage"])
def test_given_a_subject_on_a_non_email_channel_then_refused(channel: str) -> None:
    assert "subject" in _fields_in_error(_valid(channel=channel, subject="hello"))


@pytest.mark.parametrize(("length", "ok"), [(0, False), (1, True), (998, True), (999, False)])
def test_given_an_email_subject_of_some_length_then_only_1_to_998_accepted(length: int, ok: bool) -> None:
    body = {"channel": "email", "to": "a@example.com", "body": "hi", "subject": "s" * length}
    if ok:
        SendMessageRequest.model_validate(body)
    else:
        assert "subject" in _fields_in_error(body)


@pytest.mark.parametrize(("length", "ok"), [(0, False), (1, True), (10_000, True), (10_001, False)])
def test_given_a_body_of_some_length_then_only_1_to_10000_accepted(length: int, ok: bool) -> None:
    if ok:
        SendMessageRequest.model_validate(_valid(body="b" * length))
    else:
        assert "body" in _fields_in_error(_valid(body="b" * length))


@pytest.mark.parametrize("value", [1, None, ["hi"], {"text": "hi"}, True])
def test_given_a_body_that_is_not_a_string_then_refused(value: object) -> None:
    assert "body" in _fields_in_error(_valid(body=value))


def test_given_an_invalid_recipient_then_refused_naming_to() -> None:
    assert "to" in _fields_in_error(_valid(to="5550100000"))
    assert "to" in _fields_in_error({"channel": "email", "to": "nobody", "body": "hi", "subject": "s"})


@pytest.mark.parametrize(
    "value",
    ["2026-01-31T09:00:00Z", "2026-01-31T09:00:00.123Z", "2026-01-31T09:00:00+02:00", "2026-01-31t09:00:00z"],
)
def test_given_rfc3339_timestamps_when_parsed_then_accepted_in_utc(value: str) -> None:
    assert parse_rfc3339(value).tzinfo is not None


@pytest.mark.parametrize(
    "value",
    [
        "2026-01-31",
        "2026-01-31T09:00:00",  # no offset
        "2026-01-31 09:00:00Z",
        "31/01/2026 09:00",
        "tomorrow",
        "1767225600",
        "",
        "2026-13-31T09:00:00Z",
        "2026-01-31T25:00:00Z",
    ],
)
def test_given_a_send_at_that_is_not_rfc3339_then_refused(value: str) -> None:
    assert "sendAt" in _fields_in_error(_valid(sendAt=value))


def test_given_send_at_a_number_then_refused() -> None:
    assert "sendAt" in _fields_in_error(_valid(sendAt=1767225600))


def test_given_send_at_29_days_ahead_then_accepted() -> None:
    request = SendMessageRequest.model_validate(_valid(sendAt=_in(29)))
    assert request.send_at() is not None


def test_given_send_at_31_days_ahead_then_refused() -> None:
    assert "sendAt" in _fields_in_error(_valid(sendAt=_in(31)))


def test_given_send_at_in_the_past_then_accepted_to_send_now() -> None:
    SendMessageRequest.model_validate(_valid(sendAt=_in(-3)))


def test_given_20_metadata_keys_then_accepted_and_21_refused() -> None:
    SendMessageRequest.model_validate(_valid(metadata={f"k{i}": "v" for i in range(20)}))

    assert any(
        f.startswith("metadata") for f in _fields_in_error(_valid(metadata={f"k{i}": "v" for i in range(21)}))
    )


@pytest.mark.parametrize("metadata", [{"k": 1}, {"k": None}, {"k": {"nested": "x"}}, ["k"], "k=v"])
def test_given_metadata_that_is_not_string_to_string_then_refused(metadata: object) -> None:
    assert any(f.startswith("metadata") for f in _fields_in_error(_valid(metadata=metadata)))


def test_given_several_wrong_fields_then_each_is_named() -> None:
    fields = _fields_in_error({"channel": "sms", "to": "nope", "body": "", "extra": 1})

    assert {"to", "body", "extra"} <= fields


def test_given_metadata_at_its_length_limits_then_accepted_and_one_more_refused() -> None:
    SendMessageRequest.model_validate(_valid(metadata={"k" * 40: "v" * 500}))
    assert any(f.startswith("metadata") for f in _fields_in_error(_valid(metadata={"k" * 41: "v"})))
    assert any(f.startswith("metadata") for f in _fields_in_error(_valid(metadata={"k": "v" * 501})))


@pytest.mark.parametrize(
    "value",
    [
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
        "9999-12-31T23:59:60Z",
        "2026-02-30T09:00:00Z",
    ],
)
def test_given_a_send_at_that_is_no_real_instant_then_refused_not_an_error(value: str) -> None:
    assert "sendAt" in _fields_in_error(_valid(sendAt=value))
