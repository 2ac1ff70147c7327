"""The local stack's own secrets: the answers it gives the template's secret parameters.

`sam deploy` asks an operator for each secret parameter; the local stack answers them itself and
creates the template's secrets in the emulator, so the functions read them at run time as they do
when deployed. The HTTP provider token is random per start, and so is the webhook secret unless
SENDONCE_LOCAL_WEBHOOK_SECRET fixes it (to sign webhooks by hand across restarts). The provider
sandbox holds the same values: it checks the token, and signs its webhooks with the secret that
the banner prints.

A secret the template creates with GenerateSecretString (no SecretString, so no parameter to
answer) takes the local stack's own value when it has one for that logical id (Twilio's
credentials, `{"accountSid", "authToken"}`, which the sandbox's Twilio checks and signs its status
callbacks with), else a string generated as CloudFormation would: its SecretStringTemplate with
GenerateStringKey set to a random password.
"""

from __future__ import annotations

import json
import os
import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sendonce_local.intrinsics import Resolver
from sendonce_local.template import Template
from sendonce_local.twilio_sandbox import TwilioCredentials

# Names, not values.
WEBHOOK_SECRET_SETTING = "SENDONCE_LOCAL_WEBHOOK_SECRET"  # noqa: S105
WEBHOOK_SECRET_PARAMETER = "WebhookSecret"  # noqa: S105 - the template's secret parameters
HTTP_PROVIDER_TOKEN_PARAMETER = "HttpProviderToken"  # noqa: S105
TWILIO_CREDENTIALS_SECRET = "TwilioCredentialsSecret"  # noqa: S105 - a logical id
DEFAULT_PASSWORD_LENGTH = 32  # CloudFormation's default PasswordLength


@dataclass(frozen=True)
class LocalSecrets:
    webhook_secret: str = field(repr=False)
    http_provider_token: str = field(repr=False)
    twilio: TwilioCredentials = field(default_factory=TwilioCredentials.generate, repr=False)

    @classmethod
    def generate(cls, environ: Mapping[str, str] | None = None) -> LocalSecrets:
        env = os.environ if environ is None else environ
        return cls(
            webhook_secret=env.get(WEBHOOK_SECRET_SETTING) or secrets.token_urlsafe(32),
            http_provider_token=secrets.token_urlsafe(32),
            twilio=TwilioCredentials.generate(),
        )

    def generated(self) -> dict[str, str]:
        """The values of the template's generated secrets the local stack holds, by logical id."""
        credentials = {"accountSid": self.twilio.account_sid, "authToken": self.twilio.auth_token}
        return {TWILIO_CREDENTIALS_SECRET: json.dumps(credentials)}

    def parameters(self) -> dict[str, str]:
        """The values of the template's secret parameters, as `sam deploy` would be given them."""
        return {
            WEBHOOK_SECRET_PARAMETER: self.webhook_secret,
            HTTP_PROVIDER_TOKEN_PARAMETER: self.http_provider_token,
        }


def create_secrets(
    secretsmanager: Any, template: Template, resolver: Resolver, generated: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Every AWS::SecretsManager::Secret of the template, named by its logical id; their ARNs by id.
    `generated`: the local stack's values for secrets made with GenerateSecretString, by logical id."""
    arns: dict[str, str] = {}
    for secret in template.secrets:
        if "SecretString" not in secret.properties and "GenerateSecretString" in secret.properties:
            value = (generated or {}).get(secret.logical_id) or generate_secret_string(
                resolver.resolve(secret.properties["GenerateSecretString"])
            )
        else:
            value = resolver.resolve(secret.properties.get("SecretString"))
        if not isinstance(value, str) or not value:
            raise ValueError(f"{secret.logical_id}: the local stack has no value for its SecretString")
        created = secretsmanager.create_secret(Name=secret.logical_id, SecretString=value)
        arns[secret.logical_id] = str(created["ARN"])
    return arns


def generate_secret_string(spec: Any) -> str:
    """A value as CloudFormation's GenerateSecretString makes one: a random password (letters and
    digits; the exclusions beyond punctuation are not needed for that alphabet), alone or as
    GenerateStringKey of the SecretStringTemplate's JSON object."""
    if not isinstance(spec, dict):
        raise ValueError("GenerateSecretString must be a mapping")
    length = int(spec.get("PasswordLength") or DEFAULT_PASSWORD_LENGTH)
    alphabet = string.ascii_letters + string.digits
    password = "".join(secrets.choice(alphabet) for _ in range(length))
    template, key = spec.get("SecretStringTemplate"), spec.get("GenerateStringKey")
    if template is None or key is None:
        return password
    document = json.loads(str(template))
    if not isinstance(document, dict):
        raise ValueError("SecretStringTemplate must be a JSON object")
    document[str(key)] = password
    return json.dumps(document)
