"""The console: the page a workspace's people open in a browser (`/console`) and its assets.

Public routes: the page and its script and styles hold no data and no key; everything the page
shows it asks of the API with the key its user gives, kept in the tab's `sessionStorage`.

The declarations of these routes (`sendonce.api.routes`); their handlers are `sendonce.api.routers`'.
"""

from __future__ import annotations

from sendonce.api.routes import Route

CONSOLE_PAGE = Route(
    "GET",
    "/console",
    summary="The console: a workspace's messages, and what the promise did, in a browser",
    description="With a strict Content-Security-Policy: it runs only its own script, /console/{asset}.",
    answers={200: {"description": "The console's page", "content": {"text/html": {}}}},
    public=True,
    tags=("console",),
)


CONSOLE_ASSET = Route(
    "GET",
    "/console/{asset}",
    summary="One of the console's own scripts or style sheets",
    answers={200: {"description": "The asset", "content": {"text/javascript": {}, "text/css": {}}}},
    errors=(404,),
    public=True,
    tags=("console",),
)
