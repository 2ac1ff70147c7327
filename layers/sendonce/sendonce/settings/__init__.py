"""Typed settings, one class per function, checked when its composition root is built.

This package is the only place that reads the environment. Per-channel settings are named after
the channels of `sendonce.channels` (`<NAME>_QUEUE_URL`, `SENDONCE_<NAME>_PROVIDER`), so a
channel added there has its settings here with no new field.

They are plain dataclasses, each field naming its variable and how its value is read: reading a
handful of strings needs no validation library, and a function that validates no request body
imports none. `variables()` lists what a class reads, with each default: template.yaml sets them
on the functions that read them, and the README's Settings table documents them
(tests/unit/test_settings_agree.py holds the three together).

Each function's class is in a module of its own here (`CLASSES`), imported when the class is first
named (`from sendonce.settings import ApiSettings`): a function builds its own class only, where
building a dataclass costs about half a millisecond of a cold start.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from importlib import import_module
from typing import TYPE_CHECKING, Any, Self

from sendonce import channels

if TYPE_CHECKING:
    from sendonce.settings.api import ApiSettings
    from sendonce.settings.campaigns import CampaignSettings
    from sendonce.settings.dispatcher import DispatcherSettings
    from sendonce.settings.erasures import ErasureSettings
    from sendonce.settings.events import EventsSettings
    from sendonce.settings.handoff import HandoffSettings
    from sendonce.settings.message_changes import MessageChangesSettings
    from sendonce.settings.webhook_delivery import WebhookDeliverySettings

__all__ = [
    "CLASSES",
    "LIMITS_CACHE_MAX_SECONDS",
    "ApiSettings",
    "CampaignSettings",
    "DispatcherSettings",
    "ErasureSettings",
    "EventsSettings",
    "EveryChannelsQueue",
    "FunctionSettings",
    "HandoffSettings",
    "InvalidSettings",
    "MessageChangesSettings",
    "WebhookDeliverySettings",
]

# Each function's settings class, by name, and its module in this package.
CLASSES = {
    "ApiSettings": "api",
    "CampaignSettings": "campaigns",
    "DispatcherSettings": "dispatcher",
    "ErasureSettings": "erasures",
    "HandoffSettings": "handoff",
    "EventsSettings": "events",
    "MessageChangesSettings": "message_changes",
    "WebhookDeliverySettings": "webhook_delivery",
}


def __getattr__(name: str) -> Any:
    """A function's settings class, its module imported when the class is first named."""
    module = CLASSES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)


# sendonce.limits.model.MAX_CACHE_SECONDS, which a change of the limits waits out (a test holds the
# two equal; importing the model here would put it on every function's cold start).
LIMITS_CACHE_MAX_SECONDS = 5


class InvalidSettings(ValueError):
    """The environment gives a function settings it cannot run with; each problem names its variable."""


class Unreadable(ValueError):
    pass


def text(min_length: int = 0) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if len(value) < min_length:
            raise Unreadable("must not be empty")
        return value

    return parse


def integer(minimum: int | None = None, maximum: int | None = None) -> Callable[[str], int]:
    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise Unreadable(f"must be a whole number, not {value!r}") from None
        if minimum is not None and number < minimum:
            raise Unreadable(f"must be at least {minimum}")
        if maximum is not None and number > maximum:
            raise Unreadable(f"must be at most {maximum}")
        return number

    return parse


def seconds(above: float, maximum: float) -> Callable[[str], float]:
    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            raise Unreadable(f"must be a number of seconds, not {value!r}") from None
        if not above < number <= maximum:  # also refuses nan
            raise Unreadable(f"must be more than {above:g} and at most {maximum:g}")
        return number

    return parse


_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


def flag(value: str) -> bool:
    folded = value.strip().lower()
    if folded in _TRUE | _FALSE:
        return folded in _TRUE
    raise Unreadable(f"must be true or false, not {value!r}")


def setting(variable: str, parse: Callable[[str], Any], default: Any = MISSING) -> Any:
    """A field read from `variable` (required when it has no default)."""
    return field(default=default, metadata={"variable": variable, "parse": parse})


def countries(value: str) -> str:
    """ISO 3166 alpha-2 codes, comma-separated, such as US,CA (empty: every country); checked, and
    given as `limits.model.sms_countries` reads them back: upper-case, sorted, each once."""
    from sendonce.limits.model import sms_countries  # noqa: PLC0415  # read by the functions that send

    try:
        return ",".join(sms_countries(value))
    except ValueError as error:
        raise Unreadable(str(error)) from None


# The protections' defaults (CONTRACT section 18), unless a workspace's own: each declared once
# here, a field of every function that sends.
def sms_allowed_countries_setting() -> Any:
    """Where a workspace's sms (and iMessage to a phone number) may go: every country when empty."""
    return setting("SENDONCE_SMS_ALLOWED_COUNTRIES", countries, "")


def daily_sms_segments_setting() -> Any:
    """The sms segments a workspace may send a UTC day (0: no budget)."""
    return setting("SENDONCE_DAILY_SMS_SEGMENTS", integer(minimum=0, maximum=1_000_000_000), 0)


def queue_urls(environ: Mapping[str, str]) -> dict[str, str]:
    """Every registered channel's queue URL that the environment names."""
    return {
        spec.name: environ[spec.queue_url_setting]
        for spec in channels.all_specs()
        if environ.get(spec.queue_url_setting)
    }


@dataclass(frozen=True)
class FunctionSettings:
    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Self:
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        problems: list[str] = []
        for each in fields(cls):
            variable = each.metadata.get("variable")
            if variable is None:
                continue  # derived from the environment as a whole: see _derived
            if variable not in environ:
                if each.default is MISSING:
                    problems.append(f"{variable}: is required")
                continue
            try:
                values[each.name] = each.metadata["parse"](environ[variable])
            except Unreadable as problem:
                problems.append(f"{variable}: {problem}")
        try:
            values.update(cls._derived(environ))
        except Unreadable as problem:
            problems.append(str(problem))
        if problems:
            raise InvalidSettings(f"{cls.__name__}: {'; '.join(problems)}")
        return cls(**values)

    @classmethod
    def _derived(cls, environ: Mapping[str, str]) -> dict[str, Any]:
        """Fields read from several variables at once (each channel's)."""
        return {}

    @classmethod
    def variables(cls) -> dict[str, Any]:
        """Every variable this class reads, with the value it takes when unset (MISSING: required)."""
        read = {
            each.metadata["variable"]: each.default for each in fields(cls) if "variable" in each.metadata
        }
        return {**read, **cls._derived_variables()}

    @classmethod
    def _derived_variables(cls) -> dict[str, Any]:
        """The variables `_derived` reads, with their defaults."""
        return {}


def _every_channels_queue_variables() -> dict[str, Any]:
    return {spec.queue_url_setting: MISSING for spec in channels.all_specs()}


def _every_channels_queue(environ: Mapping[str, str]) -> dict[str, str]:
    urls = queue_urls(environ)
    missing = [spec.queue_url_setting for spec in channels.all_specs() if spec.name not in urls]
    if missing:
        raise Unreadable(f"missing queue URLs: {', '.join(missing)}")
    return urls


class EveryChannelsQueue:
    """Mixed into the settings of a function that reads every channel's queue URL into its
    `queue_urls` field (one `<NAME>_QUEUE_URL` each, all required). Named first among the bases, so
    its reading is the one `from_environment` and `variables` use."""

    @classmethod
    def _derived(cls, environ: Mapping[str, str]) -> dict[str, Any]:
        return {"queue_urls": _every_channels_queue(environ)}

    @classmethod
    def _derived_variables(cls) -> dict[str, Any]:
        return _every_channels_queue_variables()
