"""Sending from a template through the local stack (`make run`): rendered at acceptance, delivered
once, and once only across a new version, with or without an Idempotency-Key; a templated email to
three recipients (one given twice, in another case) is one message and one delivery, and its
template's render preview shows what was sent."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

from tests.e2e.e2e_support import (
    SETTLED,
    call,
    created_id,
    deliveries_of,
    error_code,
    eventually,
    send,
    unique_email,
    unique_phone,
    wait_status,
)

if TYPE_CHECKING:
    from tests.e2e.conftest import LocalStack

pytestmark = pytest.mark.e2e


def test_a_templated_sms_is_delivered_once_across_a_new_version(stack: LocalStack) -> None:
    name = f"otp-{uuid.uuid4().hex[:8]}"
    created = call(
        stack, "POST", "/v1/templates", {"name": name, "channel": "sms", "body": "Code {{ code }}"}
    )
    assert created.status_code == 201, created.text
    phone, key = unique_phone(), f"e2e-{uuid.uuid4()}"
    request = {"channel": "sms", "to": phone, "template": {"name": name}, "data": {"code": "481516"}}

    first = send(stack, request, idempotency_key=key)
    message_id = created_id(first)
    assert first.json()["message"]["template"] == {"name": name, "version": 1}
    assert call(stack, "POST", f"/v1/templates/{name}/versions", {"body": "{{ code }} is your code"}).ok

    replayed = send(stack, request, idempotency_key=key)
    duplicate = send(stack, request)
    assert (replayed.status_code, replayed.headers.get("Idempotency-Replayed")) == (201, "true")
    assert replayed.json()["message"]["id"] == message_id
    assert duplicate.status_code == 200
    assert duplicate.json()["message"]["id"] == message_id

    wait_status(stack, message_id, SETTLED)
    [delivery] = deliveries_of(stack, message_id)
    assert delivery["body"] == "Code 481516"
    # Other data is another message, from the new version at once.
    other = send(stack, request | {"data": {"code": "2342"}})
    assert other.json()["message"]["body"] == "2342 is your code"


def test_a_deleted_template_takes_no_send(stack: LocalStack) -> None:
    name = f"gone-{uuid.uuid4().hex[:8]}"
    assert call(stack, "POST", "/v1/templates", {"name": name, "channel": "sms", "body": "Hi"}).ok
    assert call(stack, "DELETE", f"/v1/templates/{name}").ok

    answer = send(stack, {"channel": "sms", "to": unique_phone(), "template": {"name": name}, "data": {}})

    assert answer.status_code == 422
    assert error_code(answer) == "template_not_found"


def test_a_templated_email_to_three_one_given_twice_then_a_render_preview(stack: LocalStack) -> None:
    name = f"receipt-{uuid.uuid4().hex[:8]}"
    template = {
        "name": name,
        "channel": "email",
        "subject": "Order {{ order.id }}",
        "body": "Thanks {{ name }}, {{ order.lines | length }} items.",
        "html": "<p>Thanks {{ name }}</p>",
    }
    assert call(stack, "POST", "/v1/templates", template).status_code == 201
    ann, bob, cy = unique_email("ann"), unique_email("bob"), unique_email("cy")
    data = {"name": "<Ann & co>", "order": {"id": "A-17", "lines": [1, 2, 3]}}
    request = {
        "channel": "email",
        "to": [ann, bob],
        "cc": [ann.upper().replace("@EXAMPLE.COM", "@example.com")],  # ann again, in another case
        "bcc": [cy],
        "template": {"name": name},
        "data": data,
    }

    answer = send(stack, request)
    message_id = created_id(answer)
    shown = answer.json()["message"]
    assert (shown["to"], shown["cc"], shown["bcc"]) == ([ann, bob], [], [cy])
    assert (shown["subject"], shown["body"]) == ("Order A-17", "Thanks <Ann & co>, 3 items.")
    assert shown["html"] == "<p>Thanks &lt;Ann &amp; co&gt;</p>"  # html auto-escaped; the text is not
    assert shown["template"] == {"name": name, "version": 1}
    # The same template and data to the same three, in other fields, across a new version: a duplicate.
    version_2 = {"subject": "Order {{ order.id }}", "body": "v2 {{ name }}", "html": "<p>v2</p>"}
    assert call(stack, "POST", f"/v1/templates/{name}/versions", version_2).status_code == 201
    again = send(stack, request | {"to": [cy], "cc": [bob], "bcc": [ann]})
    assert again.status_code == 200, again.text
    assert again.json()["message"]["id"] == message_id

    wait_status(stack, message_id, SETTLED)
    (delivery,) = eventually(lambda: deliveries_of(stack, message_id))
    assert (delivery["to"], delivery.get("cc", []), delivery["bcc"]) == ([ann, bob], [], [cy])
    assert delivery["subject"] == "Order A-17"

    preview = call(stack, "POST", f"/v1/templates/{name}/render", {"data": data, "version": 1})
    assert preview.status_code == 200, preview.text
    assert preview.json()["rendered"] == {
        "subject": "Order A-17",
        "body": "Thanks <Ann & co>, 3 items.",
        "html": "<p>Thanks &lt;Ann &amp; co&gt;</p>",
    }
    assert preview.json()["sms"] is None
