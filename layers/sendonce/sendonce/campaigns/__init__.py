"""Campaigns: one template or content to a list of up to a million recipients (CONTRACT section 14)."""
