"""Message changes function: each committed status change of a message, from the table's stream,
becomes exactly one event, and a delivery for each endpoint that wants it."""

from sendonce.startup import frozen_imports

with frozen_imports():
    from typing import Any

    from aws_lambda_powertools.utilities.typing import LambdaContext
    from sendonce.observability import logger, metrics
    from sendonce.webhooks.dependencies import recorder_root as root
    from sendonce.webhooks.handlers import handle_stream_batch

__all__ = ["handler", "root"]


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle_stream_batch(root.get(), event)
