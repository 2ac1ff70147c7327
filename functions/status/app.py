"""Status function: applies provider delivery events (webhooks, SES notifications) once each."""

from sendonce.startup import frozen_imports

with frozen_imports():
    from sendonce.entrypoints.status import handler, root

__all__ = ["handler", "root"]
