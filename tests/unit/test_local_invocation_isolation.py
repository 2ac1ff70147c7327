"""sendonce_local: concurrent invocations in threads never see each other's event (as in Lambda)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from sendonce_local.invocation_isolation import isolate_invocations


def _event(i: int) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": "GET /items/{id}",
        "rawPath": f"/items/{i}",
        "rawQueryString": f"q={i}",
        "headers": {},
        "queryStringParameters": {"q": str(i)},
        "requestContext": {
            "http": {"method": "GET", "path": f"/items/{i}", "sourceIp": "127.0.0.1"},
            "stage": "$default",
        },
        "isBase64Encoded": False,
    }


def test_each_thread_reads_its_own_event_and_route_arguments() -> None:
    isolate_invocations()
    isolate_invocations()  # idempotent
    app = APIGatewayHttpResolver()

    @app.get("/items/<id>")
    def item(id: str) -> dict[str, Any]:
        time.sleep(0.002)  # let the other threads resolve their own events meanwhile
        return {"id": id, "path": app.current_event.path, "q": app.current_event.get_query_string_value("q")}

    mixed_up: list[tuple[int, dict[str, Any]]] = []

    def run(i: int) -> None:
        for _ in range(15):
            body = json.loads(app.resolve(_event(i), None)["body"])  # type: ignore[arg-type]
            if body != {"id": str(i), "path": f"/items/{i}", "q": str(i)}:
                mixed_up.append((i, body))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert mixed_up == []
