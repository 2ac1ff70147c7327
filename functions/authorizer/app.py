"""Authorizer function: resolves a bearer API key to its workspace."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from sendonce.auth.authorizer import authorize
from sendonce.auth.dependencies import root


def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return authorize(root.get, event)
