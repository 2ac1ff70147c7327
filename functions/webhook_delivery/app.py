"""Webhook delivery function: either lane's records side by side, a signed POST each, retried on schedule."""

from sendonce.startup import frozen_imports

with frozen_imports():
    from typing import Any

    from aws_lambda_powertools.utilities.typing import LambdaContext
    from sendonce.observability import logger, metrics
    from sendonce.webhooks.dependencies import delivery_root as root
    from sendonce.webhooks.handlers import handle_delivery_batch

__all__ = ["handler", "root"]


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle_delivery_batch(root.get(), event)
