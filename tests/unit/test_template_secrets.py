"""The deployed shape of the secrets (the README, Deploy), read from template.yaml.

No secret parameter has a default, each is NoEcho with a minimum length of 32, and each lives in
a Secrets Manager secret. A function gets a secret's ARN in its environment, never its value, and
may read exactly the secrets it is given, nothing else.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from sendonce_local.template import SECRET_TYPE, Template, load_template, references

REPO = Path(__file__).resolve().parents[2]
SECRET_PARAMETERS = {"WebhookSecret": "WebhookSigningSecret", "HttpProviderToken": "HttpProviderTokenSecret"}
# Who needs which secret: the webhook verifies signatures, the dispatchers call the HTTP provider.
# Who makes a lock, a key tie or a suppression key (sendonce.keyed_hash): the hashing key.
HASHING = {"SENDONCE_HASHING_KEY_ARN": "HashingKeySecret"}
READERS = {
    "ApiFunction": {
        "SENDONCE_PROVIDER_EVENTS_SECRET_ARN": "WebhookSigningSecret",
        "SENDONCE_TWILIO_CREDENTIALS_ARN": "TwilioCredentialsSecret",  # its callbacks' signatures
        **HASHING,
    },
    "DispatchSmsFunction": {
        "SENDONCE_HTTP_PROVIDER_TOKEN_ARN": "HttpProviderTokenSecret",
        "SENDONCE_TWILIO_CREDENTIALS_ARN": "TwilioCredentialsSecret",
        **HASHING,
    },
    "DispatchImessageFunction": {"SENDONCE_HTTP_PROVIDER_TOKEN_ARN": "HttpProviderTokenSecret", **HASHING},
    "DispatchEmailFunction": {"SENDONCE_HTTP_PROVIDER_TOKEN_ARN": "HttpProviderTokenSecret", **HASHING},
    "StatusFunction": HASHING,  # the suppression entries provider events make
    "CampaignFunction": HASHING,  # its messages' locks and suppression checks
    "ErasureFunction": HASHING,  # a cancel's lock, the recipient's suppression entry
}
SECRET_LOOKING_NAME = re.compile(r"secret|token|password|credential|private", re.IGNORECASE)


@pytest.fixture(scope="module")
def template() -> Template:
    return load_template(REPO / "template.yaml")


def _no_echo_parameters(template: Template) -> set[str]:
    return {name for name, spec in template.parameters.items() if str(spec.get("NoEcho")).lower() == "true"}


def _statements(template: Template, function_id: str) -> list[dict[str, Any]]:
    policies = template.resources[function_id]["Properties"].get("Policies") or []
    statements: list[dict[str, Any]] = []
    for policy in policies if isinstance(policies, list) else [policies]:
        if isinstance(policy, dict) and "Statement" in policy:
            found = policy["Statement"]
            statements.extend(found if isinstance(found, list) else [found])
    return statements


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement.get("Action") or []
    return [str(action) for action in (actions if isinstance(actions, list) else [actions])]


def _secret_reads(template: Template, function_id: str) -> list[dict[str, Any]]:
    return [
        statement
        for statement in _statements(template, function_id)
        if statement.get("Effect") == "Allow"
        and any(
            action.lower().startswith("secretsmanager:") or action == "*" for action in _actions(statement)
        )
    ]


@pytest.mark.parametrize("name", sorted(SECRET_PARAMETERS))
def test_a_secret_parameter_has_no_default_is_no_echo_and_at_least_32_characters(
    template: Template, name: str
) -> None:
    spec = template.parameters[name]

    assert "Default" not in spec, f"{name} has a default: `sam deploy` would not ask for it"
    assert str(spec.get("NoEcho")).lower() == "true"
    assert int(spec.get("MinLength", 0)) >= 32


def test_every_parameter_that_looks_secret_is_one_of_them(template: Template) -> None:
    looking = {name for name in template.parameters if SECRET_LOOKING_NAME.search(name)}

    assert looking <= set(SECRET_PARAMETERS), "a new secret parameter needs the same rules and a test"
    assert set(SECRET_PARAMETERS) <= _no_echo_parameters(template)
    for name in _no_echo_parameters(template):
        assert "Default" not in template.parameters[name], name


@pytest.mark.parametrize(("parameter", "secret"), sorted(SECRET_PARAMETERS.items()))
def test_each_secret_parameter_is_kept_in_its_secrets_manager_secret(
    template: Template, parameter: str, secret: str
) -> None:
    assert template.resource_type(secret) == SECRET_TYPE
    assert template.resources[secret]["Properties"]["SecretString"] == {"Ref": parameter}


def test_twilios_credentials_are_generated_never_defaulted(template: Template) -> None:
    """No parameter asks every deployment for a Twilio token: the secret starts with a random token
    no account has (so a call is refused, never sent as someone), and the operator sets the real one."""
    properties = template.resources["TwilioCredentialsSecret"]["Properties"]

    assert "SecretString" not in properties
    generated = properties["GenerateSecretString"]
    assert generated["GenerateStringKey"] == "authToken"
    assert int(generated["PasswordLength"]) >= 32


def test_no_environment_holds_a_secret_value(template: Template) -> None:
    """Globals included: a NoEcho parameter reaches no function's environment, by !Ref or !Sub."""
    secret_values = _no_echo_parameters(template)

    for function_id, function in template.functions.items():
        for variable, value in function.environment.items():
            leaked = set(references(value)) & secret_values
            assert not leaked, f"{function_id}.{variable} holds the value of {leaked}"


@pytest.mark.parametrize("function_id", sorted(READERS))
def test_a_reader_gets_the_secrets_arn_and_may_read_exactly_that_secret(
    template: Template, function_id: str
) -> None:
    environment = template.functions[function_id].environment
    for variable, secret in READERS[function_id].items():
        assert environment[variable] == {"Ref": secret}  # !Ref of a secret is its ARN

    reads = _secret_reads(template, function_id)

    assert len(reads) == 1, reads
    assert _actions(reads[0]) == ["secretsmanager:GetSecretValue"]
    resources = reads[0]["Resource"]
    resources = resources if isinstance(resources, list) else [resources]
    assert resources == [{"Ref": secret} for secret in sorted(set(READERS[function_id].values()))]


def test_no_other_function_may_read_a_secret(template: Template) -> None:
    for function_id in set(template.functions) - set(READERS):
        assert _secret_reads(template, function_id) == [], function_id
        leaked = set(references(template.functions[function_id].environment)) & {
            *SECRET_PARAMETERS.values(),
            "TwilioCredentialsSecret",
            "HashingKeySecret",
        }
        assert not leaked, f"{function_id} names {leaked} without needing it"
