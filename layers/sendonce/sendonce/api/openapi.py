"""The API's OpenAPI document and its browsable page, built on first request.

Their models and Swagger UI stay off the cold start: a function that never serves
`/openapi.json` or `/docs` never builds them. The document is built on a resolver of its own, which
takes every route of the table (`sendonce.api.routers.ROUTERS`), with its handler, in the table's
order: whichever routers the API function's resolver has included so far, in whichever order its
requests came, the document is the same.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from sendonce.api import routers
from sendonce.api.routers import ROUTERS, ROUTES
from sendonce.api.routes import register_route
from sendonce.api.routes.provider_events import PROVIDER_WEBHOOK
from sendonce.provider_events.http_body import HttpProviderEvent

# Shown at the top of /docs: what the service promises, and test mode walked through.
DESCRIPTION = """\
Send sms, iMessage and email once: a retried, replayed or concurrent request never sends a message \
twice, and an accepted message is never lost.

## Test mode

Every workspace has a test twin, reached with a test key (`sk_test_…`): everything works as in live \
mode (idempotency, dedup, batches, edits, webhooks, limits, suppressions) except the last hop, where a \
built-in simulator takes the message, by recipient, and no provider is ever called. Test data is kept \
7 days.

| recipient | simulator |
| --- | --- |
| `+15005550001` | permanent failure: the message ends `failed` |
| `+15005550002` | two transient failures, then accepted |
| `+15005550003` | accepted, then the answer is lost; the retry (same Idempotency-Key) delivers nothing new |
| `+15005550004` | accepted, then the recipient opts out |
| `success@` / `bounce@` / `complaint@simulator.amazonses.com` | as the SES mailbox simulator |
| anything else | accepted, then `delivered` |

1. Create a test key: `sendonce create-api-key --workspace <workspace> --test` (locally, a \
`SENDONCE_LOCAL_API_KEYS` entry whose key starts with `sk_test_`).
2. Send to `+15005550003` twice with one `Idempotency-Key`: `POST /v1/messages` with \
`{"channel": "sms", "to": "+15005550003", "body": "hello"}`. The first answer is `201`, the second \
its replay (`Idempotency-Replayed: true`); the simulator loses its first answer to the dispatcher, \
which retries under the message id.
3. `GET /v1/test/deliveries?messageId=<id>`: one delivery, whatever the retries.
"""


def _every_route() -> APIGatewayHttpResolver:
    """A resolver that only describes: every declared route, with its handler, in the table's order."""
    resolver = APIGatewayHttpResolver(enable_validation=True)
    for name, routes in ROUTERS.items():
        router = routers.load(name)
        for route in routes:
            register_route(resolver, route, router.handlers[route.key])
    return resolver


@cache
def openapi_document() -> str:
    """The OpenAPI description, built on first request: its models stay off the cold start."""
    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer  # noqa: PLC0415

    document = json.loads(
        _every_route().get_openapi_json_schema(
            title="sendonce",
            version="1.0.0",
            description=DESCRIPTION,
            security_schemes={"bearerAuth": HTTPBearer(description="API key: Authorization: Bearer <key>")},
            security=[{"bearerAuth": []}],
        )
    )
    paths = document.get("paths", {})
    for operations in paths.values():
        for operation in operations.values():
            responses = operation.get("responses", {})
            # Validation failures answer 400 validation_error here, never the event handler's 422.
            if "HTTPValidationError" in json.dumps(responses.get("422", {})):
                del responses["422"]
    for route in ROUTES:
        if route.public:  # the document's default is the API key
            paths[route.path][route.method.lower()]["security"] = []
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    _describe_webhook(paths[PROVIDER_WEBHOOK.path][PROVIDER_WEBHOOK.method.lower()], schemas)
    return json.dumps(document, ensure_ascii=False, indent=2)


# The fields of Twilio's status callback the webhook reads (Twilio sends more; all are signed).
_TWILIO_STATUS_CALLBACK = {
    "title": "TwilioStatusCallback",
    "description": "Twilio's status callback, as Twilio posts it; every field it sends is signed.",
    "type": "object",
    "properties": {
        "MessageSid": {"type": "string", "description": "Twilio's id of the message"},
        "MessageStatus": {
            "type": "string",
            "description": "sent, delivered, undelivered or failed change the message; others change nothing",
        },
        "ErrorCode": {"type": "string", "description": "Twilio's error code, when undelivered or failed"},
        "To": {"type": "string", "description": "The recipient"},
        "AccountSid": {"type": "string", "description": "The account that sent it"},
    },
    "required": ["MessageSid", "MessageStatus"],
    "additionalProperties": True,
}


def _describe_webhook(operation: dict[str, Any], schemas: dict[str, Any]) -> None:
    """The webhook reads its raw, signed bytes itself; its bodies and signatures are described here:
    the HTTP provider's JSON, and Twilio's form."""
    body_schema = HttpProviderEvent.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(body_schema.pop("$defs", {}))
    schemas["HttpProviderEvent"] = body_schema
    schemas["TwilioStatusCallback"] = _TWILIO_STATUS_CALLBACK
    operation["requestBody"] = {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/HttpProviderEvent"}},
            "application/x-www-form-urlencoded": {
                "schema": {"$ref": "#/components/schemas/TwilioStatusCallback"}
            },
        },
    }
    for parameter in operation.get("parameters", []):
        if parameter.get("name") == "provider":
            parameter["schema"] = {"type": "string", "enum": ["http", "twilio"]}
    operation.setdefault("parameters", []).extend(
        [
            {
                "name": "X-Sendonce-Signature",
                "in": "header",
                "required": False,
                "schema": {"type": "string", "pattern": "^t=[0-9]+(,v1=[0-9a-f]{64})+$"},
                "description": (
                    '`http` (required): t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>'
                ),
            },
            {
                "name": "X-Twilio-Signature",
                "in": "header",
                "required": False,
                "schema": {"type": "string"},
                "description": (
                    "`twilio` (required): base64 HMAC-SHA1(auth token, the URL called, then each form "
                    "field's name and value, sorted by name)"
                ),
            },
            {
                "name": "messageId",
                "in": "query",
                "required": False,
                "schema": {"type": "string", "minLength": 1, "maxLength": 64},
                "description": "`twilio`: the message the callback is about (set by the send, signed)",
            },
        ]
    )


@cache
def docs_page() -> str:
    """Swagger UI with its script and styles inlined from Powertools: it works with no CDN."""
    from aws_lambda_powertools import event_handler  # noqa: PLC0415
    from aws_lambda_powertools.event_handler.openapi.swagger_ui.html import (  # noqa: PLC0415
        generate_swagger_html,
    )

    assets = Path(event_handler.__file__).parent / "openapi" / "swagger_ui"
    return generate_swagger_html(
        spec=openapi_document().replace("</", "<\\/"),
        swagger_js=(assets / "swagger-ui-bundle.min.js").read_text(encoding="utf-8"),
        swagger_css=(assets / "swagger-ui.min.css").read_text(encoding="utf-8"),
        swagger_base_url="",
        oauth2_config=None,
    )
