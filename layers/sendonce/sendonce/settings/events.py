"""The provider events function's settings (StatusFunction)."""

from __future__ import annotations

from dataclasses import dataclass

from sendonce.settings import FunctionSettings, setting, text


@dataclass(frozen=True)
class EventsSettings(FunctionSettings):
    messages_table: str = setting("MESSAGES_TABLE", text(min_length=1))
