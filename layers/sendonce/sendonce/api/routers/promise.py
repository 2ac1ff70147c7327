"""The promise made visible: `GET /v1/promise`, the workspace's last days' counts.

A handler validates, calls one use case of `sendonce.activity`, and answers with its response model.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import Field

from sendonce.activity.counts import PromiseDay, PromiseKind
from sendonce.api import dependencies
from sendonce.api.errors import unavailable
from sendonce.api.exchange import answer, caller
from sendonce.api.routes import DeclaredRouter
from sendonce.api.routes.promise import PROMISE_DAYS
from sendonce.api.shapes import ResponseModel

router = DeclaredRouter()

MAX_DAYS = 31


class PromiseDayModel(ResponseModel):
    date: str = Field(description="YYYY-MM-DD, a UTC day")
    newMessages: int = Field(description="Messages accepted (created) that day")
    replays: int = Field(description="Earlier answers replayed under an Idempotency-Key")
    duplicatesBlocked: int = Field(description="Sends the dedup guard answered with their original")
    refusedSuppressed: int = Field(
        description="Sends refused for a suppressed recipient: 422s, and messages the dispatcher ended so"
    )

    @classmethod
    def of(cls, day: PromiseDay) -> PromiseDayModel:
        return cls(
            date=day.day,
            newMessages=day.of(PromiseKind.NEW_MESSAGES),
            replays=day.of(PromiseKind.REPLAYS),
            duplicatesBlocked=day.of(PromiseKind.DUPLICATES_BLOCKED),
            refusedSuppressed=day.of(PromiseKind.REFUSED_SUPPRESSED),
        )


class PromiseDays(ResponseModel):
    success: Literal[True]
    days: list[PromiseDayModel] = Field(description="Newest first, today's included")


@router.handles(PROMISE_DAYS)
def promise_days(
    days: Annotated[int, Query(ge=1, le=MAX_DAYS, description="How many days, today's included")] = 14,
) -> Response[Any]:
    activity = dependencies.root.get().activity
    if activity is None:
        raise unavailable()
    counted = activity.days(caller(router.context), days)
    return answer(200, PromiseDays(success=True, days=[PromiseDayModel.of(day) for day in counted]))
