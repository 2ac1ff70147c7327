"""API keys: issued once, stored only as hashes, resolved to exactly one workspace."""
