"""The local stack's own secrets: the answers it gives the template's secret parameters.

`sam deploy` asks an operator for each secret parameter; the local stack answers them itself and
creates the template's secrets in the emulator, so the functions read them at run time as they do
when deployed. The HTTP provider token is random per start, and so is the webhook secret unless
SENDONCE_LOCAL_WEBHOOK_SECRET fixes it (to sign webhooks by hand across restarts). The provider
sandbox holds the same values: it checks the token, and signs its webhooks with the secret that
the banner prints.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sendonce_local.intrinsics import Resolver
from sendonce_local.template import Template

# Names, not values.
WEBHOOK_SECRET_SETTING = "SENDONCE_LOCAL_WEBHOOK_SECRET"  # noqa: S105
WEBHOOK_SECRET_PARAMETER = "WebhookSecret"  # noqa: S105 - the template's secret parameters
HTTP_PROVIDER_TOKEN_PARAMETER = "HttpProviderToken"  # noqa: S105


@dataclass(frozen=True)
class LocalSecrets:
    webhook_secret: str = field(repr=False)
    http_provider_token: str = field(repr=False)

    @classmethod
    def generate(cls, environ: Mapping[str, str] | None = None) -> LocalSecrets:
        env = os.environ if environ is None else environ
        return cls(
            webhook_secret=env.get(WEBHOOK_SECRET_SETTING) or secrets.token_urlsafe(32),
            http_provider_token=secrets.token_urlsafe(32),
        )

    def parameters(self) -> dict[str, str]:
        """The values of the template's secret parameters, as `sam deploy` would be given them."""
        return {
            WEBHOOK_SECRET_PARAMETER: self.webhook_secret,
            HTTP_PROVIDER_TOKEN_PARAMETER: self.http_provider_token,
        }


def create_secrets(secretsmanager: Any, template: Template, resolver: Resolver) -> dict[str, str]:
    """Every AWS::SecretsManager::Secret of the template, named by its logical id; their ARNs by id."""
    arns: dict[str, str] = {}
    for secret in template.secrets:
        value = resolver.resolve(secret.properties.get("SecretString"))
        if not isinstance(value, str) or not value:
            raise ValueError(f"{secret.logical_id}: the local stack has no value for its SecretString")
        created = secretsmanager.create_secret(Name=secret.logical_id, SecretString=value)
        arns[secret.logical_id] = str(created["ARN"])
    return arns
