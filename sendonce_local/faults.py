"""The faults armed in the provider sandbox: which provider fails its next calls, and how.

Invariant: a fault is used up by exactly the calls it is counted on, and a provider's listening
socket is closed exactly while a `refused` fault of that provider is armed (`remaining > 0`).

- Every mode but `refused` is counted on the calls that reach its provider: the first armed fault
  whose channel (and `to`, when it names one) matches a call is used by it.
- A `refused` call never reaches the sandbox, so it cannot be counted there. It is counted on the
  failover instead: each time ANOTHER provider of the sandbox (the HTTP provider, Twilio, or the
  emulated SES and SNS) receives a message for the fault's channel (and `to`, when it names one)
  while the fault is armed, that is the message the refused provider failed over, and the fault
  loses one use. Its provider's socket is opened again once no `refused` fault of it is left (used
  up, or cleared by DELETE /faults). The rule assumes the refused provider comes before the other
  in the channel's list (the case it is made for); a socket cannot refuse by recipient, so while
  it is closed, every call to that provider is refused, whoever it is for.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

PROVIDERS = ("http", "twilio")
DEFAULT_PROVIDER = "http"
FAULT_MODES = ("refused", "error_403", "error_500", "error_400", "timeout", "timeout_unaccepted")
# Twilio sends sms only: its faults are about sms unless they say so (and may say nothing else).
TWILIO_CHANNEL = "sms"


class Listener(Protocol):
    """A provider's listening socket, closed while it refuses connections."""

    def close_listener(self) -> None: ...

    def open_listener(self) -> None: ...


@dataclass
class Fault:
    provider: str
    channel: str
    to: str | None
    mode: str
    remaining: int

    def matches(self, channel: object, to: object) -> bool:
        return (
            self.remaining > 0
            and self.channel == channel
            and (self.to is None or same_recipient(self.to, to))
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "channel": self.channel,
            "to": self.to,
            "mode": self.mode,
            "count": self.remaining,
        }


def same_recipient(a: str, b: object) -> bool:
    """Whether a fault's recipient is the call's (`b`: its `to`, or any address of an email's list)."""
    if isinstance(b, list):
        return any(same_recipient(a, item) for item in b)
    if not isinstance(b, str):
        return False
    if "@" in a:
        return a.lower() == b.lower()
    return a == b


def read_fault(request: Any) -> Fault:
    """`{"provider"?, "channel", "to"?, "mode", "count"?}`; ValueError says what is wrong with it."""
    if not isinstance(request, dict):
        raise ValueError('the body must be {"provider", "channel", "to", "mode", "count"}')
    provider = request.get("provider", DEFAULT_PROVIDER)
    mode, count, to = request.get("mode"), request.get("count", 1), request.get("to")
    if provider not in PROVIDERS:
        raise ValueError(f"provider must be one of {', '.join(PROVIDERS)}")
    channel = request.get("channel", TWILIO_CHANNEL if provider == "twilio" else None)
    if mode not in FAULT_MODES:
        raise ValueError(f"mode must be one of {', '.join(FAULT_MODES)}")
    if not isinstance(channel, str) or not channel:
        raise ValueError("channel is required")
    if provider == "twilio" and channel != TWILIO_CHANNEL:
        raise ValueError("twilio sends sms only: its faults' channel is sms")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError("count must be a positive integer")
    if to is not None and not isinstance(to, str):
        raise ValueError("to must be a string")
    return Fault(provider, channel, to, mode, count)


class FaultBoard:
    """Every armed fault, shared by the sandbox's providers; thread-safe."""

    def __init__(self, listeners: Mapping[str, Listener] | None = None) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._listeners = dict(listeners or {})
        self._closed: set[str] = set()

    def attach(self, provider: str, listener: Listener) -> None:
        """The socket `refused` closes for `provider` (a provider without one cannot refuse)."""
        with self._lock:
            self._listeners[provider] = listener
        self._settle()

    def arm(self, request: Any) -> Fault:
        fault = read_fault(request)
        with self._lock:
            self._faults.append(fault)
        self._settle()
        return fault

    def faults(self) -> list[dict[str, Any]]:
        with self._lock:
            return [fault.as_json() for fault in self._faults if fault.remaining > 0]

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()
        self._settle()

    def take(self, provider: str, channel: object, to: object) -> Fault | None:
        """The fault a call that reached `provider` is to suffer (one use of it), if any."""
        with self._lock:
            for fault in self._faults:
                if fault.provider == provider and fault.mode != "refused" and fault.matches(channel, to):
                    fault.remaining -= 1
                    return fault
        return None

    def received(self, provider: str, channel: object, to: object) -> None:
        """`provider` received a message: each other provider's matching `refused` fault failed it
        over to here, and loses one use."""
        with self._lock:
            for fault in self._faults:
                if fault.provider != provider and fault.mode == "refused" and fault.matches(channel, to):
                    fault.remaining -= 1
            self._faults = [fault for fault in self._faults if fault.remaining > 0]
        self._settle()

    def refusing(self, provider: str) -> bool:
        with self._lock:
            return self._refusing(provider)

    def _refusing(self, provider: str) -> bool:
        return any(f.provider == provider and f.mode == "refused" and f.remaining > 0 for f in self._faults)

    def _settle(self) -> None:
        """Close the socket of each provider with a `refused` fault armed, open the others'."""
        with self._lock:
            changes = []
            for provider, listener in self._listeners.items():
                refusing = self._refusing(provider)
                if refusing != (provider in self._closed):
                    (self._closed.add if refusing else self._closed.discard)(provider)
                    changes.append((listener, refusing))
            # Under the lock: two settles at once must not reorder a close and an open.
            for listener, refusing in changes:
                if refusing:
                    listener.close_listener()
                else:
                    listener.open_listener()
