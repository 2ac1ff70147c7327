"""Campaigns: create (inline recipients or an upload), start, pause, resume, cancel, list, get, and
the lines counted invalid.

Each route is declared in `sendonce.api.routes.campaigns`; its handler is here, with its models. The
use cases are the campaigns service's (`sendonce.campaigns.service`), which the API's root builds
with the first request for one of these routes. A create under an Idempotency-Key runs once: a retry
replays its 201 (and the same upload URL), another body is 422, one in flight 409.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Header
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sendonce.api import dependencies
from sendonce.api.campaign_lines import line_body
from sendonce.api.commands import SendMessageRequest, TemplateChoice
from sendonce.api.errors import (
    details_from_pydantic,
    unavailable,
    validation_error,
)
from sendonce.api.exchange import OpaqueCursor, PageSize, answer, caller, json_body, stored
from sendonce.api.idempotency import StoredAnswer, answered_once, key_of
from sendonce.api.routes import DeclaredRouter
from sendonce.api.routes.campaigns import (
    CANCEL_CAMPAIGN,
    CREATE_CAMPAIGN,
    GET_CAMPAIGN,
    LIST_CAMPAIGN_ERRORS,
    LIST_CAMPAIGNS,
    PAUSE_CAMPAIGN,
    RESUME_CAMPAIGN,
    START_CAMPAIGN,
)
from sendonce.api.shapes import (
    CampaignModel,
    ResponseModel,
    channel_names,
    parse_rfc3339,
    registered_channel,
    to_json,
)
from sendonce.campaigns.fanout import LineRefused
from sendonce.campaigns.model import MAX_INLINE_RECIPIENTS, MAX_NAME_CHARACTERS, Campaign
from sendonce.campaigns.ports import Upload
from sendonce.campaigns.service import CampaignService, default_rate
from sendonce.clock import rfc3339
from sendonce.limits.model import MAX_RATE_PER_SECOND

router = DeclaredRouter()

# Stable forever: a campaign create's Idempotency-Key records, apart from a send's and a batch's.
CAMPAIGN_KEY_PREFIX = "sendonce.v1.campaigns.create"

# The content fields of a send a campaign takes (each recipient adds `to`, `data` and `metadata`).
CONTENT_FIELDS = ("template", "body", "subject", "html", "replyTo", "cc", "bcc", "sendAt", "smartEncoding")
# A probe recipient per channel, so the shared content is checked once at create.
_PROBES = ("+14155550100", "probe@example.com")


class CreateCampaignRequest(BaseModel):
    """POST /v1/campaigns. Unknown fields are rejected; the content fields are a send's."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    name: str = Field(min_length=1, max_length=MAX_NAME_CHARACTERS)
    channel: str = Field(json_schema_extra=channel_names)
    template: TemplateChoice | None = Field(default=None, description="Send this template's render to each")
    body: str | None = None
    subject: str | None = None
    html: str | None = None
    replyTo: str | None = None
    cc: list[str] | None = None
    bcc: list[str] | None = None
    smartEncoding: bool | None = None
    sendAt: str | None = Field(default=None, description="RFC 3339; the campaign starts sending then")
    ratePerSecond: int | None = Field(
        default=None,
        ge=1,
        le=MAX_RATE_PER_SECOND,
        description="New messages a second at most; default half the workspace's request rate",
    )
    # Any value an item: one that is not a recipient is counted invalid at its position, as a line is.
    recipients: list[Any] | None = Field(
        default=None,
        max_length=MAX_INLINE_RECIPIENTS,
        description=f"At most {MAX_INLINE_RECIPIENTS:,} {{to, data?, metadata?}}; else, upload a file",
    )

    @field_validator("channel")
    @classmethod
    def _registered(cls, value: str) -> str:
        return registered_channel(value)

    def content(self) -> dict[str, Any]:
        dumped = self.model_dump(exclude_none=True)
        return {name: dumped[name] for name in CONTENT_FIELDS if name in dumped}


class UploadModel(ResponseModel):
    url: str = Field(description="PUT the JSON Lines file here (no particular Content-Type needed)")
    expiresAt: str


class CampaignCreated(ResponseModel):
    success: Literal[True]
    campaign: CampaignModel
    upload: UploadModel | None = Field(default=None, description="Present when no recipients were given")


class CampaignEnvelope(ResponseModel):
    success: Literal[True]
    campaign: CampaignModel


class CampaignPageModel(ResponseModel):
    success: Literal[True]
    campaigns: list[CampaignModel]
    nextCursor: str | None


class LineErrorDetail(ResponseModel):
    code: str
    message: str
    details: Any = None


class LineErrorModel(ResponseModel):
    line: int = Field(description="1-based")
    error: LineErrorDetail


class CampaignErrorPage(ResponseModel):
    success: Literal[True]
    errors: list[LineErrorModel]
    nextCursor: str | None


def _campaigns() -> CampaignService:
    service = dependencies.root.get().campaigns
    if service is None:
        raise unavailable("Campaigns are not configured.")
    return service


def _one(status: int, campaign: Campaign) -> Response[Any]:
    return answer(status, CampaignEnvelope(success=True, campaign=CampaignModel.of(campaign)))


def _check_content(request: CreateCampaignRequest) -> None:
    """The shared content checked once, as a send of it to a probe recipient would be."""
    content = request.content()
    last: list[dict[str, str]] = []
    for probe in _PROBES:
        try:
            SendMessageRequest.model_validate(line_body(content, request.channel, {"to": probe}))
            return
        except ValidationError as error:
            last = [d for d in details_from_pydantic(error.errors()) if not d["field"].startswith("to")]
            if not last:
                continue
            raise validation_error(last) from None
        except LineRefused as refused:  # pragma: no cover - the probe is always an object
            raise validation_error(refused.details or []) from None


@router.handles(CREATE_CAMPAIGN)
def create_campaign(
    request: Annotated[CreateCampaignRequest, Body(embed=False)],
    idempotency_key: Annotated[
        str | None,
        Header(alias="idempotency-key", description="A retry with the same key creates nothing new"),
    ] = None,
) -> Response[Any]:
    workspace = caller(router.context)
    deps = dependencies.root.get()
    key = key_of(idempotency_key)
    _check_content(request)
    service = _campaigns()
    rate = request.ratePerSecond
    if rate is None:
        workspace_rate = deps.limits.rate_per_second(workspace) if deps.limits is not None else None
        rate = default_rate(workspace_rate or deps.settings.rate_limit_per_second)
    send_at = parse_rfc3339(request.sendAt) if request.sendAt is not None else None
    recipients = request.recipients

    def run() -> StoredAnswer:
        inline = None
        if recipients is not None:
            inline = b"".join(
                json.dumps(recipient, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"
                for recipient in recipients
            )
        campaign, upload = service.create(
            workspace,
            name=request.name,
            channel=request.channel,
            content=request.content(),
            rate_per_second=rate,
            send_at=send_at,
            recipients=inline,
            inline_count=len(recipients) if recipients is not None else 0,
        )
        created = CampaignCreated(success=True, campaign=CampaignModel.of(campaign), upload=_upload(upload))
        return {"statusCode": 201, "body": to_json(created, compact=True)}

    if key is None:
        return stored(run())
    deps.idempotency_config.register_lambda_context(router.lambda_context)
    record = {"workspace": workspace, "key": key, "payload": json_body(router.context)}
    return stored(answered_once(deps.create_campaign_once, record, run=run))


def _upload(upload: Upload | None) -> UploadModel | None:
    if upload is None:
        return None
    return UploadModel(url=upload.url, expiresAt=rfc3339(upload.expires_at))


@router.handles(LIST_CAMPAIGNS)
def list_campaigns(limit: PageSize = 20, cursor: OpaqueCursor = None) -> Response[Any]:
    page = _campaigns().page(caller(router.context), limit, cursor)
    shown = [CampaignModel.of(campaign) for campaign in page.campaigns]
    return answer(200, CampaignPageModel(success=True, campaigns=shown, nextCursor=page.next_cursor))


@router.handles(GET_CAMPAIGN)
def get_campaign(id: str) -> Response[Any]:  # the path parameter's name
    return _one(200, _campaigns().get(caller(router.context), id))


@router.handles(START_CAMPAIGN)
def start_campaign(id: str) -> Response[Any]:
    campaign, started = _campaigns().start(caller(router.context), id)
    return _one(202 if started else 200, campaign)


@router.handles(PAUSE_CAMPAIGN)
def pause_campaign(id: str) -> Response[Any]:
    return _one(200, _campaigns().pause(caller(router.context), id))


@router.handles(RESUME_CAMPAIGN)
def resume_campaign(id: str) -> Response[Any]:
    return _one(200, _campaigns().resume(caller(router.context), id))


@router.handles(CANCEL_CAMPAIGN)
def cancel_campaign(id: str) -> Response[Any]:
    return _one(200, _campaigns().cancel(caller(router.context), id))


@router.handles(LIST_CAMPAIGN_ERRORS)
def list_campaign_errors(id: str, limit: PageSize = 20, cursor: OpaqueCursor = None) -> Response[Any]:
    page = _campaigns().errors(caller(router.context), id, limit, cursor)
    shown = [
        LineErrorModel(line=e.line, error=LineErrorDetail(code=e.code, message=e.message, details=e.details))
        for e in page.errors
    ]
    return answer(200, CampaignErrorPage(success=True, errors=shown, nextCursor=page.next_cursor))


__all__ = ["CampaignCreated", "CampaignEnvelope", "CampaignErrorPage", "CampaignPageModel", "router"]
