"""sendonce's Python client: a send can be retried, replayed or raced, and goes out once.

    from sendonce_client import Client

    with Client(api_key="sk_...", base_url="https://api.example.com") as client:
        result = client.messages.send("sms", "+15550100000", "Your code is 123456")
        result.outcome  # SendOutcome.CREATED, REPLAYED or DUPLICATE

Every send and batch carries an Idempotency-Key (made per call unless given) and keeps it on the
client's own retries; see `sendonce_client._retry` for what is retried.
"""

from sendonce_client import errors, webhooks
from sendonce_client._async import AsyncClient
from sendonce_client._retry import RetryPolicy
from sendonce_client._sync import Client
from sendonce_client.models import (
    BatchItemResult,
    BatchResult,
    Event,
    Message,
    MessageTemplate,
    SendOutcome,
    SendResult,
    Usage,
    WebhookEndpoint,
    WebhookEvent,
)

__all__ = [
    "AsyncClient",
    "BatchItemResult",
    "BatchResult",
    "Client",
    "Event",
    "Message",
    "MessageTemplate",
    "RetryPolicy",
    "SendOutcome",
    "SendResult",
    "Usage",
    "WebhookEndpoint",
    "WebhookEvent",
    "errors",
    "webhooks",
]
