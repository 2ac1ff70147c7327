"""Suppressions: recipients a workspace never sends to again (STOP, hard bounces, complaints, by hand)."""
