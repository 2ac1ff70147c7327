"""Typed settings, one class per function, checked when its composition root is built.

This module is the only place that reads the environment. Per-channel settings are named after
the channels of `sendonce.channels` (`<NAME>_QUEUE_URL`, `SENDONCE_<NAME>_PROVIDER`), so a
channel added there has its settings here with no new field.

They are plain dataclasses, each field naming its variable and how its value is read: reading a
handful of strings needs no validation library, and a function that validates no request body
imports none. `variables()` lists what a class reads, with each default: template.yaml sets them
on the functions that read them, and the README's Settings table documents them
(tests/unit/test_settings_agree.py holds the three together).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Self

from sendonce import channels

# sendonce.limits.model.MAX_CACHE_SECONDS, which a change of the limits waits out (a test holds the
# two equal; importing the model here would put it on every function's cold start).
LIMITS_CACHE_MAX_SECONDS = 5


class InvalidSettings(ValueError):
    """The environment gives a function settings it cannot run with; each problem names its variable."""


class _Unreadable(ValueError):
    pass


def _text(min_length: int = 0) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if len(value) < min_length:
            raise _Unreadable("must not be empty")
        return value

    return parse


def _integer(minimum: int | None = None, maximum: int | None = None) -> Callable[[str], int]:
    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise _Unreadable(f"must be a whole number, not {value!r}") from None
        if minimum is not None and number < minimum:
            raise _Unreadable(f"must be at least {minimum}")
        if maximum is not None and number > maximum:
            raise _Unreadable(f"must be at most {maximum}")
        return number

    return parse


def _seconds(above: float, maximum: float) -> Callable[[str], float]:
    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            raise _Unreadable(f"must be a number of seconds, not {value!r}") from None
        if not above < number <= maximum:  # also refuses nan
            raise _Unreadable(f"must be more than {above:g} and at most {maximum:g}")
        return number

    return parse


_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


def _flag(value: str) -> bool:
    folded = value.strip().lower()
    if folded in _TRUE | _FALSE:
        return folded in _TRUE
    raise _Unreadable(f"must be true or false, not {value!r}")


def _setting(variable: str, parse: Callable[[str], Any], default: Any = MISSING) -> Any:
    """A field read from `variable` (required when it has no default)."""
    return field(default=default, metadata={"variable": variable, "parse": parse})


def _queue_urls(environ: Mapping[str, str]) -> dict[str, str]:
    """Every registered channel's queue URL that the environment names."""
    return {
        spec.name: environ[spec.queue_url_setting]
        for spec in channels.all_specs()
        if environ.get(spec.queue_url_setting)
    }


@dataclass(frozen=True)
class _Settings:
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
            except _Unreadable as problem:
                problems.append(f"{variable}: {problem}")
        try:
            values.update(cls._derived(environ))
        except _Unreadable as problem:
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
    urls = _queue_urls(environ)
    missing = [spec.queue_url_setting for spec in channels.all_specs() if spec.name not in urls]
    if missing:
        raise _Unreadable(f"missing queue URLs: {', '.join(missing)}")
    return urls


@dataclass(frozen=True)
class ApiSettings(_Settings):
    messages_table: str = _setting("MESSAGES_TABLE", _text(min_length=1))
    idempotency_table: str = _setting("IDEMPOTENCY_TABLE", _text(min_length=1))
    # The hashed API keys, read on a request whose key this environment has not found good lately.
    api_keys_table: str = _setting("API_KEYS_TABLE", _text(min_length=1))
    # How long an execution environment keeps a found key's workspace before reading it again:
    # a revoked key keeps working that long where it was found good (0: read on every request).
    api_key_cache_seconds: int = _setting(
        "SENDONCE_API_KEY_CACHE_SECONDS", _integer(minimum=0, maximum=300), 60
    )
    queue_urls: dict[str, str] = field(default_factory=dict)
    dedup_window_seconds: int = _setting("SENDONCE_DEDUP_WINDOW_SECONDS", _integer(minimum=1), 900)
    idempotency_ttl_seconds: int = _setting("SENDONCE_IDEMPOTENCY_TTL_SECONDS", _integer(minimum=1), 86_400)
    require_idempotency_key: bool = _setting("SENDONCE_REQUIRE_IDEMPOTENCY_KEY", _flag, False)
    message_retention_days: int = _setting("SENDONCE_MESSAGE_RETENTION_DAYS", _integer(minimum=1), 90)
    events_queue_url: str = _setting("EVENTS_QUEUE_URL", _text(), "")
    # The secret's ARN (or name), never its value: the value is read at run time (secret_values).
    provider_events_secret_arn: str = _setting("SENDONCE_PROVIDER_EVENTS_SECRET_ARN", _text(), "")
    # Status webhooks: the customers' endpoints and events, and the queue a redelivery goes on.
    webhooks_table: str = _setting("WEBHOOKS_TABLE", _text(), "")
    webhook_queue_url: str = _setting("WEBHOOK_QUEUE_URL", _text(), "")
    webhook_allow_private_targets: bool = _setting("SENDONCE_WEBHOOK_ALLOW_PRIVATE_TARGETS", _flag, False)
    # Per-workspace limits: the defaults, overridden per workspace in the limits table ("": none).
    limits_table: str = _setting("LIMITS_TABLE", _text(), "")
    rate_limit_per_second: int = _setting(
        "SENDONCE_RATE_LIMIT_PER_SECOND", _integer(minimum=1, maximum=100_000), 50
    )
    daily_send_quota: int = _setting(
        "SENDONCE_DAILY_SEND_QUOTA", _integer(minimum=0, maximum=1_000_000_000), 10_000
    )
    # How long an execution environment keeps a workspace's limits before reading them again: at most
    # what a change of the limits waits out before it takes effect.
    limits_cache_seconds: int = _setting(
        "SENDONCE_LIMITS_CACHE_SECONDS",
        _integer(minimum=0, maximum=LIMITS_CACHE_MAX_SECONDS),
        LIMITS_CACHE_MAX_SECONDS,
    )

    @classmethod
    def _derived(cls, environ: Mapping[str, str]) -> dict[str, Any]:
        return {"queue_urls": _every_channels_queue(environ)}

    @classmethod
    def _derived_variables(cls) -> dict[str, Any]:
        return _every_channels_queue_variables()


@dataclass(frozen=True)
class DispatcherSettings(_Settings):
    """A dispatcher's, and the outbox's: providers and queues for the channels they serve."""

    messages_table: str = _setting("MESSAGES_TABLE", _text(min_length=1))
    queue_urls: dict[str, str] = field(default_factory=dict)
    providers: dict[str, str] = field(default_factory=dict)
    provider_timeout_seconds: float = _setting(
        "SENDONCE_PROVIDER_TIMEOUT_SECONDS", _seconds(above=0, maximum=60), 10.0
    )
    max_dispatch_attempts: int = _setting("SENDONCE_MAX_DISPATCH_ATTEMPTS", _integer(minimum=1), 5)
    http_provider_url: str = _setting("SENDONCE_HTTP_PROVIDER_URL", _text(), "")
    # The token's secret ARN, not its value.
    http_provider_token_arn: str = _setting("SENDONCE_HTTP_PROVIDER_TOKEN_ARN", _text(), "")
    ses_configuration_set: str = _setting("SENDONCE_SES_CONFIGURATION_SET", _text(), "")
    email_from: str = _setting("SENDONCE_EMAIL_FROM", _text(), "no-reply@example.com")
    # Where the simulator reports what became of a test message, as a provider's webhook would.
    events_queue_url: str = _setting("EVENTS_QUEUE_URL", _text(), "")

    @classmethod
    def _derived(cls, environ: Mapping[str, str]) -> dict[str, Any]:
        providers = {}
        for spec in channels.all_specs():
            choice = environ.get(spec.provider_setting) or spec.providers[0]
            if choice not in spec.providers:
                raise _Unreadable(f"{spec.provider_setting} must be one of {', '.join(spec.providers)}")
            providers[spec.name] = choice
        return {"queue_urls": _queue_urls(environ), "providers": providers}

    @classmethod
    def _derived_variables(cls) -> dict[str, Any]:
        return {
            **{spec.queue_url_setting: "" for spec in channels.all_specs()},
            **{spec.provider_setting: spec.providers[0] for spec in channels.all_specs()},
        }

    def queue_url(self, channel: str) -> str:
        return self.queue_urls.get(channel, "")

    def provider_for(self, channel: str) -> str:
        return self.providers[channel]


@dataclass(frozen=True)
class HandoffSettings(_Settings):
    """The function on the MessagesTable's stream that hands each new message to its queue."""

    queue_urls: dict[str, str] = field(default_factory=dict)

    @classmethod
    def _derived(cls, environ: Mapping[str, str]) -> dict[str, Any]:
        return {"queue_urls": _every_channels_queue(environ)}

    @classmethod
    def _derived_variables(cls) -> dict[str, Any]:
        return _every_channels_queue_variables()


@dataclass(frozen=True)
class EventsSettings(_Settings):
    messages_table: str = _setting("MESSAGES_TABLE", _text(min_length=1))


@dataclass(frozen=True)
class MessageChangesSettings(_Settings):
    """The function on the MessagesTable's stream: changes into events and their deliveries."""

    webhooks_table: str = _setting("WEBHOOKS_TABLE", _text(min_length=1))
    webhook_queue_url: str = _setting("WEBHOOK_QUEUE_URL", _text(min_length=1))


def _schedule(value: str) -> str:
    # Only the webhook delivery function reads a schedule: the other functions skip its module.
    from sendonce.status_webhooks.delivery import parse_schedule  # noqa: PLC0415

    try:
        parse_schedule(value)
    except ValueError as error:
        raise _Unreadable(str(error)) from None
    return value


@dataclass(frozen=True)
class WebhookDeliverySettings(_Settings):
    webhooks_table: str = _setting("WEBHOOKS_TABLE", _text(min_length=1))
    webhook_queue_url: str = _setting("WEBHOOK_QUEUE_URL", _text(min_length=1))  # the fast lane
    slow_lane_queue_url: str = _setting("WEBHOOK_SLOW_LANE_QUEUE_URL", _text(min_length=1))
    # Seconds between attempts, comma-separated: the first attempt at once, then one after each.
    retry_schedule: str = _setting(
        "SENDONCE_WEBHOOK_RETRY_SCHEDULE", _schedule, "5,300,1800,7200,18000,36000,36000"
    )
    allow_private_targets: bool = _setting("SENDONCE_WEBHOOK_ALLOW_PRIVATE_TARGETS", _flag, False)
