"""Handoff function: each message created in the MessagesTable, from the table's stream, goes to its
channel's queue, so the request that created it makes one call."""

from sendonce.startup import frozen_imports

with frozen_imports():
    from sendonce.entrypoints.handoff import handler, root

__all__ = ["handler", "root"]
