"""A provider whose credential is a secret, built with the secret's current value at each send.

The value comes through the secret's cache, so a rotation reaches the next send within the cache's
age, and the provider is rebuilt only when the value changed. A secret that cannot be read is a
transient failure: nothing was handed to the provider, so the message is retried like any outage.
"""

from __future__ import annotations

from collections.abc import Callable

from sendonce.dispatch.ports import Provider
from sendonce.errors import TransientFailure
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
        try:
            value = self._secret()
        except SecretUnavailable as error:
            raise TransientFailure(
                "provider_credentials_unavailable", f"the provider's credentials could not be read: {error}"
            ) from None
        if self._provider is None or value != self._built_with:
            self._provider, self._built_with = self._build(value), value
        return self._provider.send(message)
