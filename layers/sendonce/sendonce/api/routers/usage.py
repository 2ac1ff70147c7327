"""Usage and test mode: the workspace's limits and today's use (`/v1/usage`), and what the simulator
accepted for a test twin's messages (`/v1/test/deliveries`).

Each route is declared here, right above its handler, which the router registers from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import Field

from sendonce.api import dependencies
from sendonce.api.errors import not_found, unavailable, validation_error
from sendonce.api.exchange import answer, caller
from sendonce.api.routes import DeclaredRouter
from sendonce.api.routes.usage import TEST_DELIVERIES, USAGE
from sendonce.api.shapes import ResponseModel, channel_names
from sendonce.clock import rfc3339
from sendonce.messages.ids import looks_like_message_id
from sendonce.modes import is_test_workspace

if TYPE_CHECKING:  # what the simulator's store gives; a send's cold start never loads it
    from sendonce.simulator.ports import SimulatedDelivery

router = DeclaredRouter()


class RateLimitModel(ResponseModel):
    perSecond: int


class QuotaModel(ResponseModel):
    daily: int = Field(description="New messages a UTC day; 0: none")
    usedToday: int
    resetsAt: str = Field(description="RFC 3339: the next 00:00 UTC")


class FrequencyCapModel(ResponseModel):
    perRecipient: int = Field(description="New messages to one recipient within the window")
    windowSeconds: int


class QuietHoursModel(ResponseModel):
    hours: str = Field(description="HH:MM-HH:MM, in the recipient's zone, such as 21:00-08:00")


class SendControlsModel(ResponseModel):
    frequencyCap: FrequencyCapModel | None = Field(description="null: no cap")
    quietHours: QuietHoursModel | None = Field(description="null: no quiet hours")
    timezone: str = Field(
        description="The workspace's zone (IANA): a recipient's when neither the send nor the phone "
        "number gives one"
    )


class SmsBudgetModel(ResponseModel):
    dailySegments: int = Field(description="Sms segments a UTC day")
    usedToday: int


class ProtectionsModel(ResponseModel):
    smsCountries: list[str] = Field(
        description="ISO 3166 alpha-2 codes a phone recipient (sms, iMessage) may be of; empty: every country"
    )
    allowPremiumNumbers: bool = Field(description="Premium-rate and shared-cost numbers are sent to")
    smsBudget: SmsBudgetModel | None = Field(description="null: no sms budget")
    retentionDays: int = Field(description="How long the workspace's new messages are kept")


class UsageReport(ResponseModel):
    success: Literal[True]
    rateLimit: RateLimitModel
    quota: QuotaModel
    sendControls: SendControlsModel
    protections: ProtectionsModel


class SimulatedDeliveryModel(ResponseModel):
    messageId: str
    channel: str = Field(json_schema_extra=channel_names)
    to: str | list[str] = Field(description="As the message shows it: an email's list when its send gave one")
    cc: list[str] | None = Field(
        default=None, exclude_if=lambda v: v is None, description="An email's, when it has them: as sent"
    )
    bcc: list[str] | None = Field(
        default=None, exclude_if=lambda v: v is None, description="An email's, when it has them: as sent"
    )
    subject: str | None
    body: str
    at: str = Field(description="RFC 3339: when the simulator accepted the call")

    @classmethod
    def of(cls, delivery: SimulatedDelivery) -> SimulatedDeliveryModel:
        return cls(
            messageId=delivery.message_id,
            channel=delivery.channel,
            to=delivery.to if delivery.to_list is None else list(delivery.to_list),
            cc=list(delivery.cc) if delivery.cc is not None else None,
            bcc=list(delivery.bcc) if delivery.bcc is not None else None,
            subject=delivery.subject,
            body=delivery.body,
            at=rfc3339(delivery.at),
        )


class SimulatedDeliveries(ResponseModel):
    success: Literal[True]
    deliveries: list[SimulatedDeliveryModel] = Field(
        description="One entry per call the simulator accepted: a repeat of an Idempotency-Key adds none"
    )


@router.handles(USAGE)
def usage() -> Response[Any]:
    limits = dependencies.root.get().limits
    if limits is None:
        raise unavailable("Limits are not configured.")
    report = limits.usage(caller(router.context))
    retention = report.limits.retention_days or dependencies.root.get().settings.message_retention_days
    return answer(
        200,
        UsageReport(
            success=True,
            rateLimit=RateLimitModel(perSecond=report.limits.rate_per_second),
            quota=QuotaModel(
                daily=report.limits.daily_quota,
                usedToday=report.used_today,
                resetsAt=rfc3339(report.resets_at),
            ),
            sendControls=SendControlsModel(
                frequencyCap=(
                    FrequencyCapModel(
                        perRecipient=report.limits.per_recipient,
                        windowSeconds=report.limits.per_recipient_window,
                    )
                    if report.limits.per_recipient
                    else None
                ),
                quietHours=QuietHoursModel(hours=report.limits.quiet_hours)
                if report.limits.quiet_hours
                else None,
                timezone=report.limits.timezone,
            ),
            protections=ProtectionsModel(
                smsCountries=list(report.limits.sms_countries),
                allowPremiumNumbers=report.limits.allow_premium_numbers,
                smsBudget=SmsBudgetModel(
                    dailySegments=report.limits.daily_sms_segments, usedToday=report.sms_segments_today
                )
                if report.limits.daily_sms_segments
                else None,
                retentionDays=retention,
            ),
        ),
    )


@router.handles(TEST_DELIVERIES)
def simulated_deliveries(
    messageId: Annotated[str | None, Query(description="Only this message's deliveries (msg_…)")] = None,
) -> Response[Any]:
    workspace = caller(router.context)
    # Before anything about the request is looked at: for a live key this route does not exist.
    if not is_test_workspace(workspace):
        raise not_found("Test deliveries are seen with a test key (sk_test_…) only.")
    if messageId is not None and not looks_like_message_id(messageId):
        raise validation_error([{"field": "messageId", "message": "must be a message id (msg_…)"}])
    deps = dependencies.root.get()
    if messageId is not None:
        deps.messages.get(workspace, messageId)  # 404 for a message that is not this twin's
    deliveries = deps.test_deliveries.deliveries(workspace, messageId)
    shown = [SimulatedDeliveryModel.of(delivery) for delivery in deliveries]
    return answer(200, SimulatedDeliveries(success=True, deliveries=shown))
