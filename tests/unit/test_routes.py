"""Each route is declared once (`sendonce.api.routes`): template.yaml and the app agree with the table
of them all (`sendonce.api.routers`).

template.yaml tells API Gateway which routes reach the function, with no authorizer on any (the
function checks the API key itself); the declaration tells the app which take a key. These tests
fail when the two disagree, and show that the 405 answers, the preflight and the OpenAPI document
follow the declaration.
"""

from __future__ import annotations

import copy
import json
import re
import time
import traceback
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cfn_tools import load_yaml
from msgspec.structs import replace
from pydantic import BaseModel
from sendonce import composition
from sendonce.api import dependencies, preflight
from sendonce.api.app import handle
from sendonce.api.dependencies import ApiDependencies
from sendonce.api.errors import ApiError
from sendonce.api.json_body import decode_json as _decode_json
from sendonce.api.preflight import check_request
from sendonce.api.routers import ROUTES
from sendonce.api.routes import Body, Route
from sendonce.api.routes.campaigns import CREATE_CAMPAIGN
from sendonce.api.routes.erasures import REQUEST_ERASURE
from sendonce.api.routes.messages import EDIT_MESSAGE, SEND_BATCH, SEND_MESSAGE
from sendonce.api.routes.provider_events import PROVIDER_WEBHOOK
from sendonce.api.routes.suppressions import ADD_SUPPRESSION
from sendonce.api.routes.templates import ADD_TEMPLATE_VERSION, CREATE_TEMPLATE, RENDER_TEMPLATE
from sendonce.api.routes.webhooks import ADD_WEBHOOK_ENDPOINT, REDELIVER_EVENT
from sendonce.auth.api_keys import resolve_workspace
from sendonce.campaigns.service import CampaignService
from sendonce.erasures.service import ErasureService
from sendonce.limits.model import Limits
from sendonce.limits.service import RequestLimits
from sendonce.messages.service import MessageService
from sendonce.provider_events.signature import sign
from sendonce.suppressions.service import SuppressionService
from sendonce.templates.service import TemplateService

from sendonce_local.template import Template, parse_template
from tests.support.lambda_context import FakeLambdaContext
from tests.unit.campaign_fakes import FakeCampaignWork, InMemoryCampaignStore, InMemoryRecipientFiles
from tests.unit.erasure_fakes import FakeErasureQueue, InMemoryErasureStore
from tests.unit.unit_fakes import (
    FakeLimits,
    FakeQueue,
    InMemoryApiKeys,
    InMemoryStore,
    InMemorySuppressions,
    InMemoryTemplates,
    InProcessRenderer,
    fake_api_dependencies,
    key_of,
)

REPO = Path(__file__).resolve().parents[2]
API_FUNCTION = "ApiFunction"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return load_yaml((REPO / "template.yaml").read_text(encoding="utf-8"))


def _template(document: dict[str, Any]) -> Template:
    return parse_template(document, REPO)


def _disagreements(document: dict[str, Any]) -> list[str]:
    """How template.yaml's API function events and the declared routes differ; empty when they agree."""
    events = document["Resources"][API_FUNCTION]["Properties"]["Events"]
    found = [
        f"{name}: no authorizer runs, so no Auth"
        for name, event in events.items()
        if "Auth" in event["Properties"]
    ]
    found += [
        f"{logical_id}: no authorizer runs, so no Auth"
        for logical_id, resource in document["Resources"].items()
        if resource["Type"] == "AWS::Serverless::HttpApi" and "Auth" in resource["Properties"]
    ]
    if found:
        return found  # the local stack refuses such a template: it emulates no authorizer
    template = _template(document)
    routes = [route for route in template.routes if route.function_id == API_FUNCTION]
    in_template = {route.route_key: route for route in routes if route.route_key != "$default"}
    declared = {route.key: route for route in ROUTES}
    found = [f"only in template.yaml: {key}" for key in sorted(in_template.keys() - declared.keys())]
    found += [f"only declared: {key}" for key in sorted(declared.keys() - in_template.keys())]
    fallback = [route for route in routes if route.route_key == "$default"]
    if len(fallback) != 1:
        found.append("the `$default` Fallback event must send the rest to the app")
    return found


def test_template_yaml_and_the_declared_routes_agree(document: dict[str, Any]) -> None:
    assert _disagreements(document) == []


def _events(document: dict[str, Any]) -> dict[str, Any]:
    return document["Resources"][API_FUNCTION]["Properties"]["Events"]


def _drop_send(document: dict[str, Any]) -> None:
    del _events(document)["SendMessage"]


def _add_route(document: dict[str, Any]) -> None:
    _events(document)["Extra"] = {
        "Type": "HttpApi",
        "Properties": {"ApiId": {"Ref": "HttpApi"}, "Path": "/v1/extra", "Method": "GET"},
    }


def _an_authorizer_on_the_api(document: dict[str, Any]) -> None:
    document["Resources"]["HttpApi"]["Properties"]["Auth"] = {
        "DefaultAuthorizer": "Keys",
        "Authorizers": {"Keys": {"FunctionArn": {"Fn::GetAtt": ["ApiFunction", "Arn"]}}},
    }


def _an_authorizer_on_a_route(document: dict[str, Any]) -> None:
    _events(document)["ListMessages"]["Properties"]["Auth"] = {"Authorizer": "Keys"}


def _no_fallback(document: dict[str, Any]) -> None:
    del _events(document)["Fallback"]


@pytest.mark.parametrize(
    "change",
    [_drop_send, _add_route, _an_authorizer_on_the_api, _an_authorizer_on_a_route, _no_fallback],
)
def test_given_template_yaml_changed_alone_then_the_agreement_test_fails(
    document: dict[str, Any], change: Any
) -> None:
    changed = copy.deepcopy(document)
    change(changed)

    assert _disagreements(changed) != []


# ---------------------------------------------------------------------------- the app follows it
def _concrete(path: str) -> str:
    return re.sub(r"\{\w+\}", "msg_01KDVDNA00QV9D1V5ZMBF8DBMW", path)


def _event(
    method: str,
    path: str,
    *,
    route_key: str | None = None,
    workspace: str | None = None,
    body: str | None = None,
    content_type: str | None = None,
) -> dict[str, Any]:
    headers = {"content-type": content_type} if content_type else {}
    if workspace:
        headers["authorization"] = f"Bearer {key_of(workspace)}"
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key or f"{method} {path}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {"http": {"method": method, "path": path}, "stage": "$default"},
        "isBase64Encoded": False,
    }
    if body is not None:
        event["body"] = body
    return event


_KEYS = InMemoryApiKeys.of("ws")


def _check(event: dict[str, Any]) -> Any:
    return check_request(event, lambda header: resolve_workspace(_KEYS, header))


def _preflight_answer(event: dict[str, Any]) -> int | None:
    try:
        _check(event)
    except ApiError as error:
        return error.status
    return None


def _paths() -> list[str]:
    return sorted({route.path for route in ROUTES})


@pytest.mark.parametrize("path", _paths())
def test_a_method_not_declared_on_a_path_is_a_405_listing_the_declared_ones(path: str) -> None:
    # Every route the concrete path matches: `/v1/messages/batch` is also an `{id}` of `/v1/messages/{id}`.
    declared = sorted({route.method for route in ROUTES if route.matches(_concrete(path))})
    # API Gateway sends an undeclared method to `$default`, where no key is looked up.
    event = _event("PUT", _concrete(path), route_key="$default")

    answer = handle(event, None)

    assert answer["statusCode"] == 405
    assert answer["headers"]["Allow"] == ", ".join(declared)
    assert ROUTES.allowed_methods(_concrete(path)) == declared


def test_a_path_no_route_declares_is_a_404() -> None:
    answer = handle(_event("GET", "/v1/messages/a/b", route_key="$default"), None)

    assert answer["statusCode"] == 404
    assert ROUTES.allowed_methods("/v1/messages/a/b") == []


@pytest.mark.parametrize("route", ROUTES.routes, ids=lambda route: route.key)
def test_the_preflight_asks_for_a_key_exactly_on_the_routes_that_take_one(route: Route) -> None:
    event = _event(
        route.method, _concrete(route.path), route_key=route.key, body="{}", content_type="application/json"
    )

    assert (_preflight_answer(event) == 401) is not route.public


@pytest.mark.parametrize("route", ROUTES.routes, ids=lambda route: route.key)
def test_the_preflight_checks_the_size_of_a_body_only_on_the_routes_that_read_one(route: Route) -> None:
    event = _event(
        route.method,
        _concrete(route.path),
        workspace="ws",
        body="x" * (route.max_body_bytes + 1),
        content_type="text/plain",
    )

    assert (_preflight_answer(event) == 413) is (route.body is not Body.NONE)


@pytest.mark.parametrize("route", ROUTES.routes, ids=lambda route: route.key)
def test_the_preflight_wants_json_on_json_routes_and_leaves_signed_bytes_as_they_came(route: Route) -> None:
    event = _event(
        route.method, _concrete(route.path), workspace="ws", body='{"a": 1}', content_type="text/plain"
    )

    answer = _preflight_answer(event)

    assert (answer == 415) is (route.body in (Body.JSON, Body.OPTIONAL_JSON))
    if route.body not in (Body.JSON, Body.OPTIONAL_JSON):
        assert _check(event).event is event  # nothing rewritten: a signature is over the bytes as they came


def _openapi() -> dict[str, Any]:
    answer = handle(_event("GET", "/openapi.json", route_key="GET /openapi.json"), None)
    assert answer["statusCode"] == 200
    document: dict[str, Any] = json.loads(answer["body"])
    return document


def test_the_openapi_document_has_exactly_the_declared_routes() -> None:
    operations = {
        f"{method.upper()} {path}" for path, methods in _openapi()["paths"].items() for method in methods
    }

    assert operations == {route.key for route in ROUTES}


@pytest.mark.parametrize("route", ROUTES.routes, ids=lambda route: route.key)
def test_each_operation_is_public_exactly_when_declared_so_and_documents_the_declared_answers(
    route: Route,
) -> None:
    operation = _openapi()["paths"][route.path][route.method.lower()]

    assert (operation.get("security") == []) is route.public
    assert set(operation["responses"]) == {str(status) for status in route.responses}
    assert operation["summary"] == route.summary
    assert operation["tags"] == list(route.tags)


@pytest.mark.parametrize("route", ROUTES.routes, ids=lambda route: route.key)
def test_each_route_documents_what_its_preflight_answers(route: Route) -> None:
    statuses = set(route.responses)

    assert (401 in statuses) or route.public
    assert (503 in statuses) or route.public  # the key store could not be read
    assert (413 in statuses) is (route.body is not Body.NONE)
    assert (415 in statuses) is (route.body in (Body.JSON, Body.OPTIONAL_JSON))
    assert (429 in statuses) is (not route.public)  # the workspace's request rate, right after the key


# ---------------------------------------------------------------------------- through the real handler
_WS = "ws"


@pytest.fixture
def api() -> Iterator[ApiDependencies]:
    """The real handler on fakes: the key of `_WS`, a request rate, and spies of the keyed sends."""
    store = InMemoryStore()
    deps = fake_api_dependencies(
        MessageService(store=store, queue=FakeQueue(), dedup_window=timedelta(minutes=15)),
        InMemoryApiKeys.of(_WS),
        limits=RequestLimits(FakeLimits()),
        suppressions=SuppressionService(InMemorySuppressions()),
        provider_events_secret=lambda: "whsec_unit",
        send_once=_Spy({"statusCode": 201, "body": "{}"}),
        send_batch_once=_Spy({"statusCode": 200, "body": '{"success": true, "results": []}'}),
        build_templates=lambda: TemplateService(InMemoryTemplates(), InProcessRenderer()),
        build_campaigns=lambda: CampaignService(
            InMemoryCampaignStore(), InMemoryRecipientFiles(), FakeCampaignWork()
        ),
        create_campaign_once=_Spy({"statusCode": 201, "body": "{}"}),
        build_erasures=lambda: ErasureService(InMemoryErasureStore(), FakeErasureQueue()),
    )
    dependencies.root.use(deps)
    yield deps
    composition.reset_all()


class _Spy:
    """A keyed send that answers `answer` and keeps the request it was handed."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.requests: list[dict[str, Any]] = []

    def __call__(self, *, request: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.requests.append(request)
        return self.answer


def _forms_of_404_and_405() -> list[tuple[str, str, int]]:
    """(method, path, status) for every declared path: each method not declared on it (405), and the
    paths next to it that no route takes (404): a segment more, a trailing slash, an encoded slash."""
    forms: list[tuple[str, str, int]] = []
    for path in _paths():
        concrete = _concrete(path)
        declared = {route.method for route in ROUTES if route.matches(concrete)}
        forms += [
            (method, concrete, 405)
            for method in ("GET", "POST", "PUT", "PATCH", "DELETE")
            if method not in declared
        ]
        forms += [
            ("GET", nearby, 404)
            for nearby in (concrete + "/x", concrete + "/")
            if not ROUTES.allowed_methods(nearby)
        ]
        if "{" in path:
            forms += [
                (method, re.sub(r"\{\w+\}", slash, path), 404)
                for method in sorted({r.method for r in ROUTES if r.path == path})
                for slash in ("a%2Fb", "a%252fb")
            ]
    return forms


@pytest.mark.parametrize(("method", "path", "status"), _forms_of_404_and_405())
def test_every_404_and_405_to_a_good_key_carries_the_ratelimit_fields(
    api: ApiDependencies, method: str, path: str, status: int
) -> None:
    answer = handle(_event(method, path, route_key="$default", workspace=_WS), FakeLambdaContext())  # type: ignore[arg-type]

    assert answer["statusCode"] == status, answer["body"]
    assert json.loads(answer["body"])["error"]["code"] == (
        "not_found" if status == 404 else "method_not_allowed"
    )
    assert {"RateLimit", "RateLimit-Policy"} <= set(answer["headers"])


@pytest.mark.parametrize(("method", "path", "status"), _forms_of_404_and_405()[:12])
def test_a_404_or_405_without_a_good_key_carries_no_ratelimit_fields(
    api: ApiDependencies, method: str, path: str, status: int
) -> None:
    event = _event(method, path, route_key="$default")
    event["headers"]["authorization"] = "Bearer sk_wrong"

    answer = handle(event, FakeLambdaContext())  # type: ignore[arg-type]

    assert answer["statusCode"] in (status, 401)  # 401: an id holding a slash, on a route that takes a key
    assert "RateLimit" not in answer["headers"]


@pytest.mark.parametrize(
    ("method", "path", "route_key", "status"),
    [
        ("GET", "/v1/health", "GET /v1/health", 200),
        ("GET", "/openapi.json", "GET /openapi.json", 200),
        ("GET", "/v1/nowhere", "$default", 404),
        ("DELETE", "/v1/messages", "$default", 405),
        ("GET", "/v1/messages", "GET /v1/messages", 429),
    ],
)
def test_over_the_rate_a_good_key_is_refused_only_where_a_key_is_needed_and_always_told_where_it_stands(
    api: ApiDependencies, method: str, path: str, route_key: str, status: int
) -> None:
    limits = RequestLimits(FakeLimits(defaults=Limits(rate_per_second=1, daily_quota=0)))
    dependencies.root.use(replace(api, limits=limits))
    while limits.check_rate(_WS).allowed:  # type: ignore[union-attr]
        pass  # the window spent

    answer = handle(_event(method, path, route_key=route_key, workspace=_WS), FakeLambdaContext())  # type: ignore[arg-type]

    assert answer["statusCode"] == status
    assert answer["headers"]["RateLimit"].startswith('"workspace";r=0;')  # nothing left of the window
    assert ("Retry-After" in answer["headers"]) is (status == 429)


def _body_for(route: Route) -> str:
    return {
        SEND_MESSAGE.key: '{"channel": "sms", "to": "+15550100000", "body": "hi"}',
        SEND_BATCH.key: '{"messages": [{"channel": "sms", "to": "+15550100000", "body": "hi"}]}',
        EDIT_MESSAGE.key: '{"body": "new"}',
        ADD_WEBHOOK_ENDPOINT.key: '{"url": "https://example.com/hook"}',
        REDELIVER_EVENT.key: '{"endpointId": "we_1"}',
        ADD_SUPPRESSION.key: '{"channel": "sms", "to": "+15550100000"}',
        REQUEST_ERASURE.key: '{"to": "+15550100000"}',
        CREATE_TEMPLATE.key: '{"name": "welcome", "channel": "sms", "body": "Hi {{ name }}"}',
        ADD_TEMPLATE_VERSION.key: '{"body": "Hello {{ name }}"}',
        RENDER_TEMPLATE.key: '{"data": {"name": "Ann"}}',
        CREATE_CAMPAIGN.key: '{"name": "launch", "channel": "sms", "body": "hi", '
        '"recipients": [{"to": "+15550100000"}]}',
        PROVIDER_WEBHOOK.key: '{"eventId": "e1", "messageId": "msg_01KDVDNA00QV9D1V5ZMBF8DBMW", '
        '"type": "sent", "occurredAt": "2026-01-01T00:00:00Z"}',
    }[route.key]


_BODY_ROUTES = [route for route in ROUTES if route.body is not Body.NONE]


def test_every_route_that_reads_a_body_is_exercised_below() -> None:
    assert {route.key for route in _BODY_ROUTES} == {
        route.key
        for route in (
            SEND_MESSAGE,
            SEND_BATCH,
            EDIT_MESSAGE,
            ADD_WEBHOOK_ENDPOINT,
            REDELIVER_EVENT,
            ADD_SUPPRESSION,
            REQUEST_ERASURE,
            PROVIDER_WEBHOOK,
            CREATE_TEMPLATE,
            ADD_TEMPLATE_VERSION,
            RENDER_TEMPLATE,
            CREATE_CAMPAIGN,
        )
    }


@pytest.mark.parametrize("route", _BODY_ROUTES, ids=lambda route: route.key)
def test_every_route_that_reads_a_body_takes_the_preflights_value_and_never_parses_the_text(
    api: ApiDependencies, route: Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _body_for(route)
    decoded: list[Any] = []
    parsed: list[Any] = []  # every text parsed outside the preflight's decoding

    def decode_once(body: str) -> Any:
        decoded.append(_decode_json(body))
        return decoded[-1]

    real_decode = json.JSONDecoder.decode

    def decode(self: json.JSONDecoder, s: str, *args: Any, **kwargs: Any) -> Any:
        if not _in_preflight():
            parsed.append(s)
        return real_decode(self, s, *args, **kwargs)

    real_validate_json = BaseModel.model_validate_json.__func__  # type: ignore[attr-defined]

    def validate_json(cls: type[BaseModel], data: Any, *args: Any, **kwargs: Any) -> Any:
        parsed.append(data)
        return real_validate_json(cls, data, *args, **kwargs)

    monkeypatch.setattr(preflight, "decode_json", decode_once)
    monkeypatch.setattr(json.JSONDecoder, "decode", decode)
    monkeypatch.setattr(BaseModel, "model_validate_json", classmethod(validate_json))
    event = _event(
        route.method,
        _concrete(route.path),
        workspace=None if route.public else _WS,
        body=text,
        content_type="application/json",
    )
    event["headers"]["idempotency-key"] = "k-1"
    if route is PROVIDER_WEBHOOK:
        event["rawPath"] = event["requestContext"]["http"]["path"] = "/v1/webhooks/http"
        event["headers"]["x-sendonce-signature"] = sign("whsec_unit", int(time.time()), text.encode())

    answer = handle(event, FakeLambdaContext())  # type: ignore[arg-type]

    assert answer["statusCode"] < 500, answer["body"]
    assert answer["statusCode"] not in (400, 401), answer["body"]
    assert len(decoded) == 1  # the preflight decoded the text once
    assert [s for s in parsed if text in str(s)] == []  # and no one parsed it again
    if route is SEND_MESSAGE:
        assert api.send_once.requests[0]["payload"] is decoded[0]  # type: ignore[attr-defined]
    if route is SEND_BATCH:
        assert api.send_batch_once.requests[0]["payload"] is decoded[0]  # type: ignore[attr-defined]
    if route is CREATE_CAMPAIGN:
        assert api.create_campaign_once.requests[0]["payload"] is decoded[0]  # type: ignore[attr-defined]


def _in_preflight() -> bool:
    """Whether the caller's stack is inside the preflight's one decoding function."""
    return any(frame.f_code is _decode_json.__code__ for frame, _ in traceback.walk_stack(None))
