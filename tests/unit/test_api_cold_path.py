"""What the API function loads before its first request, and what a first request for a route of
another context loads then.

The routes' declarations and the table of them all come with the import (the preflight reads them);
a router's module, its models and the modules of its context come with the first request for one of
its routes (`sendonce.api.routers`), but for a send's router, included at import. Each case runs in
a fresh interpreter: this one has imported everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys

from sendonce.api import routers
from sendonce.api.routers import AT_IMPORT, ROUTERS

# Loaded by no cold start that serves a send: the other routers, their models and their contexts.
NOT_ON_A_SENDS_COLD_PATH = [
    *(f"sendonce.api.routers.{name}" for name in ROUTERS if name not in AT_IMPORT),
    "sendonce.api.batch",
    "sendonce.api.openapi",
    "sendonce.messages.batch",
    "sendonce.status_webhooks.model",
    "sendonce.status_webhooks.service",
    "sendonce.provider_events.signature",
    "sendonce.simulator.ports",
]


def _loaded_after(script: str) -> dict[str, object]:
    """Run `script` in a fresh interpreter; what it prints last, as JSON."""
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    loaded: dict[str, object] = json.loads(completed.stdout.strip().splitlines()[-1])
    return loaded


_IMPORT = """
import json, sys
import sendonce.entrypoints.api
"""

_PRINT = """
print(json.dumps({"modules": sorted(m for m in sys.modules if m.startswith("sendonce")), **answers}))
"""


def test_importing_the_api_function_loads_a_sends_router_and_no_other_context() -> None:
    loaded = _loaded_after(_IMPORT + "answers = {}" + _PRINT)["modules"]

    assert isinstance(loaded, list)
    assert [module for module in NOT_ON_A_SENDS_COLD_PATH if module in loaded] == []
    assert {f"sendonce.api.routers.{name}" for name in AT_IMPORT} <= set(loaded)


def test_a_router_loads_with_the_first_request_for_one_of_its_routes() -> None:
    health = {
        "version": "2.0",
        "rawPath": "/v1/health",
        "rawQueryString": "",
        "headers": {},
        "requestContext": {"http": {"method": "GET", "path": "/v1/health"}, "stage": "$default"},
    }
    script = (
        _IMPORT
        + "from sendonce.api.app import handle\n"
        + "before = 'sendonce.api.routers.service' in sys.modules\n"
        + f"answers = {{'before': before, 'status': handle({health!r}, None)['statusCode']}}\n"
        + _PRINT
    )

    loaded = _loaded_after(script)

    assert loaded["before"] is False
    assert loaded["status"] == 200
    modules = loaded["modules"]
    assert isinstance(modules, list)
    assert "sendonce.api.routers.service" in modules
    assert "sendonce.api.routers.webhooks" not in modules


def test_each_router_handles_exactly_the_routes_the_table_gives_it_in_that_order() -> None:
    for name, routes in ROUTERS.items():
        assert list(routers.load(name).handlers) == [route.key for route in routes], name
