"""The channels sendonce sends on, each declared once, here.

A channel's entry says everything that differs between channels: how its recipients are
normalised, whether a message on it takes a subject, whether it is sms (counted in segments), and
which providers may carry it (the first is the default). Its settings and its resources are named
after it, so nothing else lists them: the queue URL comes from `<NAME>_QUEUE_URL`, the providers
from `SENDONCE_<NAME>_PROVIDERS` (an ordered list, tried in turn) or `SENDONCE_<NAME>_PROVIDER` (a
list of one), and template.yaml holds `<Name>Queue`,
`<Name>DeadLetterQueue` and `Dispatch<Name>Function` (a test holds the template to that). The
request schema, the settings, the dispatchers and the outbox all read this registry; an unknown
channel is refused, never taken for another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

from msgspec import Struct

from sendonce.messages.model import Channel
from sendonce.messages.recipients import (
    Recipient,
    normalise_email,
    normalise_phone,
    normalise_phone_or_email,
)


class UnknownChannel(ValueError):
    pass


class ChannelSpec(Struct, frozen=True):
    name: str
    normalise: Callable[[str], Recipient]
    subject: Literal["required", "forbidden"]
    providers: tuple[str, ...]  # the providers that may carry it; the first is the default
    # Its messages are sms: each carries its encoding and segments (`messages.sms`), and a send may
    # ask for smart encoding.
    sms: bool = False
    # Its messages and templates may carry an `html` part besides the text `body`.
    html: bool = False
    # Its sends may name several recipients (`to` as a list, `cc`, `bcc`) and a `replyTo`: one
    # message, one provider call carrying them all.
    recipient_lists: bool = False

    @property
    def channel(self) -> Channel:
        return Channel(self.name)

    @property
    def queue_url_setting(self) -> str:
        return f"{self.name.upper()}_QUEUE_URL"

    @property
    def provider_setting(self) -> str:
        """One provider: a list of one, read when `providers_setting` is not set."""
        return f"SENDONCE_{self.name.upper()}_PROVIDER"

    @property
    def providers_setting(self) -> str:
        """The ordered list of providers, comma-separated; it wins over `provider_setting`."""
        return f"SENDONCE_{self.name.upper()}_PROVIDERS"

    @property
    def resource_name(self) -> str:
        """The stem of its template.yaml resources: `<Name>Queue`, `Dispatch<Name>Function`."""
        return self.name.capitalize()


_REGISTRY: dict[str, ChannelSpec] = {}


def register(spec: ChannelSpec) -> None:
    if spec.name in _REGISTRY:
        raise ValueError(f"channel {spec.name} is registered already")
    if not spec.providers:
        raise ValueError(f"channel {spec.name} needs at least one provider")
    _REGISTRY[spec.name] = spec


@contextmanager
def registered(spec: ChannelSpec) -> Iterator[ChannelSpec]:
    """A channel that exists only inside the `with` block (for tests)."""
    register(spec)
    try:
        yield spec
    finally:
        del _REGISTRY[spec.name]


def spec(channel: str) -> ChannelSpec:
    try:
        return _REGISTRY[channel]
    except KeyError:
        raise UnknownChannel(f"no channel is named {channel!r}") from None


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def all_specs() -> tuple[ChannelSpec, ...]:
    return tuple(_REGISTRY.values())


def normalise_recipient(channel: str, raw: str) -> Recipient:
    """The recipient as `channel` reads it; InvalidRecipient or UnknownChannel if it cannot."""
    return spec(channel).normalise(raw)


register(
    ChannelSpec(
        "sms", normalise_phone, subject="forbidden", providers=("sns", "http", "twilio", "sms-v2"), sms=True
    )
)
# iMessage reaches a phone number or an Apple ID email address.
register(ChannelSpec("imessage", normalise_phone_or_email, subject="forbidden", providers=("http",)))
register(
    ChannelSpec(
        "email",
        normalise_email,
        subject="required",
        providers=("ses", "http"),
        html=True,
        recipient_lists=True,
    )
)
