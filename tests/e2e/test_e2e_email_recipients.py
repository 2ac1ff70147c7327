"""Issue 30, email as senders write it, end to end through `make run`: an email to three recipients
(one of them given twice, in another case, across to and cc) with a bcc and a reply-to address is
one message, and one entry in the sandbox's deliveries with to, cc and bcc as sent."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.e2e.e2e_support import (
    created_id,
    deliveries_of,
    eventually,
    message,
    send,
    unique_body,
    unique_email,
    wait_status,
)

if TYPE_CHECKING:
    from tests.e2e.conftest import LocalStack

pytestmark = pytest.mark.e2e


def test_an_email_to_three_with_a_repeat_bcc_and_reply_to_is_one_message_and_one_delivery(
    stack: LocalStack,
) -> None:
    ann, bob, cy = unique_email("ann"), unique_email("bob"), unique_email("cy")
    body = unique_body("email lists")
    request = {
        "channel": "email",
        "to": [ann, bob],
        "cc": [ann.upper().replace("@EXAMPLE.COM", "@example.com")],  # ann again, in another case
        "bcc": [cy],
        "replyTo": "desk@example.com",
        "subject": "Your invoice",
        "body": body,
        "html": "<p>Your invoice</p>",
    }

    answer = send(stack, request)
    message_id = created_id(answer)
    shown = answer.json()["message"]
    assert (shown["to"], shown["cc"], shown["bcc"]) == ([ann, bob], [], [cy])
    assert shown["replyTo"] == "desk@example.com"

    wait_status(stack, message_id, ("sent", "delivered"))
    (delivery,) = eventually(lambda: deliveries_of(stack, message_id))
    assert delivery["to"] == [ann, bob]
    assert delivery.get("cc", []) == []
    assert delivery["bcc"] == [cy]
    assert delivery["replyTo"] == "desk@example.com"
    assert delivery["html"] == "<p>Your invoice</p>"
    assert delivery["body"] == body
    assert message(stack, message_id)["to"] == [ann, bob]

    again = send(
        stack, {**request, "to": [bob.upper().replace("@EXAMPLE.COM", "@example.com")], "cc": [cy, ann]}
    )
    assert again.status_code == 200, again.text  # the same set of recipients, in other fields: a duplicate
    assert again.json()["duplicateOnly"] is True
    assert again.json()["message"]["id"] == message_id
    assert len(deliveries_of(stack, message_id)) == 1
