"""Providers that follow a script, for the dispatcher's unit tests (failover, expiry): each call
answered with the next failure of its script, or the message taken."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sendonce.errors import AmbiguousOutcome, DispatchFailure
from sendonce.messages.model import Message


@dataclass
class FakeProvider:
    """Answers each call with the next failure of its script, or takes the message. `takes_on_failure`:
    the scripted failure came after it took the message (a lost answer), as `find` then shows.
    `during_call` runs while the call is under way (the clock moving on, say)."""

    name: str
    honours_idempotency_key: bool = False
    script: list[DispatchFailure] = field(default_factory=list)
    takes_on_failure: bool = False
    during_call: Callable[[], None] | None = None
    calls: list[str] = field(default_factory=list)
    taken: list[str] = field(default_factory=list)

    def send(self, message: Message) -> str:
        self.calls.append(message.id)
        if self.during_call is not None:
            self.during_call()
        if self.script:
            failure = self.script.pop(0)
            if self.takes_on_failure:
                self.taken.append(message.id)
            raise failure
        self.taken.append(message.id)
        return f"{self.name}-{len(self.taken)}"


@dataclass
class AskableFake(FakeProvider):
    """A provider that can be asked whether it took a message (as Twilio's adapter can)."""

    visibility_seconds: float = 10.0
    asked: list[datetime] = field(default_factory=list)
    lookup_fails: bool = False

    def find(self, message: Message, since: datetime) -> str | None:
        self.asked.append(since)
        if self.lookup_fails:
            raise AmbiguousOutcome("provider_lookup_failed", "the list could not be read")
        return f"{self.name}-found" if message.id in self.taken else None
