"""ErasureFunction: runs erasures (`sendonce.erasures.service`) from the ErasureQueue, and every
minute queues again the pending erasures whose job was lost (its sweep), so an accepted erasure is
never left pending.

A job's record fails alone when its run raises; SQS brings it back after its visibility timeout, and
the run goes on from the progress it recorded.
"""

from __future__ import annotations

import json
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from sendonce.adapters.dynamodb_erasure_traces import DynamoDbTraceEraser
from sendonce.adapters.dynamodb_erasures import DynamoDbErasureStore
from sendonce.adapters.sqs_erasure_queue import SqsErasureQueue, job_of
from sendonce.api.idempotency import BATCH_KEY_PREFIX, KEY_PREFIX
from sendonce.aws_clients import Clients, client
from sendonce.composition import Root
from sendonce.entrypoints.shared.hashing_key import deployment_keyed_hash
from sendonce.entrypoints.shared.sending_store import charged_sending_store
from sendonce.entrypoints.shared.sqs_batches import SqsRecord, process_batch, read_record
from sendonce.erasures.ports import ErasureJob, RecipientPage
from sendonce.erasures.service import ErasureRunner
from sendonce.errors import QueueUnavailable
from sendonce.limits.model import Limits
from sendonce.messages.ports import Deliverable, Handoff, MessageFilter
from sendonce.messages.service import MessageService
from sendonce.observability import logger, metrics
from sendonce.settings import ErasureSettings

if TYPE_CHECKING:
    from collections.abc import Sequence

    from aws_lambda_powertools.utilities.typing import LambdaContext

# Messages read a page: each is canceled and erased before the page's progress is recorded.
PAGE_SIZE = 50


class _NoHandOff:
    """An erasure cancels and never hands a message over: the cancel use case's queue is unused."""

    def enqueue(self, message: Deliverable, delay_seconds: int = 0) -> None:
        raise QueueUnavailable("an erasure hands no message over")

    def enqueue_batch(self, handoffs: Sequence[Handoff]) -> list[Handoff]:
        return list(handoffs)


def build(settings: ErasureSettings, clients: Clients) -> ErasureRunner:
    dynamodb = clients("dynamodb")
    keyed_hash = deployment_keyed_hash(settings.hashing_key_arn, clients)
    store, limits = charged_sending_store(
        dynamodb,
        messages_table=settings.messages_table,
        retention_days=settings.message_retention_days,
        # A cancel charges no quota and gives none back: no limits table, so these are never read.
        limits_table="",
        defaults=Limits(rate_per_second=1, daily_quota=0),
        cache_seconds=0,
        keyed_hash=keyed_hash,
    )
    messages = MessageService(
        store=store,
        queue=_NoHandOff(),
        dedup_window=timedelta(seconds=settings.dedup_window_seconds),
        limits=limits,
    )
    return ErasureRunner(
        store=DynamoDbErasureStore(dynamodb, settings.messages_table),
        queue=SqsErasureQueue(clients("sqs"), settings.erasure_queue_url),
        eraser=DynamoDbTraceEraser(
            dynamodb,
            messages_table=settings.messages_table,
            webhooks_table=settings.webhooks_table,
            idempotency_table=settings.idempotency_table,
            idempotency_key_prefix=KEY_PREFIX,
            batch_key_prefix=BATCH_KEY_PREFIX,
            keyed_hash=keyed_hash,
        ),
        messages=partial(_recipient_page, messages),
        cancel=messages.cancel,
    )


def _recipient_page(
    messages: MessageService, workspace_id: str, key: str, cursor: str | None
) -> RecipientPage:
    page = messages.list(workspace_id, MessageFilter(recipient=key), PAGE_SIZE, cursor)
    return RecipientPage(page.messages, page.next_cursor)


root: Root[ErasureRunner] = Root(lambda: build(ErasureSettings.from_environment(), client))


def _job(body: str) -> ErasureJob:
    work = json.loads(body)
    if not isinstance(work, dict):
        raise ValueError("not an erasure's job")
    return job_of(work)


def handle_batch(runner: ErasureRunner, event: Any, context: LambdaContext) -> dict[str, Any]:
    def handle(record: SqsRecord) -> str:
        job = read_record(record, _job, ValueError, "erasure.job.unreadable_record")
        try:
            outcome = runner.run(job, lambda: context.get_remaining_time_in_millis() / 1000)
        except Exception:
            logger.exception(
                "erasure.job.failed",
                extra={
                    "event": "erasure.job.failed",
                    "erasure_id": job.erasure_id,
                    "sqs_message_id": record.message_id,
                },
            )
            raise
        metrics.add_metric(name="ErasureRun", unit="Count", value=1)
        return outcome.value

    return process_batch(event, handle)


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    runner = root.get()
    if isinstance(event, dict) and "Records" in event:
        return handle_batch(runner, event, context)
    # The every-minute schedule: its event carries nothing to read.
    return {"requeued": runner.sweep()}
