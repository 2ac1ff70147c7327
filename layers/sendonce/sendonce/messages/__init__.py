"""Messages: what a caller asks to send, and what becomes of it."""
