"""API function: the HTTP API of sendonce (v1)."""

from sendonce.startup import frozen_imports

with frozen_imports():
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from sendonce.api.app import handle
    from sendonce.api.dependencies import root
    from sendonce.observability import logger, metrics


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict, context: LambdaContext) -> dict:
    return handle(event, context)


__all__ = ["handler", "root"]
