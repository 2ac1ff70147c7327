"""The values the local stack gives the template's parameters: its own, then the ones it is told.

`sendonce run --parameter-overrides Name=Value ...` gives a parameter a value, as `sam deploy
--parameter-overrides` would; so does SENDONCE_LOCAL_PARAMETER_OVERRIDES (the same words, for
harnesses that start the stack), which the command line's override. A name the template does not
declare, a value its rules refuse (a Number's MinValue and MaxValue, AllowedValues, AllowedPattern,
MinLength and MaxLength) or a secret parameter (NoEcho: the local stack answers those itself,
`local_secrets`) stops the start with the reason. A parameter nobody names takes LOCAL_PARAMETERS'
value (or, given the ports, the sandbox's provider URLs: `environment.sandbox_parameters`), else its
Default (`intrinsics.Resolver`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from sendonce_local.environment import Ports, sandbox_parameters
from sendonce_local.template import Template

OVERRIDES_SETTING = "SENDONCE_LOCAL_PARAMETER_OVERRIDES"
# One machine, shared by every function and the emulator: each queue is read by 3 invocations at a
# time, as the local stack always did, where a deployed stack takes its event sources' defaults.
# The webhook slow lane runs 2: with the fast lane's 3, the delivery function runs at most 5 at once.
# Twilio is the sandbox: it lists what it accepted at once (so a lost answer is asked about after
# 1 s), and sends from Twilio's own test number for a valid sender.
LOCAL_PARAMETERS = {
    "DispatcherMaxConcurrency": "3",
    "WebhookDeliveryMaxConcurrency": "3",
    "WebhookSlowLaneMaxConcurrency": "2",
    "TwilioVisibilitySeconds": "1",
    "TwilioFrom": "+15005550006",
}


class InvalidParameter(ValueError):
    pass


def parse_overrides(words: Iterable[str]) -> dict[str, str]:
    """`Name=Value` words (a word may hold several, space-separated) as a mapping; the last wins."""
    values: dict[str, str] = {}
    for word in (part for text in words for part in text.split()):
        name, equals, value = word.partition("=")
        if not equals or not name:
            raise InvalidParameter(f"{word!r} is not Name=Value")
        values[name] = value
    return values


def check(template: Template, values: Mapping[str, str]) -> None:
    """Raises InvalidParameter for a name the template lacks or a value its parameter refuses."""
    for name, value in values.items():
        declared = template.parameters.get(name)
        if not isinstance(declared, dict):
            known = ", ".join(sorted(template.parameters))
            raise InvalidParameter(f"the template has no parameter {name} (it has {known})")
        if declared.get("NoEcho"):
            raise InvalidParameter(f"{name} is a secret: the local stack gives it its own value")
        reason = _refused(declared, value)
        if reason:
            raise InvalidParameter(f"{name}={value}: {reason}")


def _refused(declared: dict[str, Any], value: str) -> str | None:
    allowed = declared.get("AllowedValues")
    if allowed is not None and value not in [str(item) for item in allowed]:
        return f"not one of {', '.join(str(item) for item in allowed)}"
    if declared.get("Type") == "Number":
        try:
            number = float(value)
        except ValueError:
            return "not a number"
        if "MinValue" in declared and number < float(declared["MinValue"]):
            return f"less than its MinValue {declared['MinValue']}"
        if "MaxValue" in declared and number > float(declared["MaxValue"]):
            return f"more than its MaxValue {declared['MaxValue']}"
        return None
    pattern = declared.get("AllowedPattern")
    if pattern is not None and not re.fullmatch(str(pattern), value):
        return f"does not match {pattern}"
    if "MinLength" in declared and len(value) < int(declared["MinLength"]):
        return f"shorter than its MinLength {declared['MinLength']}"
    if "MaxLength" in declared and len(value) > int(declared["MaxLength"]):
        return f"longer than its MaxLength {declared['MaxLength']}"
    return None


def overridden(environ: Mapping[str, str] | None = None, words: Iterable[str] = ()) -> dict[str, str]:
    """The overrides asked for: the environment's, then the command line's on top."""
    env = os.environ if environ is None else environ
    return {**parse_overrides([env.get(OVERRIDES_SETTING) or ""]), **parse_overrides(words)}


def local_parameters(
    template: Template, overrides: Mapping[str, str], ports: Ports | None = None
) -> dict[str, str]:
    """Every value the local stack gives a parameter (LOCAL_PARAMETERS the template declares, the
    sandbox's provider URLs when `ports` are given, then `overrides`, checked); the rest take their
    Default."""
    check(template, overrides)
    own = {**LOCAL_PARAMETERS, **(sandbox_parameters(ports) if ports is not None else {})}
    return {**{name: value for name, value in own.items() if name in template.parameters}, **overrides}
