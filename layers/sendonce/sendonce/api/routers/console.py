"""The console: its page (`/console`) and the fixed set of files it runs (`/console/{asset}`).

Invariant: the console serves only the files named in `ASSETS`, read from the package's own data
(`sendonce/api/console/`), each with its one content type, and every answer carries the console's
Content-Security-Policy, so a browser runs nothing but those files: no inline script or style, no
other origin, no frame around it. Any other asset name, whatever it spells (`../app.py`), is the
API's one 404. Nothing served holds data or a key; the page asks the API for everything with the
key its user gives, kept in the tab's `sessionStorage`.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any

from aws_lambda_powertools.event_handler import Response

from sendonce.api.errors import not_found
from sendonce.api.routes import DeclaredRouter
from sendonce.api.routes.console import CONSOLE_ASSET, CONSOLE_PAGE

router = DeclaredRouter()

PAGE = "index.html"
HTML = "text/html; charset=utf-8"
JAVASCRIPT = "text/javascript; charset=utf-8"
CSS = "text/css; charset=utf-8"
# The files a browser may ask for by name, and what each is. A file not named here is never read.
ASSETS: dict[str, str] = {
    "console.css": CSS,
    "console.js": JAVASCRIPT,
    "api.js": JAVASCRIPT,
    "dom.js": JAVASCRIPT,
    "messages.js": JAVASCRIPT,
    "workspace.js": JAVASCRIPT,
}

# Only the console's own files run, and the API is its one connection. Trusted Types refuse any
# string written into the DOM as markup where the browser enforces them: data is only ever text.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types 'none'",
    )
)
_SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
# The page, never cached: it is what decides which script runs. Its files, briefly.
PAGE_CACHE = "no-store"
ASSET_CACHE = "public, max-age=300"


@cache
def _text(name: str) -> str:
    """A console file's text, read once per execution environment."""
    return files("sendonce.api").joinpath("console", name).read_text(encoding="utf-8")


@router.handles(CONSOLE_PAGE)
def console_page() -> Response[Any]:
    return Response(
        status_code=200,
        content_type=HTML,
        body=_text(PAGE),
        headers={**_SECURITY_HEADERS, "Cache-Control": PAGE_CACHE},
    )


@router.handles(CONSOLE_ASSET)
def console_asset(asset: str) -> Response[Any]:
    content_type = ASSETS.get(asset)
    if content_type is None:
        raise not_found("No such console file.")
    return Response(
        status_code=200,
        content_type=content_type,
        body=_text(asset),
        headers={**_SECURITY_HEADERS, "Cache-Control": ASSET_CACHE},
    )
