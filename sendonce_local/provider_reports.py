"""What the sandbox reports about a delivery, and when: pure functions, no I/O.

Like a real provider, the sandbox repeats and reorders its reports, on a fixed cadence so that a
test can count on it. For the n-th message a provider accepted (n from 1):
- every message: a `delivered` event, DELIVERED_AFTER seconds after it was accepted;
- n % 3 == 0: that same event (same eventId, same body) again, REPEAT_AFTER seconds after (a retry);
- n % 3 == 1 (HTTP provider only): a late `sent`, LATE_SENT_AFTER seconds after, out of order.
"""

from __future__ import annotations

import json
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sendonce_local.constants import ACCOUNT_ID, REGION

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


def ses_delivery_event(message_id: str, to: str | None, source: str, accepted_at: datetime) -> dict[str, Any]:
    """An SES configuration-set `Delivery` event, as SES publishes it to SNS."""
    recipients = [address for address in (to or "").split(",") if address]
    delivered_at = accepted_at + timedelta(seconds=DELIVERED_AFTER)
    return {
        "eventType": "Delivery",
        "mail": {
            "timestamp": rfc3339(accepted_at),
            "source": source,
            "messageId": f"0100{secrets.token_hex(16)}-000000",
            "destination": recipients,
            "tags": {SES_MESSAGE_ID_TAG: [message_id]},
        },
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
    event = ses_delivery_event(message_id, to, source, accepted_at)
    envelope = sns_envelope(event, accepted_at + timedelta(seconds=DELIVERED_AFTER))
    event_id = envelope["MessageId"]
    reports = [Report(DELIVERED_AFTER, event_id, "delivered", "first", envelope)]
    if repeats(sequence):
        reports.append(Report(REPEAT_AFTER, event_id, "delivered", "repeat", envelope))
    return reports
