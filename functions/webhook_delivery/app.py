"""Webhook delivery function: either lane's records side by side, a signed POST each, retried on schedule."""

from sendonce.startup import frozen_imports

with frozen_imports():
    from sendonce.entrypoints.webhook_delivery import handler, root

__all__ = ["handler", "root"]
