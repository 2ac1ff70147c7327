"""Fixed identities of the emulated AWS account.

The emulator's region is the operator CLI's (`sendonce_cli.targets`, with its address), which
reaches the emulator without importing the local stack.
"""

from __future__ import annotations

from sendonce_cli.targets import REGION

__all__ = [
    "ACCOUNT_ID",
    "API_ID",
    "DEFAULT_API_PORT",
    "DEFAULT_EMAIL_FROM",
    "DEFAULT_LOCAL_API_KEYS",
    "DEFAULT_SANDBOX_PORT",
    "REGION",
    "STACK_NAME",
]

ACCOUNT_ID = "123456789012"
STACK_NAME = "sendonce-local"
API_ID = "local"
DEFAULT_API_PORT = 3000
DEFAULT_SANDBOX_PORT = 3001
DEFAULT_EMAIL_FROM = "no-reply@sendonce.local"
DEFAULT_LOCAL_API_KEYS = "ws_local:sk_local_dev"
