"""Erasure function: runs erasures from the ErasureQueue, and every minute recovers the stalled ones."""

from sendonce.startup import frozen_imports

with frozen_imports():
    from sendonce.entrypoints.erasures import handler, root

__all__ = ["handler", "root"]
