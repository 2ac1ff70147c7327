"""The HTTP API (v1): routes, request and response schemas, and the one place errors become answers."""
