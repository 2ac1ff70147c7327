"""Outbox function: every minute, hands over what is owed to a queue and recovers dead attempts.

The sweep drains what is due until its invocation's time runs short, so it never is cut off mid-move.
"""

from sendonce.startup import frozen_imports

with frozen_imports():
    from typing import Any

    from aws_lambda_powertools.utilities.typing import LambdaContext
    from sendonce.delivery.dependencies import outbox_root as root
    from sendonce.observability import logger, metrics


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    return root.get().sweep(time_left=lambda: context.get_remaining_time_in_millis() / 1000)
