"""Twilio's status callbacks in: `POST /v1/webhooks/twilio`, through the real handler on fakes.

A callback is a form signed with the account's auth token over the URL Twilio called; the URL
names our message (`?messageId=`). Its status becomes a provider event, published once per
(MessageSid, MessageStatus), or is acknowledged and changes nothing.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from msgspec.structs import replace
from sendonce import composition
from sendonce.api import dependencies
from sendonce.api.app import handle
from sendonce.api.dependencies import ApiDependencies
from sendonce.messages.model import MessageFailure
from sendonce.messages.service import MessageService
from sendonce.provider_events.model import ProviderEventType
from sendonce.provider_events.twilio_body import (
    InvalidCallback,
    called_url,
    message_id_of,
    parse_form,
    signature,
    signature_matches,
    status_event,
)
from sendonce.secret_values import SecretUnavailable
from sendonce.suppressions.model import Reason

from tests.support.lambda_context import FakeLambdaContext
from tests.unit.unit_fakes import (
    FakeEventQueue,
    FakeQueue,
    InMemoryApiKeys,
    InMemoryStore,
    fake_api_dependencies,
)

TOKEN = "twilio_auth_token_unit"
DOMAIN = "abc123.execute-api.us-east-1.amazonaws.com"
PATH = "/v1/webhooks/twilio"
MESSAGE_ID = "msg_01JDZ0000000000000000000000"
SID = "SM" + "a" * 32
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _form(status: str, **more: str) -> dict[str, str]:
    return {
        "AccountSid": "AC" + "0" * 32,
        "ApiVersion": "2010-04-01",
        "From": "+15550100999",
        "MessageSid": SID,
        "MessageStatus": status,
        "SmsSid": SID,
        "SmsStatus": status,
        "To": "+15550100000",
        **more,
    }


# ---------------------------------------------------------------------------- the signature
def test_the_signature_is_twilios_documented_example() -> None:
    # Twilio's "Webhooks security" example: auth token 12345, this URL and these parameters.
    parameters = [
        ("CallSid", "CA1234567890ABCDE"),
        ("Caller", "+12349013030"),
        ("Digits", "1234"),
        ("From", "+12349013030"),
        ("To", "+18005551212"),
    ]
    url = "https://mycompany.com/myapp.php?foo=1&bar=2"

    assert signature("12345", url, parameters) == "0/KCTR6DLpKmkAf8muzZqo1nDgQ="
    assert signature_matches("12345", url, list(reversed(parameters)), "0/KCTR6DLpKmkAf8muzZqo1nDgQ=")


def test_the_signature_agrees_with_twilios_own_library() -> None:
    from twilio import request_validator as validator_module  # noqa: PLC0415  # a test dependency

    url = called_url("https", DOMAIN, PATH, f"messageId={MESSAGE_ID}")
    form = _form("delivered", Body="héllo + bye")

    assert signature(TOKEN, url, list(form.items())) == validator_module.RequestValidator(
        TOKEN
    ).compute_signature(url, form)


@pytest.mark.parametrize(
    ("signed", "called"),
    [
        ("https://h.test/cb?messageId=m", "https://h.test:443/cb?messageId=m"),
        ("https://h.test:443/cb?messageId=m", "https://h.test/cb?messageId=m"),
        ("http://localhost:3000/cb?messageId=m", "http://localhost:3000/cb?messageId=m"),
    ],
)
def test_the_url_is_checked_with_and_without_its_default_port(signed: str, called: str) -> None:
    parameters = list(_form("sent").items())

    assert signature_matches(TOKEN, called, parameters, signature(TOKEN, signed, parameters))


@pytest.mark.parametrize(
    ("url", "parameters", "token"),
    [
        ("https://h.test/cb?messageId=other", list(_form("sent").items()), TOKEN),  # another message
        ("http://h.test/cb?messageId=m", list(_form("sent").items()), TOKEN),  # another scheme
        ("https://h.test/cb?messageId=m", list(_form("failed").items()), TOKEN),  # another status
        ("https://h.test/cb?messageId=m", list(_form("sent").items()), "another token"),
    ],
)
def test_anything_changed_from_what_was_signed_fails(url: str, parameters: Any, token: str) -> None:
    given = signature(TOKEN, "https://h.test/cb?messageId=m", list(_form("sent").items()))

    assert not signature_matches(token, url, parameters, given)


@pytest.mark.parametrize("given", [None, "", "not base64", "0/KCTR6DLpKmkAf8muzZqo1nDgQ="])
def test_a_missing_or_wrong_signature_fails(given: str | None) -> None:
    assert not signature_matches(TOKEN, "https://h.test/cb", list(_form("sent").items()), given)


def test_a_form_that_is_not_utf8_cannot_be_read() -> None:
    with pytest.raises(InvalidCallback):
        parse_form(b"Body=%FF%FE")
    with pytest.raises(InvalidCallback):
        parse_form(b"\xff=1")


def test_the_message_id_comes_from_the_signed_query() -> None:
    assert message_id_of(f"a=1&messageId={MESSAGE_ID}") == MESSAGE_ID
    assert message_id_of("a=1") is None
    with pytest.raises(InvalidCallback):
        message_id_of("messageId=" + "m" * 65)


# ---------------------------------------------------------------------------- the mapping
@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("sent", ProviderEventType.SENT),
        ("delivered", ProviderEventType.DELIVERED),
        ("undelivered", ProviderEventType.FAILED),
        ("failed", ProviderEventType.FAILED),
    ],
)
def test_the_statuses_that_change_a_message(status: str, expected: ProviderEventType) -> None:
    event = status_event(_form(status), MESSAGE_ID, NOW)

    assert event is not None
    assert event.type is expected
    assert event.provider == "twilio"
    assert event.event_id == f"{SID}:{status}"  # a repeated callback is the same event
    assert event.message_id == MESSAGE_ID
    assert event.to == "+15550100000"
    assert event.occurred_at == "2026-11-30T12:00:00.000Z"
    assert event.suppress is None


@pytest.mark.parametrize(
    "status",
    ["queued", "accepted", "sending", "scheduled", "read", "canceled", "receiving", "received", "new"],
)
def test_the_other_statuses_change_nothing(status: str) -> None:
    assert status_event(_form(status), MESSAGE_ID, NOW) is None


def test_a_failure_names_twilios_error_code() -> None:
    event = status_event(_form("undelivered", ErrorCode="30007"), MESSAGE_ID, NOW)

    assert event is not None
    assert event.error == MessageFailure(
        "twilio_30007", "Twilio reported the message undelivered (error 30007)"
    )
    assert event.suppress is None


def test_a_failure_without_a_code_names_its_status() -> None:
    event = status_event(_form("failed", ErrorMessage="Queue overflow"), MESSAGE_ID, NOW)

    assert event is not None
    assert event.error == MessageFailure("twilio_failed", "Queue overflow")


def test_a_stop_reply_fails_the_message_and_suppresses_the_recipient() -> None:
    event = status_event(_form("failed", ErrorCode="21610"), MESSAGE_ID, NOW)

    assert event is not None
    assert event.type is ProviderEventType.FAILED
    assert event.error is not None
    assert event.error.code == "twilio_21610"
    assert event.suppress is Reason.OPTED_OUT
    assert event.suppression_reason is Reason.OPTED_OUT


def test_a_callback_naming_no_message_of_ours_changes_nothing() -> None:
    assert status_event(_form("delivered"), None, NOW) is None


@pytest.mark.parametrize("missing", ["MessageSid", "MessageStatus"])
def test_a_callback_without_its_sid_or_status_cannot_be_read(missing: str) -> None:
    form = _form("sent")
    del form[missing], form["SmsSid" if missing == "MessageSid" else "SmsStatus"]

    with pytest.raises(InvalidCallback):
        status_event(form, MESSAGE_ID, NOW)


# ---------------------------------------------------------------------------- through the real handler
@pytest.fixture
def api() -> Iterator[ApiDependencies]:
    deps = fake_api_dependencies(
        MessageService(store=InMemoryStore(), queue=FakeQueue(), dedup_window=timedelta(minutes=15)),
        InMemoryApiKeys.of("ws"),
        twilio_auth_token=lambda: TOKEN,
    )
    dependencies.root.use(deps)
    yield deps
    composition.reset_all()


def _callback(
    form: dict[str, str],
    *,
    query: str = f"messageId={MESSAGE_ID}",
    signed_url: str | None = None,
    headers: dict[str, str] | None = None,
    base64_body: bool = False,
    provider: str = "twilio",
) -> tuple[int, dict[str, Any]]:
    """Twilio's callback as API Gateway hands it on: signed over `signed_url` (by default the URL
    the event says was called)."""
    path = f"/v1/webhooks/{provider}"
    url = signed_url or f"https://{DOMAIN}{path}?{query}"
    body = urlencode(form)
    sent = {
        "content-type": "application/x-www-form-urlencoded",
        "x-forwarded-proto": "https",
        "x-twilio-signature": signature(TOKEN, url, list(form.items())),
        **(headers or {}),
    }
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "POST /v1/webhooks/{provider}",
        "rawPath": path,
        "rawQueryString": query,
        "headers": {name: value for name, value in sent.items() if value},
        "requestContext": {
            "domainName": DOMAIN,
            "http": {"method": "POST", "path": path},
            "stage": "$default",
        },
        "body": base64.b64encode(body.encode()).decode() if base64_body else body,
        "isBase64Encoded": base64_body,
    }
    answer = handle(event, FakeLambdaContext())  # type: ignore[arg-type]
    return answer["statusCode"], json.loads(answer["body"])


def _published(api: ApiDependencies) -> list[Any]:
    queue = api.events
    assert isinstance(queue, FakeEventQueue)
    return queue.published


@pytest.mark.parametrize("base64_body", [False, True])
def test_a_signed_callback_is_published_as_its_event(api: ApiDependencies, base64_body: bool) -> None:
    status, body = _callback(_form("delivered"), base64_body=base64_body)

    assert (status, body) == (200, {"success": True})
    [event] = _published(api)
    assert (event.provider, event.event_id, event.message_id, event.type) == (
        "twilio",
        f"{SID}:delivered",
        MESSAGE_ID,
        ProviderEventType.DELIVERED,
    )


def test_a_repeated_callback_is_published_as_the_same_event(api: ApiDependencies) -> None:
    _callback(_form("failed", ErrorCode="21610"))
    _callback(_form("failed", ErrorCode="21610"))

    first, second = _published(api)
    assert first.event_id == second.event_id  # the events queue applies it once, by its id
    assert replace(first, occurred_at="") == replace(second, occurred_at="")  # when it came aside
    assert first.suppress is Reason.OPTED_OUT


def test_a_status_that_changes_nothing_is_acknowledged_unpublished(api: ApiDependencies) -> None:
    assert _callback(_form("sending"))[0] == 200
    assert _published(api) == []


@pytest.mark.parametrize(
    "change",
    [
        {"headers": {"x-twilio-signature": "AAAAAAAAAAAAAAAAAAAAAAAAAAA="}},
        {"headers": {"x-twilio-signature": ""}},  # none at all
        # A URL other than the one called: another message, host, path or scheme.
        {"signed_url": f"https://{DOMAIN}{PATH}?messageId=msg_other"},
        {"signed_url": f"https://elsewhere.test{PATH}?messageId={MESSAGE_ID}"},
        {"signed_url": f"https://{DOMAIN}/v1/webhooks/http?messageId={MESSAGE_ID}"},
        {"headers": {"x-forwarded-proto": "http"}},
    ],
)
def test_a_callback_not_signed_for_the_url_called_is_unauthorized(
    api: ApiDependencies, change: dict[str, Any]
) -> None:
    status, body = _callback(_form("delivered"), **change)

    assert status == 401
    assert body["success"] is False
    assert body["error"]["code"] == "unauthorized"
    assert _published(api) == []


def test_without_a_forwarded_proto_the_url_is_https(api: ApiDependencies) -> None:
    assert _callback(_form("sent"), headers={"x-forwarded-proto": ""})[0] == 200


def test_a_signed_callback_without_its_status_is_a_validation_error(api: ApiDependencies) -> None:
    form = {
        name: value for name, value in _form("sent").items() if name not in ("MessageStatus", "SmsStatus")
    }

    status, body = _callback(form)

    assert status == 400
    assert body["error"]["code"] == "validation_error"
    assert _published(api) == []


def test_without_twilio_credentials_the_route_is_not_found(api: ApiDependencies) -> None:
    dependencies.root.use(replace(api, twilio_auth_token=None))

    status, body = _callback(_form("delivered"))

    assert status == 404
    assert body["error"]["code"] == "not_found"


def test_credentials_that_cannot_be_read_are_a_503_never_a_401(api: ApiDependencies) -> None:
    def unavailable() -> str:
        raise SecretUnavailable("the secret store is down")

    dependencies.root.use(replace(api, twilio_auth_token=unavailable))

    status, body = _callback(_form("delivered"))

    assert status == 503
    assert body["error"]["code"] == "unavailable"
    assert _published(api) == []
