"""Campaigns on moto, through the API function and the campaign function's real handler: one message
per distinct recipient and counts equal to the messages, whatever crashes, redeliveries, pauses and
cancels happen during the fan-out (CONTRACT section 14).

The campaign queue is driven by hand: each record is handed to CampaignFunction's handler alone (its
event source's BatchSize is 1), a record whose work failed is made visible again, as its visibility
timeout would, and a crash is injected in one adapter call of the fan-out, once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from msgspec.structs import replace

from tests.integration.conftest import REGION, Stack, aws_client, function, sqs_event
from tests.support.lambda_context import FakeLambdaContext

BUCKET = "sendonce-campaigns"


class Crash(RuntimeError):
    """A crash injected into the fan-out: its invocation dies, its record is not deleted."""


class Campaigns:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        aws_client("s3").create_bucket(Bucket=BUCKET)
        stack.setenv("CAMPAIGNS_BUCKET", BUCKET)
        self.queue_url = stack.queue_urls["CampaignQueue"]
        self.crashes = 0

    def create(self, body: dict[str, Any], key: str | None = None) -> Any:
        headers = {"Idempotency-Key": key} if key else {}
        return self.stack.call(
            self.stack.event(
                "api_send_sms.json", method="POST", path="/v1/campaigns", body=body, headers=headers
            )
        )

    def act(self, campaign_id: str, verb: str) -> Any:
        return self.stack.call(
            self.stack.event(
                "api_send_sms.json", method="POST", path=f"/v1/campaigns/{campaign_id}/{verb}", body=None
            )
        )

    def get(self, campaign_id: str) -> dict[str, Any]:
        answer = self.stack.call(
            self.stack.event("api_get_message.json", method="GET", path=f"/v1/campaigns/{campaign_id}")
        )
        assert answer.status == 200, answer.raw_body
        campaign: dict[str, Any] = answer.json["campaign"]
        return campaign

    def upload(self, campaign_id: str, lines: list[Any], workspace: str = "ws_local") -> None:
        body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
        aws_client("s3").put_object(
            Bucket=BUCKET, Key=f"campaigns/{workspace}/{campaign_id}.jsonl", Body=body
        )

    def crash_once(
        self, adapter: str, method: str, *, after: bool = False, when: Callable[..., bool] | None = None
    ) -> None:
        """The fan-out's `adapter.method` raises once (after doing its work, with `after`)."""
        root = function("campaigns").root
        fan_out = root.get()
        real = getattr(fan_out, adapter)
        outer = self

        class Crashing:
            def __getattr__(self, name: str) -> Any:
                return getattr(real, name)

        crashing = Crashing()
        original = getattr(real, method) if adapter not in ("send",) else real
        fired: list[bool] = []

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if fired or (when is not None and not when(*args, **kwargs)):
                return original(*args, **kwargs)
            fired.append(True)
            outer.crashes += 1
            if after:
                original(*args, **kwargs)
            raise Crash(f"{adapter}.{method}")

        if adapter == "send":
            root.use(replace(fan_out, send=wrapped))
            return
        setattr(crashing, method, wrapped)
        root.use(replace(fan_out, **{adapter: crashing}))

    def run(self, rounds: int = 200) -> int:
        """Hand the queue's records to the function until it is empty; the number of invocations."""
        sqs = aws_client("sqs")
        arn = f"arn:aws:sqs:{REGION}:123456789012:CampaignQueue"
        invocations = 0
        for _ in range(rounds):
            records = sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, AttributeNames=["All"], VisibilityTimeout=60
            ).get("Messages", [])
            if not records:
                attributes = sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["All"])[
                    "Attributes"
                ]
                if int(attributes["ApproximateNumberOfMessagesDelayed"]) == 0:
                    return invocations
                time.sleep(0.25)  # a cancel's sweep, held back until the listing index caught up
                continue
            for record in records:
                invocations += 1
                try:
                    context = FakeLambdaContext(remaining_millis=300_000)
                    result = function("campaigns").handler(sqs_event([record], arn), context)
                    failed = bool(result["batchItemFailures"])
                except Crash:
                    failed = True
                if failed:
                    sqs.change_message_visibility(
                        QueueUrl=self.queue_url, ReceiptHandle=record["ReceiptHandle"], VisibilityTimeout=0
                    )
                else:
                    sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=record["ReceiptHandle"])
        raise AssertionError("the campaign queue did not drain")

    def messages(self, campaign_id: str) -> list[dict[str, Any]]:
        return [
            item
            for item in self.stack.scan("MessagesTable")
            if item["sk"]["S"] == "MESSAGE" and item.get("campaignId", {}).get("S") == campaign_id
        ]


@pytest.fixture
def campaigns(stack: Stack) -> Iterator[Campaigns]:
    return Campaigns(stack)


def phone(n: int) -> str:
    return f"+1415555{n:04d}"


def new_campaign(campaigns: Campaigns, lines: list[Any] | None = None, **extra: Any) -> str:
    body = {
        "name": "spring",
        "channel": "sms",
        "body": "Hello from the spring sale",
        "ratePerSecond": 10000,
        **extra,
    }
    answer = campaigns.create(body)
    assert answer.status == 201, answer.raw_body
    campaign_id: str = answer.json["campaign"]["id"]
    if lines is not None:
        campaigns.upload(campaign_id, lines)
    return campaign_id


def assert_one_message_each(campaigns: Campaigns, campaign_id: str, recipients: list[str]) -> dict[str, Any]:
    messages = campaigns.messages(campaign_id)
    assert sorted(m["to"]["S"] for m in messages) == sorted(recipients)
    campaign = campaigns.get(campaign_id)
    counts = campaign["counts"]
    assert counts["accepted"] == len(messages)
    assert (
        counts["accepted"] + counts["duplicates"] + counts["suppressed"] + counts["invalid"]
        == counts["total"]
    )
    return campaign


def test_an_uploaded_list_gets_one_message_per_recipient_and_completes(campaigns: Campaigns) -> None:
    recipients = [phone(n) for n in range(1200)]
    campaign_id = new_campaign(campaigns, [{"to": to} for to in recipients])
    answer = campaigns.act(campaign_id, "start")
    assert answer.status == 202, answer.raw_body
    assert campaigns.act(campaign_id, "start").status == 200  # again: nothing changes
    campaigns.run()
    campaign = assert_one_message_each(campaigns, campaign_id, recipients)
    assert campaign["status"] == "completed"
    assert campaign["counts"]["total"] == 1200
    assert campaign["completedAt"] is not None


@pytest.mark.parametrize(
    ("adapter", "method", "after"),
    [
        ("files", "lines", False),  # reading the file, for the plan
        ("files", "read", False),  # reading a page's lines
        ("send", "send", True),  # a page's messages written, then the crash
        ("store", "finish_page", False),  # before the checkpoint
        ("store", "finish_page", True),  # after the checkpoint, before the record's deletion
        ("work", "pages", True),  # the plan's hand-off written, then the crash
        ("store", "planned", False),  # the plan's pages handed out, not yet recorded
        ("store", "complete_if_done", False),  # every page done, the end not yet written
    ],
)
def test_a_crash_at_any_step_then_the_redelivery_sends_each_recipient_once(
    campaigns: Campaigns, adapter: str, method: str, after: bool
) -> None:
    recipients = [phone(n) for n in range(1100)]
    campaign_id = new_campaign(campaigns, [{"to": to} for to in recipients])
    campaigns.crash_once(adapter, method, after=after)
    assert campaigns.act(campaign_id, "start").status == 202
    campaigns.run()
    assert campaigns.crashes == 1
    campaign = assert_one_message_each(campaigns, campaign_id, recipients)
    assert campaign["status"] == "completed"
    assert campaign["counts"]["accepted"] == 1100


def test_the_same_recipient_in_three_spellings_gets_one_message(campaigns: Campaigns) -> None:
    lines = [{"to": "+1 415 555 0100"}, {"to": "+14155550100"}, {"to": "+1 (415) 555-0100"}, {"to": phone(1)}]
    answer = campaigns.create(
        {"name": "three", "channel": "sms", "body": "Hi", "recipients": lines, "ratePerSecond": 1000}
    )
    assert answer.status == 201, answer.raw_body
    assert "upload" not in answer.json or answer.json["upload"] is None
    campaign_id = answer.json["campaign"]["id"]
    assert answer.json["campaign"]["counts"]["total"] == 4
    campaigns.act(campaign_id, "start")
    campaigns.run()
    campaign = assert_one_message_each(campaigns, campaign_id, ["+14155550100", phone(1)])
    assert campaign["counts"]["duplicates"] == 2
    listed = campaigns.stack.call(
        campaigns.stack.event("api_list_messages.json", query={"campaignId": campaign_id})
    )
    assert listed.status == 200, listed.raw_body
    assert {m["to"] for m in listed.json["messages"]} == {"+14155550100", phone(1)}
    assert all(m["campaignId"] == campaign_id for m in listed.json["messages"])


def test_invalid_lines_are_counted_and_listed_by_line(campaigns: Campaigns) -> None:
    lines: list[Any] = [
        {"to": phone(1)},
        {"to": "not a number"},
        "just text",
        {"to": phone(2), "extra": 1},
        {"to": phone(3)},
    ]
    campaign_id = new_campaign(campaigns, lines)
    campaigns.act(campaign_id, "start")
    campaigns.run()
    campaign = assert_one_message_each(campaigns, campaign_id, [phone(1), phone(3)])
    assert campaign["counts"]["invalid"] == 3
    errors = campaigns.stack.call(
        campaigns.stack.event(
            "api_get_message.json", method="GET", path=f"/v1/campaigns/{campaign_id}/errors"
        )
    )
    assert errors.status == 200, errors.raw_body
    assert [e["line"] for e in errors.json["errors"]] == [2, 3, 4]
    assert all(e["error"]["code"] == "validation_error" for e in errors.json["errors"])


def test_pause_mid_file_then_resume_sends_the_rest_once(campaigns: Campaigns) -> None:
    recipients = [phone(n) for n in range(1500)]
    campaign_id = new_campaign(campaigns, [{"to": to} for to in recipients])
    # Paused as the second page's chunk is about to be written.
    fan_out = function("campaigns").root.get()
    seen: list[int] = []

    def send_then_pause(commands: Any, gate: Any) -> Any:
        seen.append(len(commands))
        if len(seen) == 12:
            assert campaigns.act(campaign_id, "pause").status == 200
        return fan_out.send(commands, gate)

    function("campaigns").root.use(replace(fan_out, send=send_then_pause))
    campaigns.act(campaign_id, "start")
    campaigns.run()
    paused = campaigns.get(campaign_id)
    assert paused["status"] == "paused"
    assert paused["pausedReason"] == "paused"
    made = len(campaigns.messages(campaign_id))
    assert 0 < made < 1500
    campaigns.run()  # nothing moves while paused
    assert len(campaigns.messages(campaign_id)) == made
    resumed = campaigns.act(campaign_id, "resume")
    assert resumed.status == 200
    assert resumed.json["campaign"]["status"] == "sending"
    campaigns.run()
    campaign = assert_one_message_each(campaigns, campaign_id, recipients)
    assert campaign["status"] == "completed"


def test_cancel_mid_file_creates_nothing_after_and_cancels_the_waiting(campaigns: Campaigns) -> None:
    recipients = [phone(n) for n in range(1500)]
    campaign_id = new_campaign(campaigns, [{"to": to} for to in recipients], sendAt=None)
    fan_out = function("campaigns").root.get()
    made_at_cancel: list[int] = []

    def send_then_cancel(commands: Any, gate: Any) -> Any:
        if not made_at_cancel and len(campaigns.messages(campaign_id)) >= 300:
            assert campaigns.act(campaign_id, "cancel").status == 200
            made_at_cancel.append(len(campaigns.messages(campaign_id)))
        return fan_out.send(commands, gate)

    function("campaigns").root.use(replace(fan_out, send=send_then_cancel))
    campaigns.act(campaign_id, "start")
    campaigns.run()
    messages = campaigns.messages(campaign_id)
    assert len(messages) == made_at_cancel[0]  # nothing created after the cancel
    assert {m["status"]["S"] for m in messages} == {"canceled"}  # each was still waiting (never dispatched)
    campaign = campaigns.get(campaign_id)
    assert campaign["status"] == "canceled"
    for verb in ("start", "pause", "resume", "cancel"):
        refused = campaigns.act(campaign_id, verb)
        assert refused.status == 409
        assert refused.json["error"]["code"] == "campaign_finished"


def test_the_quota_running_out_pauses_the_campaign(campaigns: Campaigns) -> None:
    campaigns.stack.setenv("SENDONCE_DAILY_SEND_QUOTA", "700")
    recipients = [phone(n) for n in range(1000)]
    campaign_id = new_campaign(campaigns, [{"to": to} for to in recipients])
    campaigns.act(campaign_id, "start")
    campaigns.run()
    campaign = campaigns.get(campaign_id)
    assert campaign["status"] == "paused"
    assert campaign["pausedReason"] == "quota_exceeded"
    assert len(campaigns.messages(campaign_id)) == 700
    # Resumed while the quota is still spent: paused again at once, nothing new, nothing twice.
    assert campaigns.act(campaign_id, "resume").status == 200
    campaigns.run()
    again = campaigns.get(campaign_id)
    assert again["status"] == "paused"
    assert again["pausedReason"] == "quota_exceeded"
    messages = campaigns.messages(campaign_id)
    assert len(messages) == 700
    assert len({m["to"]["S"] for m in messages}) == 700
    assert again["counts"]["accepted"] <= 700


def test_a_create_replays_under_its_idempotency_key(campaigns: Campaigns) -> None:
    body = {"name": "keyed", "channel": "sms", "body": "Hi", "recipients": [{"to": phone(1)}]}
    first = campaigns.create(body, key="cmp-1")
    again = campaigns.create(body, key="cmp-1")
    assert first.status == again.status == 201
    assert again.header("Idempotency-Replayed") == "true"
    assert again.json["campaign"]["id"] == first.json["campaign"]["id"]
    other = campaigns.create({**body, "name": "other"}, key="cmp-1")
    assert other.status == 422
    assert other.json["error"]["code"] == "idempotency_key_reused"


def test_delivery_counts_follow_the_messages_and_completion_is_an_event(campaigns: Campaigns) -> None:
    recipients = [phone(n) for n in range(30)]
    campaign_id = new_campaign(campaigns, [{"to": to} for to in recipients])
    campaigns.act(campaign_id, "start")
    campaigns.run()
    stack = campaigns.stack
    stack.tell_changes()
    stack.dispatch("sms")
    stack.tell_changes()
    stack.tell_changes()  # read again: nothing counted twice
    campaign = campaigns.get(campaign_id)
    assert campaign["counts"]["sent"] == 30
    events = stack.call(
        stack.event(
            "api_get_message.json", method="GET", path="/v1/events", query={"type": "campaign.completed"}
        )
    )
    assert events.status == 200, events.raw_body
    (event,) = [e for e in events.json["events"] if e["type"] == "campaign.completed"]
    assert event["data"]["campaign"]["id"] == campaign_id
    assert event["data"]["sequence"] is None


def test_a_campaign_from_a_template_renders_each_recipients_data(campaigns: Campaigns) -> None:
    stack = campaigns.stack
    created = stack.call(
        stack.event(
            "api_send_sms.json",
            method="POST",
            path="/v1/templates",
            body={"name": "hello", "channel": "sms", "body": "Hi {{ name }}"},
        )
    )
    assert created.status == 201, created.raw_body
    lines = [
        {"to": phone(1), "data": {"name": "Ann"}},
        {"to": phone(2), "data": {}},
        {"to": phone(3), "data": {"name": "Bo"}},
    ]
    campaign_id = new_campaign(campaigns, lines, body=None, template={"name": "hello"})
    campaigns.act(campaign_id, "start")
    campaigns.run()
    campaign = assert_one_message_each(campaigns, campaign_id, [phone(1), phone(3)])
    assert campaign["counts"]["invalid"] == 1
    bodies = {m["to"]["S"]: m["body"]["S"] for m in campaigns.messages(campaign_id)}
    assert bodies == {phone(1): "Hi Ann", phone(3): "Hi Bo"}
    errors = stack.call(
        stack.event("api_get_message.json", method="GET", path=f"/v1/campaigns/{campaign_id}/errors")
    )
    (error,) = errors.json["errors"]
    assert error["line"] == 2
    assert error["error"]["code"] == "template_data_invalid"


def test_a_campaign_with_a_send_at_is_scheduled_until_then(campaigns: Campaigns) -> None:
    send_at = (datetime.now(UTC) + timedelta(seconds=3)).isoformat().replace("+00:00", "Z")
    campaign_id = new_campaign(campaigns, [{"to": phone(1)}, {"to": phone(2)}], sendAt=send_at)
    started = campaigns.act(campaign_id, "start")
    assert started.status == 202
    assert started.json["campaign"]["status"] == "scheduled"
    campaigns.run()
    campaign = assert_one_message_each(campaigns, campaign_id, [phone(1), phone(2)])
    assert campaign["status"] == "completed"


def test_campaigns_are_listed_newest_first_and_scoped_by_workspace(campaigns: Campaigns) -> None:
    first = new_campaign(campaigns)
    second = new_campaign(campaigns)
    stack = campaigns.stack
    listed = stack.call(
        stack.event("api_get_message.json", method="GET", path="/v1/campaigns", query={"limit": "1"})
    )
    assert listed.status == 200, listed.raw_body
    assert [c["id"] for c in listed.json["campaigns"]] == [second]
    rest = stack.call(
        stack.event(
            "api_get_message.json",
            method="GET",
            path="/v1/campaigns",
            query={"limit": "1", "cursor": listed.json["nextCursor"]},
        )
    )
    assert [c["id"] for c in rest.json["campaigns"]] == [first]
    other = stack.call(
        stack.event("api_get_message.json", method="GET", path=f"/v1/campaigns/{first}", workspace="ws_other")
    )
    assert other.status == 404
    refused = stack.call(
        stack.event(
            "api_send_sms.json",
            method="POST",
            path=f"/v1/campaigns/{first}/start",
            body=None,
            workspace="ws_other",
        )
    )
    assert refused.status == 404
