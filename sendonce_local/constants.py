"""Fixed identities of the emulated AWS account."""

from __future__ import annotations

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"
STACK_NAME = "sendonce-local"
API_ID = "local"
DEFAULT_AWS_PORT = 5000
DEFAULT_API_PORT = 3000
DEFAULT_SANDBOX_PORT = 3001
DEFAULT_EMAIL_FROM = "no-reply@sendonce.local"
DEFAULT_LOCAL_API_KEYS = "ws_local:sk_local_dev"
