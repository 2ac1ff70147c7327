"""OutboxFunction: every minute, hands over what is owed to a queue and recovers dead attempts.

The sweep (`sendonce.dispatch.outbox`) drains what is due until its invocation's time runs short, so
it never is cut off mid-move.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sendonce.adapters.dynamodb_outbox import DynamoDbOutboxStore
from sendonce.adapters.sqs_queue import SqsMessageQueue
from sendonce.aws_clients import Clients, client
from sendonce.clock import Clock, utc_now
from sendonce.composition import Root
from sendonce.dispatch.outbox import OutboxSweeper
from sendonce.entrypoints.shared.provider_registry import Providers
from sendonce.observability import logger, metrics
from sendonce.settings import DispatcherSettings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext


def build(settings: DispatcherSettings, clients: Clients, clock: Clock = utc_now) -> OutboxSweeper:
    return OutboxSweeper(
        store=DynamoDbOutboxStore(clients("dynamodb"), settings.messages_table),
        queue=SqsMessageQueue(clients("sqs"), settings.queue_urls),
        provider_honours_key=Providers.of(settings, clients).honour_idempotency_key,
        clock=clock,
    )


root: Root[OutboxSweeper] = Root(lambda: build(DispatcherSettings.from_environment(), client))


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    return root.get().sweep(time_left=lambda: context.get_remaining_time_in_millis() / 1000)
