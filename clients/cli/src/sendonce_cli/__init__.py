"""sendonce's operator CLI, the `sendonce` command: API keys, dedup locks, unknown messages,
suppression lists and workspace limits, on the local stack or a deployed one (`--aws`).

Installs without the local stack: `pip install ./layers/sendonce ./clients/cli`.
"""
