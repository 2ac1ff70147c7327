"""A boto3 client for the local emulator (its fixed region and dummy credentials)."""

from __future__ import annotations

from typing import Any

import boto3

from sendonce_local.constants import REGION


def client(service: str, endpoint: str) -> Any:
    return boto3.session.Session().client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",  # noqa: S106 - the emulator's dummy credentials
    )
