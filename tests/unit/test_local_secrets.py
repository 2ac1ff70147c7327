"""sendonce_local: the local stack answers the template's secret parameters itself.

It creates the template's secrets in the emulator (the functions read them there, at run time),
gives the functions their names and never their values, and prints the webhook secret the
sandbox signs with.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from sendonce.adapters.secrets_manager import SecretsManagerSecret

from sendonce_local.deliveries import DeliveryLog
from sendonce_local.emulator import AwsEmulator, client, provision
from sendonce_local.environment import Ports, function_environment
from sendonce_local.intrinsics import Resolver
from sendonce_local.local_secrets import WEBHOOK_SECRET_SETTING, LocalSecrets, create_secrets
from sendonce_local.stack import LocalStack
from sendonce_local.template import Template, load_template, parse_template
from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def template() -> Template:
    return load_template(REPO / "template.yaml")


def _reset(emulator: AwsEmulator) -> None:
    """moto's state is one per process: leave none behind for the other emulator tests."""
    request = urllib.request.Request(f"{emulator.endpoint}/moto-api/reset", method="POST")
    urllib.request.urlopen(request, timeout=30).close()


@pytest.fixture(scope="module")
def aws() -> Iterator[AwsEmulator]:
    emulator = AwsEmulator("127.0.0.1", free_port(), DeliveryLog())
    emulator.start()
    _reset(emulator)
    try:
        yield emulator
    finally:
        _reset(emulator)
        emulator.stop()


def test_each_start_has_new_random_secrets_unless_the_webhook_secret_is_fixed() -> None:
    first, second = LocalSecrets.generate({}), LocalSecrets.generate({})

    assert first.webhook_secret != second.webhook_secret
    assert first.http_provider_token != second.http_provider_token
    assert min(len(first.webhook_secret), len(first.http_provider_token)) >= 32  # the template's minimum
    fixed = LocalSecrets.generate({WEBHOOK_SECRET_SETTING: "my-own-local-webhook-secret"})
    assert fixed.webhook_secret == "my-own-local-webhook-secret"
    assert "my-own" not in repr(fixed)


def test_the_functions_read_the_secrets_the_stack_created_and_hold_only_their_names(
    template: Template, aws: AwsEmulator
) -> None:
    secrets = LocalSecrets.generate({})
    ports = Ports(api=free_port(), aws=aws.port, sandbox=free_port())

    provision(template, aws.endpoint, "no-reply@sendonce.local", secrets)
    environment = function_environment(template, ports, environ={})

    assert environment["SENDONCE_PROVIDER_EVENTS_SECRET_ARN"] == "WebhookSigningSecret"
    assert environment["SENDONCE_HTTP_PROVIDER_TOKEN_ARN"] == "HttpProviderTokenSecret"
    values = {secrets.webhook_secret, secrets.http_provider_token}
    assert not values & set(environment.values())
    assert not any(
        name in environment for name in ("SENDONCE_WEBHOOK_SECRET", "SENDONCE_HTTP_PROVIDER_TOKEN")
    )

    def read(variable: str) -> str:
        return SecretsManagerSecret(environment[variable], lambda: client("secretsmanager", aws.endpoint))()

    assert read("SENDONCE_PROVIDER_EVENTS_SECRET_ARN") == secrets.webhook_secret
    assert read("SENDONCE_HTTP_PROVIDER_TOKEN_ARN") == secrets.http_provider_token


def test_a_secret_the_stack_has_no_value_for_is_an_error(tmp_path: Path, aws: AwsEmulator) -> None:
    snippet = parse_template(
        {
            "Parameters": {"OtherSecret": {"Type": "String", "NoEcho": True}},
            "Resources": {
                "Other": {
                    "Type": "AWS::SecretsManager::Secret",
                    "Properties": {"SecretString": {"Ref": "OtherSecret"}},
                }
            },
        },
        tmp_path,
    )
    resolver = Resolver(snippet, aws.endpoint, LocalSecrets.generate({}).parameters())

    with pytest.raises(ValueError, match="Other: the local stack has no value"):
        create_secrets(client("secretsmanager", aws.endpoint), snippet, resolver)


def test_the_banner_prints_the_webhook_secret(template: Template, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WEBHOOK_SECRET_SETTING, "a-fixed-local-webhook-secret")
    stack = LocalStack(template, Ports(api=3000, aws=5000, sandbox=3001))

    banner = stack.banner()

    (line,) = [line for line in banner.splitlines() if line.strip().startswith("webhook secret")]
    assert line.split() == ["webhook", "secret", "a-fixed-local-webhook-secret"]
    assert stack.secrets.http_provider_token not in banner
    assert "WebhookSigningSecret, HttpProviderTokenSecret" in banner
