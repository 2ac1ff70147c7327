"""Erasure: a recipient forgotten by a workspace, its guarantees kept (CONTRACT section 18)."""
