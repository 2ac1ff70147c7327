"""Suppressions: the workspace's list of recipients it never sends to (add, list, get, remove).

The declarations of these routes (`sendonce.api.routes`); their handlers are `sendonce.api.routers`'.
"""

from __future__ import annotations

from sendonce.api.routes import Body, Route, json_answer

ADD_SUPPRESSION = Route(
    "POST",
    "/v1/suppressions",
    summary="Put a recipient on the suppression list",
    description=(
        "Body {channel, to}: the recipient as that channel reads it. One entry covers every channel that "
        "reaches the recipient (a phone number: sms and iMessage; an address: email and iMessage). "
        "201 with the new entry (reason manual); 200 with the existing one if the recipient is on the "
        "list already, whatever its reason."
    ),
    answers={
        201: json_answer("Added", "SuppressionEnvelope"),
        200: json_answer("Already on the list: the existing entry", "SuppressionEnvelope"),
    },
    errors=(400, 503),
    body=Body.JSON,
    tags=("suppressions",),
)


LIST_SUPPRESSIONS = Route(
    "GET",
    "/v1/suppressions",
    summary="List the suppression list, newest first",
    description=(
        "Entries come from STOP replies (opted_out), permanent SES bounces (bounced), complaints "
        "(complained) and this API (manual). A STOP to the shared sending number that names no message "
        "is on every workspace's list."
    ),
    answers={200: json_answer("A page of entries", "SuppressionPageModel")},
    errors=(400, 503),
    tags=("suppressions",),
)


GET_SUPPRESSION = Route(
    "GET",
    "/v1/suppressions/{to}",
    summary="Get a recipient's entry",
    description=(
        "`to` URL-encoded, in any form that normalises to the entry (`%2B15550100000`, `ann%40x.io`)."
    ),
    answers={200: json_answer("The entry", "SuppressionEnvelope")},
    errors=(400, 404, 503),
    tags=("suppressions",),
)


DELETE_SUPPRESSION = Route(
    "DELETE",
    "/v1/suppressions/{to}",
    summary="Take a recipient off the suppression list (after they opted back in)",
    description="Sends to the recipient work again at once. `to` as for GET; 404 when not on the list.",
    answers={200: json_answer("Removed", "Acknowledged")},
    errors=(400, 404, 503),
    tags=("suppressions",),
)
