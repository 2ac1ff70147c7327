"""One Logger and one Metrics for the whole package, configured by Powertools' environment variables."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics

logger = Logger(service="sendonce")
metrics = Metrics(namespace="sendonce", service="sendonce")
