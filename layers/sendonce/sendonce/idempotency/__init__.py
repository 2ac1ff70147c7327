"""The Idempotency-Key header: parsing, canonical payloads, and the permanent tie of a key to a message."""
