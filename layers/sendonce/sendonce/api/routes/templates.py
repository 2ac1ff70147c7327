"""Templates: a workspace's named, versioned content (create, version, list, get, delete, render).

The declarations of these routes (`sendonce.api.routes`); their handlers are `sendonce.api.routers`'.
"""

from __future__ import annotations

from sendonce.api.routes import Body, Route, json_answer

CREATE_TEMPLATE = Route(
    "POST",
    "/v1/templates",
    summary="Create a template (version 1)",
    description=(
        "Body {name, channel, subject?, body, html?}. `name`: 1 to 64 of a-z 0-9 _ -, starting with a "
        "letter or a digit, unique among the workspace's live templates (again: 409 template_exists). "
        "`subject` is required for email and refused otherwise; `html` is email only. Each field is a "
        "Jinja2 template; one that does not parse is 400 validation_error naming it."
    ),
    answers={201: json_answer("Created", "TemplateEnvelope")},
    errors=(400, 409, 503),
    body=Body.JSON,
    tags=("templates",),
)


LIST_TEMPLATES = Route(
    "GET",
    "/v1/templates",
    summary="List the templates by name, each at its latest version",
    answers={200: json_answer("A page of templates", "TemplatePageModel")},
    errors=(400, 503),
    tags=("templates",),
)


GET_TEMPLATE = Route(
    "GET",
    "/v1/templates/{name}",
    summary="Get a template's latest version",
    answers={200: json_answer("The latest version", "TemplateEnvelope")},
    errors=(404, 503),
    tags=("templates",),
)


DELETE_TEMPLATE = Route(
    "DELETE",
    "/v1/templates/{name}",
    summary="Delete a template: no new send can use it",
    description="The messages sent from it keep naming it. Created again, its versions go on from the last.",
    answers={200: json_answer("Deleted", "Acknowledged")},
    errors=(404, 503),
    tags=("templates",),
)


ADD_TEMPLATE_VERSION = Route(
    "POST",
    "/v1/templates/{name}/versions",
    summary="Add a version; versions never change",
    description="Body {subject?, body, html?}, under the template's channel's rules. A send without a "
    "version uses the latest.",
    answers={201: json_answer("The new version", "TemplateEnvelope")},
    errors=(400, 404, 503),
    body=Body.JSON,
    tags=("templates",),
)


GET_TEMPLATE_VERSION = Route(
    "GET",
    "/v1/templates/{name}/versions/{version}",
    summary="Get one version of a template",
    answers={200: json_answer("That version", "TemplateEnvelope")},
    errors=(400, 404, 503),
    tags=("templates",),
)


RENDER_TEMPLATE = Route(
    "POST",
    "/v1/templates/{name}/render",
    summary="Render a version with data, as a send would: a preview",
    description=(
        "Body {data: object, version?: int}. The data's keys are the template's variables; a variable "
        "the data lacks is 422 template_data_invalid with details.missing naming every one. A render "
        "over 1 second or 1,000,000 characters, or over its memory, is stopped: 422 "
        "template_data_invalid with details.limit. An sms template's answer says its encoding and "
        "segments, and the characters that make it UCS-2."
    ),
    answers={200: json_answer("The rendered fields", "RenderAnswer")},
    errors=(400, 404, 422, 503),
    body=Body.JSON,
    tags=("templates",),
)
