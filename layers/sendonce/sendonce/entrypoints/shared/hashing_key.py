"""The deployment's keyed hash, as every function that makes a lock, a key tie or a suppression key
builds it: from the hashing key's secret its settings name, read on the first hash."""

from __future__ import annotations

from functools import partial

from sendonce.adapters.secrets_manager import SecretsManagerSecret
from sendonce.aws_clients import Clients
from sendonce.keyed_hash import KeyedHash

# A first send waits on this read at most this long (then 503, nothing written).
KEY_READ_TIMEOUT_SECONDS = 3


def deployment_keyed_hash(secret_arn: str, clients: Clients) -> KeyedHash:
    return KeyedHash(
        SecretsManagerSecret(
            secret_arn, partial(clients, "secretsmanager", timeout_seconds=KEY_READ_TIMEOUT_SECONDS)
        )
    )
