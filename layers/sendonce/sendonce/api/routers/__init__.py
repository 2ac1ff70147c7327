"""The API's routers, one per context, and the table of every route they declare.

A route is declared in its router's module, right above its handler (`DeclaredRouter.handles`);
`ROUTERS` lists the routers in the order `sendonce.api.app` includes them, and `ROUTES` is every
route they declare, in that order: what the preflight, a 405 and the OpenAPI document read.
"""

from __future__ import annotations

from sendonce.api.routers import messages, provider_events, service, suppressions, usage, webhooks
from sendonce.api.routes import DeclaredRouter, RouteTable

ROUTERS: tuple[DeclaredRouter, ...] = (
    messages.router,
    webhooks.router,
    provider_events.router,
    suppressions.router,
    usage.router,
    service.router,
)
ROUTES = RouteTable(ROUTERS)
