"""What the sandbox reports about a delivery, and when: pure functions, no I/O.

Like a real provider, the sandbox repeats and reorders its reports, on a fixed cadence so that a
test can count on it. For the n-th message a provider accepted (n from 1):
- every message: a `delivered` event, DELIVERED_AFTER seconds after it was accepted;
- n % 3 == 0: that same event (same eventId, same body) again, REPEAT_AFTER seconds after (a retry);
- n % 3 == 1 (HTTP provider only): a late `sent`, LATE_SENT_AFTER seconds after, out of order.

SES follows its mailbox simulator: mail to `bounce@simulator.amazonses.com` is a permanent
`Bounce` instead of a delivery, to `complaint@…` a delivery and then a `Complaint`, to
`success@…` (and anyone else) a delivery. An opt-out (`opted_out`, a STOP reply) is reported by
the HTTP provider when the sandbox receives one (`opt_out_report`).

Twilio posts its status callbacks (form parameters, `twilio_reports`): `sent` then `delivered`, on
the same cadence (n % 3 == 0: `delivered` twice; n % 3 == 1: `sent` late, after `delivered`).
"""

from __future__ import annotations

import json
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sendonce_local.constants import ACCOUNT_ID, REGION

SENT_AFTER = 0.1
DELIVERED_AFTER = 0.3
REPEAT_AFTER = 0.7
LATE_SENT_AFTER = 1.0
REPEAT_EVERY = 3
SES_MESSAGE_ID_TAG = "sendonce-message-id"
EMAIL_EVENTS_TOPIC = "EmailEventsTopic"


@dataclass(frozen=True)
class Report:
    """One post of an event: `kind` says why it is sent (first, repeat, late)."""

    delay_seconds: float
    event_id: str
    type: str
    kind: str
    body: dict[str, Any]


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def repeats(sequence: int) -> bool:
    return sequence % REPEAT_EVERY == 0


def sends_late_sent(sequence: int) -> bool:
    return sequence % REPEAT_EVERY == 1


def http_reports(message_id: str, sequence: int, accepted_at: datetime) -> list[Report]:
    """The webhook bodies the HTTP provider posts for one accepted message, in posting order."""
    delivered = {
        "eventId": "evt_" + secrets.token_hex(10),
        "messageId": message_id,
        "type": "delivered",
        "occurredAt": rfc3339(accepted_at + timedelta(seconds=DELIVERED_AFTER)),
    }
    reports = [Report(DELIVERED_AFTER, delivered["eventId"], "delivered", "first", delivered)]
    if repeats(sequence):
        reports.append(Report(REPEAT_AFTER, delivered["eventId"], "delivered", "repeat", delivered))
    if sends_late_sent(sequence):
        sent = {
            "eventId": "evt_" + secrets.token_hex(10),
            "messageId": message_id,
            "type": "sent",
            "occurredAt": rfc3339(accepted_at),
        }
        reports.append(Report(LATE_SENT_AFTER, sent["eventId"], "sent", "late", sent))
    return reports


SIMULATOR_DOMAIN = "simulator.amazonses.com"
BOUNCE_ADDRESS = f"bounce@{SIMULATOR_DOMAIN}"
COMPLAINT_ADDRESS = f"complaint@{SIMULATOR_DOMAIN}"
COMPLAINT_AFTER = 0.5


def opt_out_report(to: str, received_at: datetime) -> Report:
    """The HTTP provider's `opted_out` webhook for a STOP received from `to`: it names no message, as
    a reply to the shared sending number answers none in particular."""
    body = {
        "eventId": "evt_" + secrets.token_hex(10),
        "type": "opted_out",
        "to": to,
        "occurredAt": rfc3339(received_at),
    }
    return Report(0.0, body["eventId"], "opted_out", "inbound", body)


def _ses_mail(message_id: str, recipients: list[str], source: str, accepted_at: datetime) -> dict[str, Any]:
    return {
        "timestamp": rfc3339(accepted_at),
        "source": source,
        "messageId": f"0100{secrets.token_hex(16)}-000000",
        "destination": recipients,
        "tags": {SES_MESSAGE_ID_TAG: [message_id]},
    }


def ses_bounce_event(message_id: str, to: str | None, source: str, accepted_at: datetime) -> dict[str, Any]:
    """A permanent `Bounce`, as SES reports mail to its simulator's bounce address."""
    recipients = [address for address in (to or "").split(",") if address]
    return {
        "eventType": "Bounce",
        "mail": _ses_mail(message_id, recipients, source, accepted_at),
        "bounce": {
            "bounceType": "Permanent",
            "bounceSubType": "General",
            "bouncedRecipients": [
                {"emailAddress": address, "action": "failed", "status": "5.1.1"} for address in recipients
            ],
            "timestamp": rfc3339(accepted_at + timedelta(seconds=DELIVERED_AFTER)),
            "feedbackId": f"0100{secrets.token_hex(16)}-000000",
        },
    }


def ses_complaint_event(
    message_id: str, to: str | None, source: str, accepted_at: datetime
) -> dict[str, Any]:
    """A `Complaint`, as SES reports mail to its simulator's complaint address after delivering it."""
    recipients = [address for address in (to or "").split(",") if address]
    return {
        "eventType": "Complaint",
        "mail": _ses_mail(message_id, recipients, source, accepted_at),
        "complaint": {
            "complainedRecipients": [{"emailAddress": address} for address in recipients],
            "timestamp": rfc3339(accepted_at + timedelta(seconds=COMPLAINT_AFTER)),
            "feedbackId": f"0100{secrets.token_hex(16)}-000000",
            "complaintFeedbackType": "abuse",
        },
    }


def ses_delivery_event(message_id: str, to: str | None, source: str, accepted_at: datetime) -> dict[str, Any]:
    """An SES configuration-set `Delivery` event, as SES publishes it to SNS."""
    recipients = [address for address in (to or "").split(",") if address]
    delivered_at = accepted_at + timedelta(seconds=DELIVERED_AFTER)
    return {
        "eventType": "Delivery",
        "mail": _ses_mail(message_id, recipients, source, accepted_at),
        "delivery": {
            "timestamp": rfc3339(delivered_at),
            "processingTimeMillis": int(DELIVERED_AFTER * 1000),
            "recipients": recipients,
            "smtpResponse": "250 2.6.0 Message received",
            "reportingMTA": "a8-1.smtp-out.amazonses.com",
        },
    }


def sns_envelope(message: dict[str, Any], published_at: datetime) -> dict[str, Any]:
    """The body SQS receives from an SNS subscription without raw message delivery."""
    topic_arn = f"arn:aws:sns:{REGION}:{ACCOUNT_ID}:{EMAIL_EVENTS_TOPIC}"
    return {
        "Type": "Notification",
        "MessageId": str(uuid.uuid4()),
        "TopicArn": topic_arn,
        "Message": json.dumps(message, separators=(",", ":")),
        "Timestamp": rfc3339(published_at),
        "SignatureVersion": "1",
        "Signature": "local-sandbox-unsigned",
        "SigningCertURL": "https://sns.local/SimpleNotificationService.pem",
        "UnsubscribeURL": f"https://sns.local/?Action=Unsubscribe&SubscriptionArn={topic_arn}:local",
    }


def ses_reports(
    message_id: str, to: str | None, source: str, sequence: int, accepted_at: datetime
) -> list[Report]:
    """The SNS notifications SES (through SNS, at least once) leaves on the events queue."""
    simulated = (to or "").lower()
    if simulated == BOUNCE_ADDRESS:
        event, kind = ses_bounce_event(message_id, to, source, accepted_at), "bounced"
    else:
        event, kind = ses_delivery_event(message_id, to, source, accepted_at), "delivered"
    envelope = sns_envelope(event, accepted_at + timedelta(seconds=DELIVERED_AFTER))
    event_id = envelope["MessageId"]
    reports = [Report(DELIVERED_AFTER, event_id, kind, "first", envelope)]
    if repeats(sequence):
        reports.append(Report(REPEAT_AFTER, event_id, kind, "repeat", envelope))
    if simulated == COMPLAINT_ADDRESS:
        complaint = sns_envelope(
            ses_complaint_event(message_id, to, source, accepted_at),
            accepted_at + timedelta(seconds=COMPLAINT_AFTER),
        )
        reports.append(Report(COMPLAINT_AFTER, complaint["MessageId"], "complained", "first", complaint))
    return reports


def twilio_reports(*, sid: str, account_sid: str, to: str, sender: str | None, sequence: int) -> list[Report]:
    """The status callbacks Twilio posts for one accepted message, in posting order: each body is
    the form Twilio posts (`MessageStatus` and its older twin `SmsStatus`)."""

    def callback(status: str, delay: float, kind: str) -> Report:
        form = {
            "AccountSid": account_sid,
            "ApiVersion": "2010-04-01",
            "From": sender or "",
            "MessageSid": sid,
            "MessageStatus": status,
            "SmsSid": sid,
            "SmsStatus": status,
            "To": to,
        }
        return Report(delay, f"{sid}:{status}", status, kind, form)

    late = sends_late_sent(sequence)
    reports = [] if late else [callback("sent", SENT_AFTER, "first")]
    reports.append(callback("delivered", DELIVERED_AFTER, "first"))
    if repeats(sequence):
        reports.append(callback("delivered", REPEAT_AFTER, "repeat"))
    if late:
        reports.append(callback("sent", LATE_SENT_AFTER, "late"))
    return reports
