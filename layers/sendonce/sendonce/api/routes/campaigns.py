"""Campaigns: one content to a list of recipients, fanned out on AWS (create, start, pause, resume,
cancel, list, get, errors).

The declarations of these routes (`sendonce.api.routes`); their handlers are `sendonce.api.routers`'.
"""

from __future__ import annotations

from sendonce.api.routes import Body, Route, json_answer

# 1,000 inline recipients with their data and metadata.
CREATE_BODY_BYTES = 2 * 1024 * 1024

CREATE_CAMPAIGN = Route(
    "POST",
    "/v1/campaigns",
    summary="Create a campaign (a draft)",
    description=(
        "Body {name, channel, template {name, version?} | the content fields of a send, recipients?, "
        "sendAt?, ratePerSecond?}. `recipients`: at most 1,000 {to, data?, metadata?}; without them the "
        "answer carries `upload`: a presigned PUT URL for a JSON Lines file of recipients (at most "
        "1,000,000 lines and 100 MB). A recipient that breaks a send's rules is counted `invalid` and "
        "listed by its 1-based line (GET /v1/campaigns/{id}/errors). Optional Idempotency-Key, as for "
        "a send: a retry replays the 201 with Idempotency-Replayed: true."
    ),
    answers={201: json_answer("Created", "CampaignCreated")},
    errors=(400, 409, 422, 503),
    body=Body.JSON,
    tags=("campaigns",),
    max_body_bytes=CREATE_BODY_BYTES,
)

LIST_CAMPAIGNS = Route(
    "GET",
    "/v1/campaigns",
    summary="List the campaigns, newest first",
    answers={200: json_answer("A page of campaigns", "CampaignPageModel")},
    errors=(400, 503),
    tags=("campaigns",),
)

GET_CAMPAIGN = Route(
    "GET",
    "/v1/campaigns/{id}",
    summary="Get a campaign, its status and counts",
    answers={200: json_answer("The campaign", "CampaignEnvelope")},
    errors=(404, 503),
    tags=("campaigns",),
)

START_CAMPAIGN = Route(
    "POST",
    "/v1/campaigns/{id}/start",
    summary="Start a campaign: sending, or scheduled until its sendAt",
    description="202 when this call started it; 200 (nothing changed) when it was started before.",
    answers={
        202: json_answer("Started", "CampaignEnvelope"),
        200: json_answer("Started before: nothing changed", "CampaignEnvelope"),
    },
    errors=(404, 409, 503),
    tags=("campaigns",),
    error_descriptions={
        409: "campaign_finished (completed or canceled: nothing changes it), or recipients_not_ready "
        "(the list was not uploaded yet, or is over 100 MB)"
    },
)

PAUSE_CAMPAIGN = Route(
    "POST",
    "/v1/campaigns/{id}/pause",
    summary="Pause a campaign: no new message until it is resumed",
    answers={200: json_answer("Paused", "CampaignEnvelope")},
    errors=(404, 409, 503),
    tags=("campaigns",),
    error_descriptions={409: "campaign_finished: completed or canceled, nothing changes it"},
)

RESUME_CAMPAIGN = Route(
    "POST",
    "/v1/campaigns/{id}/resume",
    summary="Resume a paused campaign",
    answers={200: json_answer("Resumed", "CampaignEnvelope")},
    errors=(404, 409, 503),
    tags=("campaigns",),
    error_descriptions={409: "campaign_finished: completed or canceled, nothing changes it"},
)

CANCEL_CAMPAIGN = Route(
    "POST",
    "/v1/campaigns/{id}/cancel",
    summary="Cancel a campaign: no new message, and its waiting ones canceled",
    answers={200: json_answer("Canceled", "CampaignEnvelope")},
    errors=(404, 409, 503),
    tags=("campaigns",),
    error_descriptions={409: "campaign_finished: completed or canceled, nothing changes it"},
)

LIST_CAMPAIGN_ERRORS = Route(
    "GET",
    "/v1/campaigns/{id}/errors",
    summary="The lines of a campaign's list counted invalid, and why",
    answers={200: json_answer("A page of errors, by line", "CampaignErrorPage")},
    errors=(400, 404, 503),
    tags=("campaigns",),
)
