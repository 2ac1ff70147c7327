"""The hand-off function's settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from sendonce.settings import (
    EveryChannelsQueue,
    FunctionSettings,
)


@dataclass(frozen=True)
class HandoffSettings(EveryChannelsQueue, FunctionSettings):
    """The function on the MessagesTable's stream that hands each new message to its queue."""

    queue_urls: dict[str, str] = field(default_factory=dict)
