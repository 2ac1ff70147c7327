"""Handoff function: each message created in the MessagesTable, from the table's stream, goes to its
channel's queue, so the request that created it makes one call."""

from sendonce.startup import frozen_imports

with frozen_imports():
    from typing import Any

    from aws_lambda_powertools.utilities.typing import LambdaContext
    from sendonce.delivery.dependencies import handoff_root as root
    from sendonce.delivery.stream_handoff import hand_off_batch
    from sendonce.observability import logger, metrics

__all__ = ["handler", "root"]


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return hand_off_batch(root.get(), event)
