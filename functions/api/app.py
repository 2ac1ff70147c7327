"""API function: the HTTP API of sendonce (v1)."""

from sendonce.startup import frozen_imports

with frozen_imports():
    from sendonce.entrypoints.api import handler, root

__all__ = ["handler", "root"]
