"""Dispatcher function: delivers queued sms messages, at most once each."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from sendonce.delivery.sqs_batch import handle_batch
from sendonce.messages.model import Channel
from sendonce.observability import logger, metrics


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle_batch(Channel.SMS, event, context)
