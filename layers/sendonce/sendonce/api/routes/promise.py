"""The promise made visible: per UTC day, what the service did for a workspace's sends.

The declarations of these routes (`sendonce.api.routes`); their handlers are `sendonce.api.routers`'.
"""

from __future__ import annotations

from sendonce.api.routes import Route, json_answer

PROMISE_DAYS = Route(
    "GET",
    "/v1/promise",
    summary="Per UTC day: new messages, replays answered, duplicates blocked, sends refused as suppressed",
    description=(
        "Newest day first, `?days=` of them (1 to 31, default 14), today included; a day with nothing "
        "is listed with zeros. The duplicates blocked are also events (`GET /v1/events?type="
        "message.duplicate_blocked`), each naming its original message. Counted from the writes the "
        "service makes anyway and from the table's stream, so a count may trail by a few seconds."
    ),
    answers={200: json_answer("The days", "PromiseDays")},
    errors=(400, 503),
    tags=("usage",),
)
