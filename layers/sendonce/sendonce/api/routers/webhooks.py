"""Status webhooks: endpoints (add, list, get, delete, rotate their secret) and events (list, get,
redeliver).

Each route is declared here, right above its handler, which the router registers from it. The
webhooks' use cases (`sendonce.status_webhooks.service`) are built on the first request that needs them:
a send never loads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sendonce.api import dependencies
from sendonce.api.errors import details_from_pydantic, validation_error
from sendonce.api.exchange import PageSize, answer, caller, sent_body
from sendonce.api.routes import DeclaredRouter
from sendonce.api.routes.webhooks import (
    ADD_WEBHOOK_ENDPOINT,
    DELETE_WEBHOOK_ENDPOINT,
    GET_EVENT,
    GET_WEBHOOK_ENDPOINT,
    LIST_EVENTS,
    LIST_WEBHOOK_ENDPOINTS,
    REDELIVER_EVENT,
    ROTATE_WEBHOOK_SECRET,
)
from sendonce.api.shapes import MESSAGE_ID_PATTERN, Acknowledged, CampaignModel, MessageModel, ResponseModel
from sendonce.clock import rfc3339
from sendonce.status_webhooks.rules import EventType

if TYPE_CHECKING:  # what the handlers are given; a send's cold start never loads the model
    from sendonce.status_webhooks.model import Delivery, Endpoint, Event

router = DeclaredRouter()

EVENT_CURSOR_PATTERN = r"^evt_[0-9A-HJKMNP-TV-Z]{26}$"  # nextCursor: the last event id of a page


class AddWebhookEndpointRequest(BaseModel):
    """POST /v1/webhook-endpoints."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    url: str = Field(
        min_length=1, max_length=2048, description="https:// (http:// only where private targets are allowed)"
    )
    eventTypes: list[EventType] | None = Field(
        default=None, min_length=1, max_length=len(EventType), description="Omitted: every type"
    )
    description: str | None = Field(default=None, max_length=500)

    @field_validator("eventTypes", mode="before")
    @classmethod
    def _known_types(cls, value: Any) -> Any:
        # strict mode takes enum members only: a known type's name is as good as its member.
        if isinstance(value, list):
            known = {t.value: t for t in EventType}
            unknown = [v for v in value if not isinstance(v, str) or v not in known]
            if unknown:
                raise ValueError(f"unknown event types: {', '.join(map(str, unknown))}")
            return [known[v] for v in value]
        return value


class RedeliverRequest(BaseModel):
    """POST /v1/events/{id}/redeliver: one endpoint, or every endpoint the event had."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    endpointId: str | None = Field(default=None, min_length=1, max_length=64)


class WebhookEndpointModel(ResponseModel):
    id: str
    url: str
    eventTypes: list[EventType] | None
    description: str | None
    createdAt: str
    secret: str | None = Field(
        default=None,
        description="Only when the endpoint is added and when its secret is rotated",
        exclude_if=lambda secret: secret is None,
    )

    @classmethod
    def of(cls, endpoint: Endpoint, *, with_secret: bool = False) -> WebhookEndpointModel:
        return cls(
            id=endpoint.id,
            url=endpoint.url,
            eventTypes=list(endpoint.event_types) if endpoint.event_types is not None else None,
            description=endpoint.description,
            createdAt=rfc3339(endpoint.created_at),
            secret=endpoint.secrets[0].value if with_secret else None,
        )


class WebhookEndpointEnvelope(ResponseModel):
    success: Literal[True]
    endpoint: WebhookEndpointModel


class WebhookEndpointList(ResponseModel):
    success: Literal[True]
    endpoints: list[WebhookEndpointModel]


class EventData(ResponseModel):
    message: MessageModel | None = Field(
        default=None, exclude_if=lambda value: value is None, description="A message's event: the message"
    )
    campaign: CampaignModel | None = Field(
        default=None, exclude_if=lambda value: value is None, description="campaign.completed: the campaign"
    )
    sequence: int | None
    heldFor: Literal["quiet_hours"] | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="message.scheduled only: why the service moved the message's sendAt",
    )


class EventDelivery(ResponseModel):
    endpointId: str
    status: Literal["pending", "succeeded", "failed"]
    attempts: int
    lastAttemptAt: str | None
    lastResponseStatus: int | None

    @classmethod
    def of(cls, delivery: Delivery) -> EventDelivery:
        return cls(
            endpointId=delivery.endpoint_id,
            status=delivery.status.value,
            attempts=delivery.attempts,
            lastAttemptAt=rfc3339(delivery.last_attempt_at) if delivery.last_attempt_at is not None else None,
            lastResponseStatus=delivery.last_response_status,
        )


class EventModel(ResponseModel):
    id: str
    type: EventType
    timestamp: str
    data: EventData
    deliveries: list[EventDelivery]

    @classmethod
    def of(cls, event: Event) -> EventModel:
        """The event as its payload was sent (its message as the API showed it then), with its id and
        its deliveries."""
        return cls(
            id=event.id,
            type=event.type,
            timestamp=rfc3339(event.timestamp),
            data=_data(event),
            deliveries=[EventDelivery.of(delivery) for delivery in event.deliveries],
        )


def _data(event: Event) -> EventData:
    if event.type is EventType.CAMPAIGN_COMPLETED:
        return EventData(campaign=CampaignModel.model_validate(event.message), sequence=event.sequence)
    payload = event.payload()["data"]
    return EventData(
        message=MessageModel.model_validate(event.message),
        sequence=event.sequence,
        heldFor=payload.get("heldFor"),
    )


class EventEnvelope(ResponseModel):
    success: Literal[True]
    event: EventModel


class EventPageModel(ResponseModel):
    success: Literal[True]
    events: list[EventModel]
    nextCursor: str | None


# ---------------------------------------------------------------------------- endpoints


@router.handles(ADD_WEBHOOK_ENDPOINT)
def add_webhook_endpoint(request: Annotated[AddWebhookEndpointRequest, Body(embed=False)]) -> Response[Any]:
    endpoint = dependencies.root.get().webhooks.add_endpoint(
        caller(router.context), request.url, request.eventTypes, request.description
    )
    return answer(
        201,
        WebhookEndpointEnvelope(success=True, endpoint=WebhookEndpointModel.of(endpoint, with_secret=True)),
    )


@router.handles(LIST_WEBHOOK_ENDPOINTS)
def list_webhook_endpoints() -> Response[Any]:
    endpoints = dependencies.root.get().webhooks.list_endpoints(caller(router.context))
    shown = [WebhookEndpointModel.of(endpoint) for endpoint in endpoints]
    return answer(200, WebhookEndpointList(success=True, endpoints=shown))


@router.handles(GET_WEBHOOK_ENDPOINT)
def get_webhook_endpoint(id: str) -> Response[Any]:
    endpoint = dependencies.root.get().webhooks.endpoint(caller(router.context), id)
    return answer(200, WebhookEndpointEnvelope(success=True, endpoint=WebhookEndpointModel.of(endpoint)))


@router.handles(DELETE_WEBHOOK_ENDPOINT)
def delete_webhook_endpoint(id: str) -> Response[Any]:
    dependencies.root.get().webhooks.delete_endpoint(caller(router.context), id)
    return answer(200, Acknowledged(success=True))


@router.handles(ROTATE_WEBHOOK_SECRET)
def rotate_webhook_secret(id: str) -> Response[Any]:
    endpoint = dependencies.root.get().webhooks.rotate_secret(caller(router.context), id)
    return answer(
        200,
        WebhookEndpointEnvelope(success=True, endpoint=WebhookEndpointModel.of(endpoint, with_secret=True)),
    )


# ---------------------------------------------------------------------------- events


@router.handles(LIST_EVENTS)
def list_events(
    messageId: Annotated[
        str | None, Query(pattern=MESSAGE_ID_PATTERN, description="Only this message's events")
    ] = None,
    type: Annotated[EventType | None, Query(description="Only events of this type")] = None,
    limit: PageSize = 20,
    cursor: Annotated[
        str | None, Query(pattern=EVENT_CURSOR_PATTERN, description="nextCursor of the page before")
    ] = None,
) -> Response[Any]:
    page = dependencies.root.get().webhooks.list_events(
        caller(router.context), messageId, type, limit, cursor
    )
    shown = [EventModel.of(event) for event in page.events]
    return answer(200, EventPageModel(success=True, events=shown, nextCursor=page.next_cursor))


@router.handles(GET_EVENT)
def get_event(id: str) -> Response[Any]:
    event = dependencies.root.get().webhooks.event(caller(router.context), id)
    return answer(200, EventEnvelope(success=True, event=EventModel.of(event)))


@router.handles(REDELIVER_EVENT)
def redeliver_event(id: str) -> Response[Any]:
    body = sent_body(router.context)  # optional: none at all asks for every endpoint
    try:
        request = RedeliverRequest.model_validate(body.json()) if body is not None else RedeliverRequest()
    except ValidationError as error:
        raise validation_error(details_from_pydantic(list(error.errors()))) from None
    dependencies.root.get().webhooks.redeliver(caller(router.context), id, request.endpointId)
    return answer(202, Acknowledged(success=True))
