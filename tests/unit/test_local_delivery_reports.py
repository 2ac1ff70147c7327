"""sendonce_local: the sandbox reports deliveries like a real provider (signed, repeated, reordered)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from sendonce.entrypoints.status import provider_event
from sendonce.provider_events.http_body import HttpProviderEvent
from sendonce.provider_events.model import ProviderEventType
from sendonce.provider_events.signature import verify
from sendonce.suppressions.model import Reason

from sendonce_local.delayed_tasks import DelayedTasks
from sendonce_local.deliveries import DeliveryLog
from sendonce_local.delivery_reporter import DeliveryReporter, ReportLog, post_webhook, reporting_enabled
from sendonce_local.provider_reports import http_reports, opt_out_report, ses_reports

ACCEPTED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("sequence", "kinds"),
    [(1, ["first", "late"]), (2, ["first"]), (3, ["first", "repeat"]), (4, ["first", "late"])],
)
def test_the_cadence_of_http_reports(sequence: int, kinds: list[str]) -> None:
    reports = http_reports("msg_1", sequence, ACCEPTED)

    assert [report.kind for report in reports] == kinds
    assert [report.delay_seconds for report in reports] == sorted(r.delay_seconds for r in reports)
    first = reports[0]
    assert first.type == "delivered"
    event = HttpProviderEvent.model_validate_json(json.dumps(first.body)).to_event("http")
    assert (event.message_id, event.type) == ("msg_1", ProviderEventType.DELIVERED)
    if "repeat" in kinds:
        assert reports[1].body == first.body  # the same event, same eventId
    if "late" in kinds:
        late = reports[1]
        assert late.type == "sent"
        assert late.event_id != first.event_id
        assert late.body["occurredAt"] < first.body["occurredAt"]


def test_an_ses_report_is_what_sns_leaves_on_the_events_queue() -> None:
    reports = ses_reports("msg_9", "a@example.com", "no-reply@x", 3, ACCEPTED)

    assert [report.kind for report in reports] == ["first", "repeat"]
    event = provider_event(json.dumps(reports[0].body))
    assert event is not None
    assert (event.provider, event.message_id, event.type) == ("ses", "msg_9", ProviderEventType.DELIVERED)
    again = provider_event(json.dumps(reports[1].body))
    assert again is not None
    assert again.event_id == event.event_id  # a repeat is recognisably the same event


@pytest.mark.parametrize(
    ("value", "enabled"), [(None, True), ("", True), ("true", True), ("false", False), ("0", False)]
)
def test_the_switch(value: str | None, enabled: bool) -> None:
    assert reporting_enabled(value) is enabled


def _reporter(answers: list[int]) -> tuple[DeliveryReporter, DelayedTasks, FakeClock, list[Any], ReportLog]:
    clock = FakeClock()
    tasks = DelayedTasks("test", clock=clock)
    posted: list[Any] = []

    def post(url: str, secret: str, body: dict[str, Any]) -> int:
        posted.append((url, secret, body))
        return answers.pop(0) if answers else 200

    journal = ReportLog()
    reporter = DeliveryReporter(
        tasks,
        journal,
        webhook_url="http://api/v1/webhooks/http",
        webhook_secret=lambda: "s3cret",
        send_to_events_queue=posted.append,
        email_source="no-reply@x",
        post=post,
    )
    return reporter, tasks, clock, posted, journal


def test_deliveries_are_reported_when_due_and_sms_is_not() -> None:
    reporter, tasks, clock, posted, journal = _reporter([])
    log = DeliveryLog()
    log.add_listener(reporter)

    log.record(message_id="msg_a", channel="imessage", to="+1", subject=None, body="b", provider="http")
    log.record(message_id="msg_b", channel="sms", to="+1", subject=None, body="b", provider="sns")
    log.record(message_id="msg_c", channel="email", to="a@x", subject="s", body="b", provider="ses")

    assert tasks.run_due() == 0
    clock.now = 10.0
    tasks.run_due()

    webhooks = [entry for entry in posted if isinstance(entry, tuple)]
    assert [(body["messageId"], body["type"]) for _, _, body in webhooks] == [
        ("msg_a", "delivered"),
        ("msg_a", "sent"),
    ]
    assert all(secret == "s3cret" for _, secret, _ in webhooks)
    queued = [json.loads(entry) for entry in posted if isinstance(entry, str)]
    assert [entry["Type"] for entry in queued] == ["Notification"]
    assert {entry["messageId"] for entry in journal.all()} == {"msg_a", "msg_c"}


def test_a_webhook_the_api_could_not_take_is_retried() -> None:
    reporter, tasks, clock, _posted, journal = _reporter([503])
    reporter({"provider": "http", "messageId": "msg_x"})
    reporter({"provider": "http", "messageId": "msg_y"})  # the second: delivered only

    for step in range(1, 40):
        clock.now = step * 0.5
        tasks.run_due()

    answers = [(entry["messageId"], entry["kind"], entry["answer"]) for entry in journal.all()]
    assert ("msg_x", "first", 503) in answers
    assert answers.count(("msg_x", "first", 200)) == 1
    assert tasks.pending() == 0


def test_post_webhook_signs_the_exact_body(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    class Answer:
        status = 200

        def __enter__(self) -> Answer:
            return self

        def __exit__(self, *args: object) -> None:
            return None

    def urlopen(request: Any, timeout: float) -> Answer:
        seen["body"], seen["signature"] = request.data, request.get_header("X-sendonce-signature")
        return Answer()

    monkeypatch.setattr("urllib.request.urlopen", urlopen)

    assert post_webhook("http://api/x", "s3cret", {"eventId": "e", "messageId": "m"}) == 200
    timestamp = int(seen["signature"].split(",")[0].removeprefix("t="))
    verify(seen["signature"], seen["body"], "s3cret", now=timestamp)


# ---------------------------------------------------------------------------- suppression sources
def _events_of(reports: list[Any]) -> list[tuple[str, Any]]:
    """Each report as the status function reads it: (kind, the provider event)."""
    return [(report.kind, provider_event(json.dumps(report.body))) for report in reports]


def test_the_ses_mailbox_simulators_bounce_address_is_a_permanent_bounce_that_suppresses() -> None:
    [(kind, event)] = _events_of(
        ses_reports("msg_b", "bounce@simulator.amazonses.com", "no-reply@x", 1, ACCEPTED)
    )

    assert kind == "first"
    assert event.type is ProviderEventType.FAILED
    assert event.suppression_reason is Reason.BOUNCED
    assert event.error is not None
    assert event.error.code == "bounced"


def test_the_ses_mailbox_simulators_complaint_address_is_delivered_then_a_complaint() -> None:
    events = [
        event
        for _, event in _events_of(
            ses_reports("msg_c", "complaint@simulator.amazonses.com", "f@x", 1, ACCEPTED)
        )
    ]

    assert [(event.type, event.suppression_reason) for event in events] == [
        (ProviderEventType.DELIVERED, None),
        (ProviderEventType.DELIVERED, Reason.COMPLAINED),
    ]
    assert events[0].event_id != events[1].event_id  # two events, each applied once


def test_the_ses_mailbox_simulators_success_address_is_delivered() -> None:
    [(_, event)] = _events_of(ses_reports("msg_s", "success@simulator.amazonses.com", "f@x", 1, ACCEPTED))

    assert (event.type, event.suppression_reason) == (ProviderEventType.DELIVERED, None)


def test_an_opt_out_report_is_the_http_providers_opted_out_webhook_naming_no_message() -> None:
    report = opt_out_report("+15550100000", ACCEPTED)

    event = HttpProviderEvent.model_validate(report.body).to_event("http")

    assert (event.type, event.to, event.message_id) == (ProviderEventType.OPTED_OUT, "+15550100000", None)
