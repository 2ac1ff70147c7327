"""The hand-off function's settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sendonce.settings import (
    FunctionSettings,
    every_channels_queue,
    every_channels_queue_variables,
)


@dataclass(frozen=True)
class HandoffSettings(FunctionSettings):
    """The function on the MessagesTable's stream that hands each new message to its queue."""

    queue_urls: dict[str, str] = field(default_factory=dict)

    @classmethod
    def _derived(cls, environ: Mapping[str, str]) -> dict[str, Any]:
        return {"queue_urls": every_channels_queue(environ)}

    @classmethod
    def _derived_variables(cls) -> dict[str, Any]:
        return every_channels_queue_variables()
