"""Templates: create, version, list, get, delete, and a render's preview.

Each route is declared in `sendonce.api.routes.templates`; its handler is here, with its models. The
use cases are the templates service's (`sendonce.templates.service`), which the API's root builds
with the first request for one of these routes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from pydantic import BaseModel, ConfigDict, Field, field_validator

from sendonce.api import dependencies
from sendonce.api.errors import unavailable
from sendonce.api.exchange import OpaqueCursor, PageSize, answer, caller
from sendonce.api.message_view import sms_count
from sendonce.api.routes import DeclaredRouter
from sendonce.api.routes.templates import (
    ADD_TEMPLATE_VERSION,
    CREATE_TEMPLATE,
    DELETE_TEMPLATE,
    GET_TEMPLATE,
    GET_TEMPLATE_VERSION,
    LIST_TEMPLATES,
    RENDER_TEMPLATE,
)
from sendonce.api.shapes import Acknowledged, ResponseModel, channel_names, registered_channel
from sendonce.clock import rfc3339
from sendonce.messages.model import (
    BODY_MAX_CHARACTERS,
    HTML_MAX_CHARACTERS,
    SUBJECT_MAX_CHARACTERS,
    Channel,
)
from sendonce.templates.model import Template, TemplateContent
from sendonce.templates.service import TemplateService

router = DeclaredRouter()

# A version's fields hold what a message's fields allow: as long as a message's own, syntax included.
MAX_BODY = BODY_MAX_CHARACTERS
MAX_SUBJECT = SUBJECT_MAX_CHARACTERS
MAX_HTML = HTML_MAX_CHARACTERS
MAX_DATA_KEYS = 1_000


class VersionRequest(BaseModel):
    """POST /v1/templates/{name}/versions: a version's fields (the template's channel's rules).
    Unknown fields are rejected."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    body: str = Field(min_length=1, max_length=MAX_BODY)
    subject: str | None = Field(
        default=None, min_length=1, max_length=MAX_SUBJECT, description="Email only; required"
    )
    html: str | None = Field(default=None, min_length=1, max_length=MAX_HTML, description="Email only")

    def content(self) -> TemplateContent:
        return TemplateContent(body=self.body, subject=self.subject, html=self.html)


class CreateTemplateRequest(VersionRequest):
    """POST /v1/templates: a name, a channel and version 1's fields."""

    name: str = Field(
        min_length=1, max_length=64, description="1 to 64 of a-z 0-9 _ -, starting with a letter or digit"
    )
    channel: str = Field(json_schema_extra=channel_names)

    @field_validator("channel")
    @classmethod
    def _registered(cls, value: str) -> str:
        return registered_channel(value)


class RenderRequest(BaseModel):
    """POST /v1/templates/{name}/render: the data, and the version (the latest when absent)."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    data: dict[str, Any] = Field(max_length=MAX_DATA_KEYS)
    version: int | None = Field(default=None, ge=1)


class TemplateModel(ResponseModel):
    name: str
    channel: str = Field(json_schema_extra=channel_names)
    version: int
    subject: str | None
    body: str
    html: str | None
    createdAt: str

    @classmethod
    def of(cls, template: Template) -> TemplateModel:
        content = template.content
        return cls(
            name=template.name,
            channel=template.channel.value,
            version=template.version,
            subject=content.subject,
            body=content.body,
            html=content.html,
            createdAt=rfc3339(template.created_at),
        )


class TemplateEnvelope(ResponseModel):
    success: Literal[True]
    template: TemplateModel


class TemplatePageModel(ResponseModel):
    success: Literal[True]
    templates: list[TemplateModel]
    nextCursor: str | None


class RenderedModel(ResponseModel):
    subject: str | None
    body: str
    html: str | None


class SmsPreview(ResponseModel):
    encoding: Literal["GSM-7", "UCS-2"]
    segments: int
    nonGsmCharacters: list[str]


class RenderAnswer(ResponseModel):
    success: Literal[True]
    rendered: RenderedModel
    sms: SmsPreview | None = Field(description="sms templates only: how the rendered body travels")


def _templates() -> TemplateService:
    service = dependencies.root.get().templates
    if service is None:
        raise unavailable("Templates are not configured.")
    return service


def _one(status: int, template: Template) -> Response[Any]:
    return answer(status, TemplateEnvelope(success=True, template=TemplateModel.of(template)))


@router.handles(CREATE_TEMPLATE)
def create_template(request: Annotated[CreateTemplateRequest, Body(embed=False)]) -> Response[Any]:
    created = _templates().create(
        caller(router.context), request.name, Channel(request.channel), request.content()
    )
    return _one(201, created)


@router.handles(LIST_TEMPLATES)
def list_templates(
    limit: PageSize = 20,
    cursor: OpaqueCursor = None,
) -> Response[Any]:
    page = _templates().page(caller(router.context), limit, cursor)
    shown = [TemplateModel.of(template) for template in page.templates]
    return answer(200, TemplatePageModel(success=True, templates=shown, nextCursor=page.next_cursor))


@router.handles(GET_TEMPLATE)
def get_template(name: str) -> Response[Any]:
    return _one(200, _templates().latest(caller(router.context), name))


@router.handles(DELETE_TEMPLATE)
def delete_template(name: str) -> Response[Any]:
    _templates().delete(caller(router.context), name)
    return answer(200, Acknowledged(success=True))


@router.handles(ADD_TEMPLATE_VERSION)
def add_template_version(name: str, request: Annotated[VersionRequest, Body(embed=False)]) -> Response[Any]:
    return _one(201, _templates().add_version(caller(router.context), name, request.content()))


@router.handles(GET_TEMPLATE_VERSION)
def get_template_version(name: str, version: int) -> Response[Any]:
    return _one(200, _templates().version(caller(router.context), name, version))


@router.handles(RENDER_TEMPLATE)
def render_template(name: str, request: Annotated[RenderRequest, Body(embed=False)]) -> Response[Any]:
    template, rendered = _templates().render(caller(router.context), name, request.version, request.data)
    counted = sms_count(template.channel, rendered.body)
    preview = None
    if counted is not None:
        preview = SmsPreview(
            encoding=counted.encoding.value,
            segments=counted.segments,
            nonGsmCharacters=list(counted.non_gsm_characters),
        )
    shown = RenderedModel(subject=rendered.subject, body=rendered.body, html=rendered.html)
    return answer(200, RenderAnswer(success=True, rendered=shown, sms=preview))
