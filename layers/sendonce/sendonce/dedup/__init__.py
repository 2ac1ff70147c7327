"""The dedup guard: one send per (workspace, recipient, content) per window, for every caller."""
