"""Sending from a template through the API handler on moto (CONTRACT section 13, docs/guarantees.md
"Templates"): rendered at acceptance, the message naming its version; a keyed retry replays across a
new version; a keyless one is a duplicate, whatever version each rendered, held by a second lock
written in the create's one transaction; a refused render writes nothing and burns no key.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

SMS_TEMPLATE = {"name": "otp", "channel": "sms", "body": "Hi {{ name }}, your code is {{ code }}"}
EMAIL_TEMPLATE = {
    "name": "receipt",
    "channel": "email",
    "subject": "Order {{ order.id }}",
    "body": "Thanks {{ name }}",
    "html": "<p>Thanks {{ name }}</p>",
}
SEND = {
    "channel": "sms",
    "to": "+15550100000",
    "template": {"name": "otp"},
    "data": {"name": "Ann", "code": "123456"},
}


def _call(stack: Any, method: str, path: str, body: Any = None) -> Any:
    return stack.call(stack.event("api_send_sms.json", method=method, path=path, body=body))


def _locks(stack: Any) -> list[str]:
    return sorted(item["pk"]["S"] for item in stack.scan("MessagesTable") if item["sk"]["S"] == "LOCK")


def test_a_send_from_a_template_is_rendered_and_names_the_version_it_rendered(stack) -> None:
    assert _call(stack, "POST", "/v1/templates", SMS_TEMPLATE).status == 201

    answer = stack.send(body=SEND)

    assert answer.status == 201, answer.raw_body
    message = answer.json["message"]
    assert message["body"] == "Hi Ann, your code is 123456"
    assert message["template"] == {"name": "otp", "version": 1}
    assert message["encoding"] == "GSM-7"
    assert stack.message(message["id"])["template"] == {"name": "otp", "version": 1}
    assert len(_locks(stack)) == 2  # the content's lock and the template's, one transaction


def test_a_keyed_retry_across_a_new_version_replays_the_first_answer(stack) -> None:
    _call(stack, "POST", "/v1/templates", SMS_TEMPLATE)
    first = stack.send(body=SEND, key="order-17")
    new_version = _call(stack, "POST", "/v1/templates/otp/versions", {"body": "Code {{ code }}, {{ name }}"})
    assert new_version.status == 201

    retry = stack.send(body=SEND, key="order-17")

    assert retry.status == 201
    assert retry.header("Idempotency-Replayed") == "true"
    assert retry.raw_body == first.raw_body
    assert retry.json["message"]["template"] == {"name": "otp", "version": 1}
    assert len(stack.messages()) == 1


def test_a_keyless_retry_across_a_new_version_is_a_duplicate(stack) -> None:
    _call(stack, "POST", "/v1/templates", SMS_TEMPLATE)
    first = stack.send(body=SEND)
    _call(stack, "POST", "/v1/templates/otp/versions", {"body": "Code {{ code }}, {{ name }}"})

    retry = stack.send(body=SEND)

    assert retry.status == 200
    assert retry.json["duplicateOnly"] is True
    assert retry.json["message"]["id"] == first.json["message"]["id"]
    assert retry.json["message"]["body"] == "Hi Ann, your code is 123456"  # the original, version 1
    assert len(stack.messages()) == 1


def test_the_same_template_with_other_data_or_to_another_recipient_is_a_new_message(stack) -> None:
    _call(stack, "POST", "/v1/templates", SMS_TEMPLATE)
    stack.send(body=SEND)

    other_data = stack.send(body=SEND | {"data": {"name": "Ann", "code": "654321"}})
    other_recipient = stack.send(body=SEND | {"to": "+15550100001"})
    # The data's key order and white space are no difference.
    reordered = stack.send(body=SEND | {"data": {"code": "123456", "name": "Ann"}})

    assert (other_data.status, other_recipient.status, reordered.status) == (201, 201, 200)


def test_a_written_send_of_the_same_content_is_a_duplicate_of_the_templated_one(stack) -> None:
    _call(stack, "POST", "/v1/templates", SMS_TEMPLATE)
    first = stack.send(body=SEND)

    written = stack.send(body={"channel": "sms", "to": "+15550100000", "body": "Hi Ann, your code is 123456"})

    assert written.status == 200
    assert written.json["message"]["id"] == first.json["message"]["id"]


def test_20_concurrent_identical_templated_sends_deliver_once(stack, http_provider) -> None:
    stack.setenv("SENDONCE_SMS_PROVIDER", "http")
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    _call(stack, "POST", "/v1/templates", SMS_TEMPLATE)
    stack.warm_api()

    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(lambda _: stack.send(body=SEND), range(20)))

    statuses = sorted(a.status for a in answers)
    assert statuses == [200] * 19 + [201], [a.raw_body for a in answers if a.status not in (200, 201)]
    created = next(a for a in answers if a.status == 201).json["message"]["id"]
    assert {a.json["message"]["id"] for a in answers} == {created}
    assert stack.dispatch("sms") == {"batchItemFailures": []}
    assert stack.dispatch("sms") == {"batchItemFailures": []}
    assert [call.body["body"] for call in http_provider.calls] == ["Hi Ann, your code is 123456"]
    assert stack.message(created)["status"] == "sent"


def test_an_unknown_deleted_or_other_channels_template_is_422_and_burns_no_key(stack) -> None:
    _call(stack, "POST", "/v1/templates", EMAIL_TEMPLATE)
    _call(stack, "POST", "/v1/templates", SMS_TEMPLATE)
    assert _call(stack, "DELETE", "/v1/templates/otp").status == 200

    deleted = stack.send(body=SEND, key="k-1")
    unknown = stack.send(body=SEND | {"template": {"name": "nope"}})
    other_channel = stack.send(body=SEND | {"template": {"name": "receipt"}})
    no_version = stack.send(body=SEND | {"template": {"name": "receipt", "version": 9}})

    for answer in (deleted, unknown, other_channel, no_version):
        assert answer.status == 422, answer.raw_body
        assert answer.json["error"]["code"] == "template_not_found"
    assert stack.messages() == []
    assert _locks(stack) == []
    # The key stays unused: the caller fixes the request and sends it under the same key.
    _call(stack, "POST", "/v1/templates", SMS_TEMPLATE)
    assert stack.send(body=SEND | {"data": {"name": "Bo", "code": "1"}}, key="k-1").status == 201


def test_missing_data_and_an_output_over_a_fields_limit_are_422_with_details(stack) -> None:
    _call(stack, "POST", "/v1/templates", SMS_TEMPLATE)
    _call(stack, "POST", "/v1/templates", {"name": "long", "channel": "sms", "body": "{{ 'x' * n }}"})

    missing = stack.send(body=SEND | {"data": {}})
    too_long = stack.send(body=SEND | {"template": {"name": "long"}, "data": {"n": 10_001}})

    assert missing.status == 422
    assert missing.json["error"]["code"] == "template_data_invalid"
    assert missing.json["error"]["details"] == {"missing": ["code", "name"]}
    assert too_long.status == 422
    assert too_long.json["error"]["details"] == {"field": "body"}
    assert stack.messages() == []


def test_a_canceled_templated_message_releases_both_locks(stack) -> None:
    _call(stack, "POST", "/v1/templates", SMS_TEMPLATE)
    scheduled = stack.send(body=SEND | {"sendAt": _in_an_hour()})
    message_id = scheduled.json["message"]["id"]

    assert _call(stack, "DELETE", f"/v1/messages/{message_id}").status == 200

    assert _locks(stack) == []
    _call(stack, "POST", "/v1/templates/otp/versions", {"body": "Code {{ code }}, {{ name }}"})
    again = stack.send(body=SEND)
    assert again.status == 201
    assert again.json["message"]["template"] == {"name": "otp", "version": 2}


def test_an_email_template_renders_subject_and_body(stack) -> None:
    _call(stack, "POST", "/v1/templates", EMAIL_TEMPLATE)

    answer = stack.send(
        "api_send_email.json",
        body={
            "channel": "email",
            "to": "ada@example.com",
            "template": {"name": "receipt", "version": 1},
            "data": {"name": "Ada", "order": {"id": "A-17"}},
        },
    )

    assert answer.status == 201, answer.raw_body
    assert answer.json["message"]["subject"] == "Order A-17"
    assert answer.json["message"]["body"] == "Thanks Ada"


def test_a_batch_renders_each_templated_item_and_answers_a_refused_one_alone(stack) -> None:
    _call(stack, "POST", "/v1/templates", SMS_TEMPLATE)
    items = [
        SEND,
        SEND | {"to": "+15550100001"},
        SEND | {"template": {"name": "nope"}},
        SEND | {"data": {"name": "Ann"}},
        SEND,  # identical to the first: its duplicate
        SEND | {"idempotencyKey": "batch-item-1", "to": "+15550100002"},
    ]

    answer = _call(stack, "POST", "/v1/messages/batch", {"messages": items})

    assert answer.status == 200, answer.raw_body
    results = answer.json["results"]
    assert [r["status"] for r in results] == [201, 201, 422, 422, 200, 201]
    assert results[2]["error"]["code"] == "template_not_found"
    assert results[3]["error"]["details"] == {"missing": ["code"]}
    assert results[4]["message"]["id"] == results[0]["message"]["id"]
    assert all(r["message"]["template"] == {"name": "otp", "version": 1} for r in results if r["message"])
    assert len(stack.messages()) == 3


def test_body_and_template_together_or_data_alone_are_400(stack) -> None:
    both = stack.send(body=SEND | {"body": "hi"})
    data_alone = stack.send(body={"channel": "sms", "to": "+15550100000", "body": "hi", "data": {}})
    too_much_data = stack.send(body=SEND | {"data": {"x": "y" * 33_000}})

    assert [a.status for a in (both, data_alone, too_much_data)] == [400, 400, 400]
    assert {d["field"] for d in both.json["error"]["details"]} == {"body"}
    assert {d["field"] for d in data_alone.json["error"]["details"]} == {"data"}
    assert {d["field"] for d in too_much_data.json["error"]["details"]} == {"data"}


def _in_an_hour() -> str:
    from datetime import UTC, datetime, timedelta  # noqa: PLC0415

    return (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _elsewhere(stack: Any) -> Any:
    """The template store as another execution environment's API writes it."""
    from sendonce.adapters.dynamodb_templates import DynamoDbTemplateStore  # noqa: PLC0415

    return DynamoDbTemplateStore(stack.dynamodb, "MessagesTable")


def test_a_version_published_by_another_environment_is_sent_at_once(stack) -> None:
    from datetime import UTC, datetime  # noqa: PLC0415

    from sendonce.templates.model import TemplateContent  # noqa: PLC0415

    _call(stack, "POST", "/v1/templates", SMS_TEMPLATE)
    assert stack.send(body=SEND).status == 201  # this environment now holds version 1
    _elsewhere(stack).add_version(
        "ws_local", "otp", TemplateContent(body="Code {{ code }} for {{ name }}"), datetime.now(UTC)
    )

    answer = stack.send(body=SEND | {"data": {"name": "Bo", "code": "2"}})

    assert answer.status == 201
    assert answer.json["message"]["body"] == "Code 2 for Bo"
    assert answer.json["message"]["template"] == {"name": "otp", "version": 2}


def test_a_template_deleted_by_another_environment_takes_no_send_at_once(stack) -> None:
    from datetime import UTC, datetime  # noqa: PLC0415

    _call(stack, "POST", "/v1/templates", SMS_TEMPLATE)
    assert stack.send(body=SEND).status == 201
    assert _elsewhere(stack).delete("ws_local", "otp", datetime.now(UTC))

    answer = stack.send(body=SEND | {"data": {"name": "Bo", "code": "2"}})

    assert answer.status == 422
    assert answer.json["error"]["code"] == "template_not_found"


def test_a_test_twin_has_templates_of_its_own(stack) -> None:
    from sendonce.modes import twin_of  # noqa: PLC0415

    twin = twin_of("ws_local")

    def twin_call(method: str, path: str, body: Any = None) -> Any:
        return stack.call(
            stack.event("api_send_sms.json", method=method, path=path, body=body, workspace=twin)
        )

    assert twin_call("POST", "/v1/templates", SMS_TEMPLATE).status == 201
    assert _call(stack, "GET", "/v1/templates/otp").status == 404  # the live workspace has none

    from_twin = stack.send(body=SEND, workspace=twin)
    live = stack.send(body=SEND)

    assert from_twin.status == 201, from_twin.raw_body
    assert from_twin.json["message"]["template"] == {"name": "otp", "version": 1}
    assert live.status == 422
    assert live.json["error"]["code"] == "template_not_found"
