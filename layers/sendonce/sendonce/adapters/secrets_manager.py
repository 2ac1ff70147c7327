"""Secrets Manager secrets, read at run time through Powertools' parameters utility and cached.

The value is fetched on first use and kept for `MAX_AGE_SECONDS`: a rotated secret is picked up
without a redeploy, and a cold start pays for neither the utility (it imports boto3) nor the read
until a secret is needed. The client is made by the composition root, so its timeouts bound a read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sendonce.secret_values import SecretUnavailable

MAX_AGE_SECONDS = 300


class SecretsManagerSecret:
    """`Secret` for one secret id (ARN or name): its current value, or SecretUnavailable."""

    def __init__(
        self, secret_id: str, make_client: Callable[[], Any], max_age_seconds: int = MAX_AGE_SECONDS
    ) -> None:
        self._secret_id = secret_id
        self._make_client = make_client
        self._max_age = max_age_seconds
        self._provider: Any = None

    def __call__(self) -> str:
        if not self._secret_id:
            raise SecretUnavailable("no secret is configured")
        try:
            value = self._cache().get(self._secret_id, max_age=self._max_age)
        except Exception as error:  # the read failed, however: never a reason to accept or reject
            raise SecretUnavailable(f"the secret could not be read ({type(error).__name__})") from error
        if not isinstance(value, str) or not value:
            raise SecretUnavailable("the secret holds no text")
        return value

    def _cache(self) -> Any:
        if self._provider is None:
            from aws_lambda_powertools.utilities.parameters import SecretsProvider  # noqa: PLC0415

            self._provider = SecretsProvider(boto3_client=self._make_client())
        return self._provider
