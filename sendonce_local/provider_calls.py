"""Reads the SES v2 `SendEmail` and SNS `Publish` requests the dispatchers make into delivery records."""

from __future__ import annotations

import base64
import binascii
import email
import email.policy
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

SES_MESSAGE_ID_TAG = "sendonce-message-id"
SNS_MESSAGE_ID_ATTRIBUTE = "sendonce.message_id"
SES_SEND_EMAIL_PATH = "/v2/email/outbound-emails"


@dataclass(frozen=True)
class ProviderCall:
    message_id: str | None
    channel: str
    to: str | list[str] | None
    subject: str | None
    body: str | None
    provider: str
    email: dict[str, Any] | None = None  # cc, bcc, replyTo, html: those the call carried


def _email_fields(destination: dict[str, Any], reply_to: list[str], html: str | None) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if destination.get("CcAddresses"):
        fields["cc"] = list(destination["CcAddresses"])
    if destination.get("BccAddresses"):
        fields["bcc"] = list(destination["BccAddresses"])
    if reply_to:
        fields["replyTo"] = reply_to[0] if len(reply_to) == 1 else list(reply_to)
    if html is not None:
        fields["html"] = html
    return fields


def ses_send_email(body: bytes) -> ProviderCall:
    """An SES v2 SendEmail request (REST-JSON)."""
    request: dict[str, Any] = json.loads(body or b"{}")
    tags = {tag.get("Name"): tag.get("Value") for tag in request.get("EmailTags") or []}
    destination = request.get("Destination") or {}
    addresses = list(destination.get("ToAddresses") or [])
    # One address as a string (as every entry before lists), several as the list sent.
    to: str | list[str] | None = (addresses[0] if len(addresses) == 1 else addresses) or None
    content = request.get("Content") or {}
    simple = content.get("Simple") or {}
    subject, text = _simple_content(simple)
    html = ((simple.get("Body") or {}).get("Html") or {}).get("Data")
    if "Raw" in content:
        subject, text = _raw_content(content["Raw"].get("Data", ""))
    email = _email_fields(destination, list(request.get("ReplyToAddresses") or []), html)
    return ProviderCall(tags.get(SES_MESSAGE_ID_TAG), "email", to, subject, text, "ses", email or None)


def _simple_content(simple: dict[str, Any]) -> tuple[str | None, str | None]:
    subject = (simple.get("Subject") or {}).get("Data")
    body = simple.get("Body") or {}
    text = (body.get("Text") or {}).get("Data") or (body.get("Html") or {}).get("Data")
    return subject, text


def _raw_content(data: str) -> tuple[str | None, str | None]:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raw = data.encode("utf-8")
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    part = parsed.get_body(preferencelist=("plain", "html"))
    text = part.get_content() if part is not None else None
    return parsed.get("Subject"), text


def sns_publish(body: bytes, content_type: str) -> ProviderCall | None:
    """An SNS Publish request (query protocol, or JSON); None unless it targets a phone number."""
    if "json" in content_type:
        request: dict[str, Any] = json.loads(body or b"{}")
        attributes = {
            name: (value or {}).get("StringValue")
            for name, value in (request.get("MessageAttributes") or {}).items()
        }
        phone, message, subject = request.get("PhoneNumber"), request.get("Message"), request.get("Subject")
    else:
        fields = {
            key: values[0] for key, values in parse_qs(body.decode("utf-8"), keep_blank_values=True).items()
        }
        if fields.get("Action") != "Publish":
            return None
        attributes = _query_message_attributes(fields)
        phone, message, subject = fields.get("PhoneNumber"), fields.get("Message"), fields.get("Subject")
    if not phone:
        return None
    return ProviderCall(attributes.get(SNS_MESSAGE_ID_ATTRIBUTE), "sms", phone, subject, message, "sns")


def _query_message_attributes(fields: dict[str, str]) -> dict[str, str | None]:
    """`MessageAttributes.entry.N.Name` / `.Value.StringValue` pairs of a query-protocol request."""
    attributes: dict[str, str | None] = {}
    prefix = "MessageAttributes.entry."
    for key, value in fields.items():
        if key.startswith(prefix) and key.endswith(".Name"):
            index = key[len(prefix) : -len(".Name")]
            attributes[value] = fields.get(f"{prefix}{index}.Value.StringValue")
    return attributes
