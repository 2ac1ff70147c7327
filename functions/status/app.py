"""Status function: applies provider delivery events (webhooks, SES notifications) once each."""

from sendonce.startup import frozen_imports

with frozen_imports():
    from typing import Any

    from aws_lambda_powertools.utilities.typing import LambdaContext
    from sendonce.observability import logger, metrics
    from sendonce.provider_events.dependencies import root
    from sendonce.provider_events.sqs_batch import handle_batch


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle_batch(root.get(), event)
