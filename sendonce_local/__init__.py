"""The Docker-free local stack of sendonce: `sendonce run`, `sendonce invoke`, `sendonce create-api-key`.

Development only; never shipped in the Lambda layer.
"""
