"""CampaignFunction: the fan-out of campaigns, from the CampaignQueue: a plan reads a list once and
hands its pages out, a page sends its recipients, a sweep cancels a canceled campaign's waiting
messages (`sendonce.campaigns.fanout`). A record fails alone when its work raises, and SQS brings it
back after its visibility timeout; its work goes on from the progress written before.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sendonce.adapters.dynamodb_campaigns import DynamoDbCampaignPace, DynamoDbCampaignStore
from sendonce.adapters.dynamodb_suppressions import DynamoDbSuppressionStore
from sendonce.adapters.s3_recipients import S3RecipientFiles
from sendonce.adapters.sqs_campaign_work import SqsCampaignWork, page_of
from sendonce.api.campaign_lines import parse_line, recipient_key, refusal
from sendonce.aws_clients import Clients, client
from sendonce.campaigns.fanout import FanOut
from sendonce.composition import Root
from sendonce.entrypoints.shared.hashing_key import deployment_keyed_hash
from sendonce.entrypoints.shared.sending_store import charged_sending_store
from sendonce.entrypoints.shared.sqs_batches import SqsRecord, process_batch, read_record
from sendonce.limits.model import Limits, sms_countries
from sendonce.messages.batch import BatchSender
from sendonce.observability import logger, metrics
from sendonce.settings import CampaignSettings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext


def build(settings: CampaignSettings, clients: Clients) -> FanOut:
    dynamodb = clients("dynamodb")
    keyed_hash = deployment_keyed_hash(settings.hashing_key_arn, clients)
    store, limits = charged_sending_store(
        dynamodb,
        messages_table=settings.messages_table,
        retention_days=settings.message_retention_days,
        limits_table=settings.limits_table,
        defaults=Limits(
            settings.rate_limit_per_second,
            settings.daily_send_quota,
            sms_countries=sms_countries(settings.sms_allowed_countries),
            daily_sms_segments=settings.daily_sms_segments,
        ),
        cache_seconds=settings.limits_cache_seconds,
        keyed_hash=keyed_hash,
    )
    sender = BatchSender(
        store=store,
        dedup_window=timedelta(seconds=settings.dedup_window_seconds),
        limits=limits,
        suppressions=DynamoDbSuppressionStore(dynamodb, settings.messages_table, keyed_hash),
        templates=_templates(settings, dynamodb),
    )
    return FanOut(
        store=DynamoDbCampaignStore(dynamodb, settings.messages_table),
        files=S3RecipientFiles(clients("s3"), settings.campaigns_bucket),
        work=SqsCampaignWork(clients("sqs"), settings.campaign_queue_url),
        pace=DynamoDbCampaignPace(dynamodb, settings.limits_table),
        send=sender.send_many,
        parse=parse_line,
        recipient_key=recipient_key,
        refusal=refusal,
        messages=store,
        sleep=time.sleep,
    )


def _templates(settings: CampaignSettings, dynamodb: Any) -> Callable[[], Any]:
    """The templates' service, built with the first campaign from a template."""
    built: list[Any] = []

    def templates() -> Any:
        if not built:
            from sendonce.adapters.dynamodb_templates import DynamoDbTemplateStore  # noqa: PLC0415
            from sendonce.adapters.forked_renderer import ForkedRenderer  # noqa: PLC0415
            from sendonce.templates.service import TemplateService  # noqa: PLC0415

            built.append(
                TemplateService(DynamoDbTemplateStore(dynamodb, settings.messages_table), ForkedRenderer())
            )
        return built[0]

    return templates


root: Root[FanOut] = Root(lambda: build(CampaignSettings.from_environment(), client))


def _work(body: str) -> dict[str, Any]:
    work = json.loads(body)
    if not isinstance(work, dict) or work.get("kind") not in ("plan", "page", "sweep"):
        raise ValueError("not a campaign's work")
    return work


def run_work(fan_out: FanOut, record: SqsRecord) -> str:
    work = read_record(record, _work, ValueError, "campaign.work.unreadable_record")
    kind = str(work["kind"])
    if kind == "plan":
        fan_out.plan(str(work["workspaceId"]), str(work["campaignId"]))
    elif kind == "page":
        fan_out.run_page(page_of(work))
    else:
        cursor = work.get("cursor")
        fan_out.sweep(
            str(work["workspaceId"]), str(work["campaignId"]), cursor if isinstance(cursor, str) else None
        )
    metrics.add_metric(name=f"CampaignWork{kind.capitalize()}", unit="Count", value=1)
    return kind


def handle_batch(fan_out: FanOut, event: Any) -> dict[str, Any]:
    def handle(record: SqsRecord) -> str:
        try:
            return run_work(fan_out, record)
        except Exception:
            logger.exception(
                "campaign.work.failed",
                extra={"event": "campaign.work.failed", "sqs_message_id": record.message_id},
            )
            raise

    return process_batch(event, handle)


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    from msgspec.structs import replace  # noqa: PLC0415

    fan_out = replace(root.get(), time_left=lambda: context.get_remaining_time_in_millis() / 1000)
    return handle_batch(fan_out, event)
