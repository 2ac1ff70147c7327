"""Dispatcher function: delivers queued email messages, at most once each."""

from sendonce.startup import frozen_imports

with frozen_imports():
    from sendonce.entrypoints.dispatch import dispatcher_function

handler, root = dispatcher_function("email")
