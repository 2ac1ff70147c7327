"""The process environment every handler of the local stack runs with.

Order of precedence (last wins): the template's values, the local stack's defaults, whatever is
already set in the process environment. The AWS settings are always forced to the emulator, so a
local run can never reach a real AWS account. A local default that stands for a template parameter
(the sandbox's provider URLs) yields to a value the local stack gives that parameter, so that
`--parameter-overrides TwilioBaseUrl=...` is obeyed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field

from sendonce_cli.targets import HOST, LOCAL_LIMITS_CACHE_SECONDS, local_aws_port

from sendonce_local.constants import DEFAULT_API_PORT, DEFAULT_EMAIL_FROM, DEFAULT_SANDBOX_PORT, REGION
from sendonce_local.intrinsics import Resolver
from sendonce_local.template import Template

TWILIO_PORT_SETTING = "SENDONCE_SANDBOX_TWILIO_PORT"
HTTP_PROVIDER_PORT_SETTING = "SENDONCE_SANDBOX_HTTP_PROVIDER_PORT"
# The sandbox's providers listen next to it unless told otherwise (3002 and 3003 by default).
TWILIO_PORT_OFFSET = 1
HTTP_PROVIDER_PORT_OFFSET = 2


@dataclass(frozen=True)
class Ports:
    """`twilio` and `http_provider`: the sandbox's providers' own ports (0: next to the sandbox's)."""

    api: int
    aws: int
    sandbox: int
    twilio: int = field(default=0)
    http_provider: int = field(default=0)

    def __post_init__(self) -> None:
        if not self.twilio:
            object.__setattr__(self, "twilio", self.sandbox + TWILIO_PORT_OFFSET)
        if not self.http_provider:
            object.__setattr__(self, "http_provider", self.sandbox + HTTP_PROVIDER_PORT_OFFSET)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Ports:
        env = os.environ if environ is None else environ
        return cls(
            api=int(env.get("SENDONCE_API_PORT") or DEFAULT_API_PORT),
            aws=local_aws_port(env),
            sandbox=int(env.get("SENDONCE_SANDBOX_PORT") or DEFAULT_SANDBOX_PORT),
            twilio=int(env.get(TWILIO_PORT_SETTING) or 0),
            http_provider=int(env.get(HTTP_PROVIDER_PORT_SETTING) or 0),
        )

    @property
    def aws_endpoint(self) -> str:
        return f"http://{HOST}:{self.aws}"

    @property
    def api_url(self) -> str:
        return f"http://{HOST}:{self.api}"

    @property
    def sandbox_url(self) -> str:
        return f"http://{HOST}:{self.sandbox}"

    @property
    def twilio_url(self) -> str:
        return f"http://{HOST}:{self.twilio}"

    @property
    def http_provider_url(self) -> str:
        return f"http://{HOST}:{self.http_provider}"


def aws_settings(ports: Ports) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": ports.aws_endpoint,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }


# Limits that leave room for the stack's own end-to-end tests and bench storms (and still count
# every request and send); an override set with `sendonce workspace set-limits` is seen within a second
# (the CLI waits out the same cache: `sendonce_cli.targets`).
LOCAL_LIMITS = {
    "SENDONCE_RATE_LIMIT_PER_SECOND": "1000",
    "SENDONCE_DAILY_SEND_QUOTA": "1000000",
    "SENDONCE_LIMITS_CACHE_SECONDS": str(LOCAL_LIMITS_CACHE_SECONDS),
}


# The sandbox's providers, by the template parameter each local default stands for.
PARAMETER_OF_DEFAULT = {
    "SENDONCE_HTTP_PROVIDER_URL": "HttpProviderUrl",
    "SENDONCE_TWILIO_BASE_URL": "TwilioBaseUrl",
}


def sandbox_parameters(ports: Ports) -> dict[str, str]:
    """The values the local stack gives the template's provider URLs: the sandbox's providers, each
    on its own port (which a `refused` fault closes)."""
    return {"HttpProviderUrl": ports.http_provider_url, "TwilioBaseUrl": ports.twilio_url}


def local_defaults(ports: Ports) -> dict[str, str]:
    return {
        # The sandbox's main port, which still answers POST /messages; the local stack gives the
        # HttpProviderUrl parameter the provider's own port (`sandbox_parameters`), which wins.
        "SENDONCE_HTTP_PROVIDER_URL": ports.sandbox_url,
        "SENDONCE_TWILIO_BASE_URL": ports.twilio_url,
        # Twilio calls the API back; deployed, the template names the API's execute-api host.
        "SENDONCE_TWILIO_STATUS_CALLBACK_URL": f"{ports.api_url}/v1/webhooks/twilio",
        "SENDONCE_EMAIL_FROM": DEFAULT_EMAIL_FROM,
        # The README: locally, status webhooks reach receivers on this machine (http://127.0.0.1:<port>).
        "SENDONCE_WEBHOOK_ALLOW_PRIVATE_TARGETS": "true",
        **LOCAL_LIMITS,
    }


def template_variables(template: Template, resolver: Resolver) -> dict[str, str]:
    """The union of every function's resolved Environment (names agree across functions)."""
    variables: dict[str, str] = {}
    for function in template.functions.values():
        for name, raw in function.environment.items():
            value = resolver.as_env_value(raw)
            if value is not None:
                variables[name] = value
    return variables


def function_environment(
    template: Template,
    ports: Ports,
    environ: Mapping[str, str] | None = None,
    parameters: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The variables the local stack sets (before the process environment is applied); `parameters`:
    the values the local stack gives the template's parameters (`sendonce_local.parameters`)."""
    env = os.environ if environ is None else environ
    resolver = Resolver(template, ports.aws_endpoint, parameters)
    merged = template_variables(template, resolver)
    given = parameters or {}
    merged.update(
        {
            name: value
            for name, value in local_defaults(ports).items()
            if PARAMETER_OF_DEFAULT.get(name) not in given
        }
    )
    merged.update({name: value for name, value in env.items() if name in merged})
    merged.update(aws_settings(ports))
    return merged


def apply_environment(variables: Mapping[str, str], environ: MutableMapping[str, str] | None = None) -> None:
    env = os.environ if environ is None else environ
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        env.pop(name, None)
    env.update(variables)
