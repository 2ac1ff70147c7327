"""The response models, built from domain values, write what the domain's `to_api()` dicts wrote.

For any domain value: the same fields, values, nulls and key order, to the byte.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel
from sendonce.api.routers.usage import SimulatedDeliveryModel
from sendonce.api.routers.webhooks import EventDelivery, EventModel, WebhookEndpointModel
from sendonce.api.shapes import MessageModel, SuppressionModel, to_json
from sendonce.messages.model import Channel, Message, MessageError, Status
from sendonce.simulator.ports import SimulatedDelivery
from sendonce.suppressions.model import Reason, Suppression
from sendonce.webhooks.model import Delivery, DeliveryStatus, Endpoint, Event, EventType, SigningSecret

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
moments = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))
maybe = st.one_of

messages = st.builds(
    Message,
    id=text,
    workspace_id=text,
    channel=st.sampled_from(["sms", "imessage", "email"]).map(Channel),
    to=text,
    body=text,
    status=st.sampled_from(Status),
    created_at=moments,
    updated_at=moments,
    subject=maybe(st.none(), text),
    send_at=maybe(st.none(), moments),
    metadata=st.dictionaries(text, text, max_size=3),
    idempotency_key=maybe(st.none(), text),
    attempts=st.integers(0, 50),
    error=maybe(st.none(), st.builds(MessageError, text, text)),
)
endpoints = st.builds(
    Endpoint,
    id=text,
    workspace_id=text,
    url=text,
    event_types=maybe(st.none(), st.lists(st.sampled_from(EventType), min_size=1, unique=True).map(tuple)),
    description=maybe(st.none(), text),
    created_at=moments,
    secrets=st.lists(st.builds(SigningSecret, text, maybe(st.none(), moments)), min_size=1, max_size=3).map(
        tuple
    ),
)
deliveries = st.builds(
    Delivery,
    endpoint_id=text,
    status=st.sampled_from(DeliveryStatus),
    attempts=st.integers(0, 30),
    last_attempt_at=maybe(st.none(), moments),
    last_response_status=maybe(st.none(), st.integers(100, 599)),
)
suppressions = st.builds(
    Suppression,
    to=text,
    reason=st.sampled_from(Reason),
    created_at=moments,
    message_id=maybe(st.none(), text),
)
simulated = st.builds(
    SimulatedDelivery,
    workspace_id=text,
    message_id=text,
    channel=st.sampled_from(["sms", "imessage", "email"]),
    to=text,
    subject=maybe(st.none(), text),
    body=text,
    at=moments,
    provider_id=text,
    idempotency_key=text,
)


def _same(model: BaseModel, shown: dict[str, Any]) -> None:
    assert model.model_dump(mode="json") == shown
    assert to_json(model) == json.dumps(shown, ensure_ascii=False)  # key order and bytes
    assert to_json(model, compact=True) == json.dumps(shown, ensure_ascii=False, separators=(",", ":"))


@given(messages)
def test_a_message(message: Message) -> None:
    _same(MessageModel.of(message), message.to_api())


@given(endpoints, st.booleans())
def test_an_endpoint_with_and_without_its_secret(endpoint: Endpoint, with_secret: bool) -> None:
    _same(
        WebhookEndpointModel.of(endpoint, with_secret=with_secret), endpoint.to_api(with_secret=with_secret)
    )


@given(deliveries)
def test_a_delivery(delivery: Delivery) -> None:
    _same(EventDelivery.of(delivery), delivery.to_api())


@given(
    messages, st.sampled_from(EventType), moments, maybe(st.none(), st.integers(1, 9)), st.lists(deliveries)
)
def test_an_event(
    message: Message, kind: EventType, at: datetime, sequence: int | None, delivered: list[Delivery]
) -> None:
    event = Event("evt_1", "ws", message.id, kind, at, message.to_api(), sequence, tuple(delivered))

    _same(EventModel.of(event), event.to_api())


@given(suppressions)
def test_a_suppression(entry: Suppression) -> None:
    _same(SuppressionModel.of(entry), entry.to_api())


@given(simulated)
def test_a_simulated_delivery(delivery: SimulatedDelivery) -> None:
    _same(SimulatedDeliveryModel.of(delivery), delivery.to_api())
