"""A provider whose credential is a secret, built with the secret's current value at each send.

The value comes through the secret's cache, so a rotation reaches the next send within the cache's
age, and the provider is rebuilt only when the value changed. A secret that cannot be read is a
failure before the request left: nothing was handed to the provider, so the next provider may
take it, or, with none, it is retried like any outage.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sendonce.dispatch.ports import AskableProvider, Provider, askable
from sendonce.errors import ProviderUnreachable
from sendonce.messages.model import Message
from sendonce.secret_values import Secret, SecretUnavailable


class WithCurrentSecret:
    def __init__(
        self, name: str, honours_idempotency_key: bool, build: Callable[[str], Provider], secret: Secret
    ) -> None:
        self.name = name
        self.honours_idempotency_key = honours_idempotency_key
        self._build = build
        self._secret = secret
        self._provider: Provider | None = None
        self._built_with: str | None = None

    def send(self, message: Message) -> str:
        return self._current().send(message)

    def _current(self) -> Provider:
        value = self._value()
        if self._provider is None or value != self._built_with:
            self._provider, self._built_with = self._build(value), value
        return self._provider

    def _value(self) -> str:
        try:
            return self._secret()
        except SecretUnavailable as error:
            # Nothing was handed to the provider: the next provider may be tried.
            raise ProviderUnreachable(
                "provider_credentials_unavailable", f"the provider's credentials could not be read: {error}"
            ) from None


class AskableWithCurrentSecret(WithCurrentSecret):
    """The same, for a provider that can be asked whether it took a message (`AskableProvider`)."""

    def __init__(
        self,
        name: str,
        honours_idempotency_key: bool,
        build: Callable[[str], AskableProvider],
        secret: Secret,
        *,
        visibility_seconds: float,
    ) -> None:
        super().__init__(name, honours_idempotency_key, build, secret)
        self.visibility_seconds = visibility_seconds

    def find(self, message: Message, since: datetime) -> str | None:
        provider = askable(self._current())
        if provider is None:
            raise TypeError(f"{self.name} cannot be asked")
        return provider.find(message, since)
