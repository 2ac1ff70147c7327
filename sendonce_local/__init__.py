"""The Docker-free local stack of sendonce: `sendonce run`, `sendonce invoke` (added to the operator
CLI's `sendonce`, sendonce_cli, by `commands.py`).

Development only; never shipped in the Lambda layer.
"""
