"""Outbox function: every minute, hands over what is owed to a queue and recovers dead attempts."""

from sendonce.startup import frozen_imports

with frozen_imports():
    from sendonce.entrypoints.outbox import handler, root

__all__ = ["handler", "root"]
