"""The sms-v2 provider (AWS End User Messaging SMS, SendTextMessage): the request it makes, and each
of its failures read as `classification`'s table says, through a real botocore client (no socket)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.stub import Stubber
from msgspec import structs
from sendonce.dispatch.ports import ProviderThrottled, askable
from sendonce.errors import (
    AmbiguousOutcome,
    DispatchFailure,
    PermanentFailure,
    ProviderRefused,
    ProviderUnreachable,
    TransientFailure,
)
from sendonce.providers.classification import REQUIRED_SIGNALS, TABLE, Verdict
from sendonce.providers.sms_v2_provider import CONTEXT_MESSAGE_ID, TIME_TO_LIVE_SECONDS, SmsV2Provider

from tests.unit.aws_faults import client, sms_message, sms_v2_fault

SMS_V2_ROWS = [row for row in TABLE if row.provider == "sms-v2"]
EXPECTED: dict[Verdict, tuple[type[DispatchFailure], str]] = {
    Verdict.REJECTED: (PermanentFailure, "provider_rejected"),
    Verdict.NOT_ACCEPTED: (ProviderRefused, "provider_rejected"),
    Verdict.UNREACHABLE: (ProviderUnreachable, "provider_unreachable"),
    Verdict.THROTTLED: (ProviderThrottled, "provider_throttled"),
    Verdict.RETRY_HERE: (TransientFailure, "provider_unavailable"),
    Verdict.MAYBE_TAKEN: (AmbiguousOutcome, "provider_error"),
}


def _sms_v2() -> Any:
    return client("pinpoint-sms-voice-v2")


def test_given_a_message_when_sent_then_one_send_text_message_names_it_and_returns_aws_id() -> None:
    message = sms_message()
    provider = SmsV2Provider(_sms_v2(), configuration_set="sendonce-sms", origination_identity="pool-1")
    with Stubber(_sms_v2()) as stubber:
        stubber.add_response(
            "send_text_message",
            {"MessageId": "862a8790-60c0-4430-9b2b-658bdexample"},
            expected_params={
                "DestinationPhoneNumber": "+15550100000",
                "MessageBody": "hello",
                "MessageType": "TRANSACTIONAL",
                "ConfigurationSetName": "sendonce-sms",
                "OriginationIdentity": "pool-1",
                "TimeToLive": 259_200,
                "Context": {"sendonce_message_id": message.id},
            },
        )
        provider_id = provider.send(message)
        stubber.assert_no_pending_responses()

    assert provider_id == "862a8790-60c0-4430-9b2b-658bdexample"
    assert TIME_TO_LIVE_SECONDS == 259_200  # AWS's maximum: 72 hours
    assert CONTEXT_MESSAGE_ID == "sendonce_message_id"  # what its events carry back


def test_given_no_configuration_set_nor_origin_when_sent_then_aws_chooses_them() -> None:
    with Stubber(_sms_v2()) as stubber:
        stubber.add_response(
            "send_text_message",
            {"MessageId": "m-1"},
            expected_params={
                "DestinationPhoneNumber": "+15550100000",
                "MessageBody": "hello",
                "MessageType": "TRANSACTIONAL",
                "TimeToLive": TIME_TO_LIVE_SECONDS,
                "Context": {CONTEXT_MESSAGE_ID: sms_message().id},
            },
        )
        assert SmsV2Provider(_sms_v2()).send(sms_message()) == "m-1"


def test_the_provider_cannot_dedup_nor_be_asked() -> None:
    provider = SmsV2Provider(_sms_v2())
    assert provider.name == "sms-v2"
    assert provider.honours_idempotency_key is False  # SendTextMessage has no idempotency token
    assert askable(provider) is None  # a lost answer is `unknown`, never asked about


def test_every_required_signal_has_an_sms_v2_row() -> None:
    assert set(REQUIRED_SIGNALS) <= {row.signal for row in SMS_V2_ROWS}


@pytest.mark.parametrize("row", SMS_V2_ROWS, ids=lambda row: row.signal)
def test_given_each_failure_of_the_table_when_sent_then_the_adapter_raises_its_verdict(row: Any) -> None:
    raised = sms_v2_fault(row.signal)

    kind, code = EXPECTED[row.verdict]
    assert type(raised) is kind
    assert isinstance(raised, DispatchFailure)
    assert raised.code == ("provider_timeout" if row.signal == "timeout" else code)
    assert str(raised).startswith(f"sms-v2: {row.why}")


def test_given_a_request_the_sdk_refuses_then_nothing_left_and_it_is_not_accepted() -> None:
    sent: list[object] = []
    aws = _sms_v2()
    aws.meta.events.register("before-send.pinpoint-sms-voice-v2", _counting(sent), unique_id="count")
    try:
        with pytest.raises(DispatchFailure) as raised:
            SmsV2Provider(aws).send(structs.replace(sms_message(), body=""))
    finally:
        aws.meta.events.unregister("before-send.pinpoint-sms-voice-v2", unique_id="count")

    assert sent == []  # MessageBody below its minimum: botocore never sent it
    assert type(raised.value) is ProviderRefused  # provably not taken: another provider may be tried


def test_given_a_refusal_then_its_reason_is_told_and_the_recipient_is_not() -> None:
    with Stubber(_sms_v2()) as stubber:
        stubber.add_client_error(
            "send_text_message",
            service_error_code="ConflictException",
            service_message="+15550100000 has opted out",
            http_status_code=400,
            modeled_fields={"Reason": "DESTINATION_PHONE_NUMBER_OPTED_OUT"},
        )
        with pytest.raises(DispatchFailure) as raised:
            SmsV2Provider(_sms_v2()).send(sms_message())

    assert type(raised.value) is PermanentFailure  # the recipient: no other provider is tried
    assert "DESTINATION_PHONE_NUMBER_OPTED_OUT" in str(raised.value)
    assert "+15550100000" not in str(raised.value)


def test_given_a_lost_answer_then_one_call_was_made_and_the_outcome_is_open() -> None:
    calls: list[object] = []
    aws = _sms_v2()
    aws.meta.events.register("before-send.pinpoint-sms-voice-v2", _counting(calls), unique_id="count")
    try:
        raised = sms_v2_fault("timeout")
    finally:
        aws.meta.events.unregister("before-send.pinpoint-sms-voice-v2", unique_id="count")

    assert len(calls) == 1  # never repeated: SendTextMessage would send it twice
    assert type(raised) is AmbiguousOutcome
    assert isinstance(raised.__cause__, Exception)


def _counting(calls: list[object]) -> Any:
    """A hook noting each request that would go out (and letting it go on)."""

    def hook(request: object, **_: Any) -> None:
        calls.append(request)

    return hook
