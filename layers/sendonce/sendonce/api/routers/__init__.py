"""The API's routers, one per context, the routes each handles, and the table of them all.

A route is declared in `sendonce.api.routes` (its context's module); `ROUTERS` names, in the order
the resolver and the OpenAPI document take them, each router's module here and the routes it
handles, and `ROUTES` is every route, in that order: what the preflight, a 405 and the OpenAPI
document read. A router's module (its handlers, their models, and what they import of their
context) is imported by `load`, which the resolver (`sendonce.api.app`) calls with the first request
for one of its routes; only `AT_IMPORT`'s come with the API function's import. A cold start that
serves a send never loads the webhooks, suppressions, templates, campaigns, usage or provider
events, nor the models of other routes.
"""

from __future__ import annotations

from importlib import import_module

from sendonce.api.routes import DeclaredRouter, Route, RouteTable
from sendonce.api.routes import campaigns as campaigns_routes
from sendonce.api.routes import console as console_routes
from sendonce.api.routes import erasures as erasures_routes
from sendonce.api.routes import messages as messages_routes
from sendonce.api.routes import promise as promise_routes
from sendonce.api.routes import provider_events as provider_events_routes
from sendonce.api.routes import service as service_routes
from sendonce.api.routes import suppressions as suppressions_routes
from sendonce.api.routes import templates as templates_routes
from sendonce.api.routes import usage as usage_routes
from sendonce.api.routes import webhooks as webhooks_routes

ROUTERS: dict[str, tuple[Route, ...]] = {
    "sending": (messages_routes.SEND_MESSAGE,),
    "batches": (messages_routes.SEND_BATCH,),
    "messages": (
        messages_routes.GET_MESSAGE,
        messages_routes.MESSAGE_TIMELINE,
        messages_routes.LIST_MESSAGES,
        messages_routes.CANCEL_MESSAGE,
        messages_routes.EDIT_MESSAGE,
    ),
    "webhooks": (
        webhooks_routes.ADD_WEBHOOK_ENDPOINT,
        webhooks_routes.LIST_WEBHOOK_ENDPOINTS,
        webhooks_routes.GET_WEBHOOK_ENDPOINT,
        webhooks_routes.DELETE_WEBHOOK_ENDPOINT,
        webhooks_routes.ROTATE_WEBHOOK_SECRET,
        webhooks_routes.LIST_EVENTS,
        webhooks_routes.GET_EVENT,
        webhooks_routes.REDELIVER_EVENT,
    ),
    "provider_events": (provider_events_routes.PROVIDER_WEBHOOK,),
    "suppressions": (
        suppressions_routes.ADD_SUPPRESSION,
        suppressions_routes.LIST_SUPPRESSIONS,
        suppressions_routes.GET_SUPPRESSION,
        suppressions_routes.DELETE_SUPPRESSION,
    ),
    "templates": (
        templates_routes.CREATE_TEMPLATE,
        templates_routes.LIST_TEMPLATES,
        templates_routes.GET_TEMPLATE,
        templates_routes.DELETE_TEMPLATE,
        templates_routes.ADD_TEMPLATE_VERSION,
        templates_routes.GET_TEMPLATE_VERSION,
        templates_routes.RENDER_TEMPLATE,
    ),
    "campaigns": (
        campaigns_routes.CREATE_CAMPAIGN,
        campaigns_routes.LIST_CAMPAIGNS,
        campaigns_routes.GET_CAMPAIGN,
        campaigns_routes.START_CAMPAIGN,
        campaigns_routes.PAUSE_CAMPAIGN,
        campaigns_routes.RESUME_CAMPAIGN,
        campaigns_routes.CANCEL_CAMPAIGN,
        campaigns_routes.LIST_CAMPAIGN_ERRORS,
    ),
    "usage": (usage_routes.USAGE, usage_routes.TEST_DELIVERIES),
    "promise": (promise_routes.PROMISE_DAYS,),
    "erasures": (erasures_routes.REQUEST_ERASURE, erasures_routes.GET_ERASURE),
    "service": (service_routes.HEALTH, service_routes.OPENAPI, service_routes.DOCS),
    "console": (console_routes.CONSOLE_PAGE, console_routes.CONSOLE_ASSET),
}
ROUTES = RouteTable(ROUTERS)
# Included when the API function is imported: a send is what a first request most likely is.
AT_IMPORT = ("sending",)


def load(name: str) -> DeclaredRouter:
    """The router of that name (a key of `ROUTERS`), its module imported if it was not yet."""
    router = import_module(f"{__name__}.{name}").router
    assert isinstance(router, DeclaredRouter)
    return router
