"""Erasures: a recipient forgotten by the workspace (its messages, events, stored answers and test
deliveries erased), while its locks, key ties and suppression keep protecting them.

The declarations of these routes (`sendonce.api.routes`); their handlers are `sendonce.api.routers`'.
"""

from __future__ import annotations

from sendonce.api.routes import Body, Route, json_answer

REQUEST_ERASURE = Route(
    "POST",
    "/v1/erasures",
    summary="Erase a recipient from the workspace",
    description=(
        "Body {to}: a phone number with its country code or an email address, in any form that "
        "normalises to the recipient. Within a minute, every message of the workspace (the key's own: "
        "a test key's, its test twin) that names them keeps no trace of the address or the content "
        '(each replaced by "[erased]"): the messages, their events and provider events, the answers '
        "stored under Idempotency-Keys, test deliveries, campaigns' line errors and the suppression "
        "entry's shown address. A message still to be delivered is canceled first. The dedup guard, "
        "key ties and the suppression list keep working for the recipient: a keyed retry is still a "
        "replay, and a suppressed recipient is still refused. The erasure is recorded without the "
        "address; its `to` is always null."
    ),
    answers={202: json_answer("Accepted: pending until done", "ErasureEnvelope")},
    errors=(400, 503),
    body=Body.JSON,
    tags=("erasures",),
)


GET_ERASURE = Route(
    "GET",
    "/v1/erasures/{id}",
    summary="Get an erasure: pending or done",
    description="Another workspace's erasure is 404, as an unknown one.",
    answers={200: json_answer("The erasure", "ErasureEnvelope")},
    errors=(404, 503),
    tags=("erasures",),
)
