"""A secret is read when it is needed, never held in a setting or in the environment.

A function's settings name a secret (its ARN); its composition root turns the name into a
`Secret`, a callable that answers the secret's current value through a cache
(`sendonce.adapters.secrets_manager`). Whatever stops a read (no secret named, the store failing,
an empty value) is `SecretUnavailable`: an outage, answered as one, never as a wrong secret.
"""

from __future__ import annotations

from collections.abc import Callable

from sendonce.errors import DependencyUnavailable

Secret = Callable[[], str]


class SecretUnavailable(DependencyUnavailable):
    """The secret's value could not be read; nothing that needs it may go ahead."""


def no_secret() -> str:
    """The secret of a function whose settings name none."""
    raise SecretUnavailable("no secret is configured")
