"""Message changes function: each committed status change of a message, from the table's stream,
becomes exactly one event, and a delivery for each endpoint that wants it."""

from sendonce.startup import frozen_imports

with frozen_imports():
    from sendonce.entrypoints.message_changes import handler, root

__all__ = ["handler", "root"]
