"""The provider events function's settings (StatusFunction)."""

from __future__ import annotations

from dataclasses import dataclass

from sendonce.settings import FunctionSettings, setting, text


@dataclass(frozen=True)
class EventsSettings(FunctionSettings):
    messages_table: str = setting("MESSAGES_TABLE", text(min_length=1))
    # The hashing key's secret (its ARN, never its value): what every lock, tie and suppression key
    # is made with (`sendonce.keyed_hash`). Required: no key is ever made up.
    hashing_key_arn: str = setting("SENDONCE_HASHING_KEY_ARN", text(min_length=1))
