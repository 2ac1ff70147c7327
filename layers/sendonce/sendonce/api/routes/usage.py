"""Usage and test mode: the workspace's limits and today's use (`/v1/usage`), and what the simulator
accepted for a test twin's messages (`/v1/test/deliveries`).

The declarations of these routes (`sendonce.api.routes`); their handlers are `sendonce.api.routers`'.
"""

from __future__ import annotations

from sendonce.api.routes import Route, json_answer

USAGE = Route(
    "GET",
    "/v1/usage",
    summary="The workspace's limits and today's use of its send quota",
    answers={200: json_answer("Limits and usage", "UsageReport")},
    errors=(503,),
    tags=("usage",),
)


TEST_DELIVERIES = Route(
    "GET",
    "/v1/test/deliveries",
    summary="Test mode: what the simulator accepted",
    description=(
        "Test keys (sk_test_…) only: a live key gets 404. The calls the simulator accepted for the test "
        "twin's messages, one entry per accepted call (a retry under the same Idempotency-Key adds none), "
        "so a CI run can assert that a message was delivered exactly once. ?messageId=: that message's "
        "(404 for a message that is not this twin's); without it, the newest 100. Kept 7 days."
    ),
    answers={200: json_answer("The simulator's deliveries", "SimulatedDeliveries")},
    errors=(400, 404, 503),
    tags=("test mode",),
)
