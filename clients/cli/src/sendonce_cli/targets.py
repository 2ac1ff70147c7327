"""Where an operator command acts: the local stack's emulator (the default), another endpoint, or a
deployed stack (`--aws`: the default boto3 session).

The local stack (`sendonce_local`, the development distribution) serves its emulator at this
address, with this region and these dummy credentials, and takes them from here: so the commands
reach it without importing it, and the two never disagree.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import boto3

HOST = "127.0.0.1"
REGION = "us-east-1"
AWS_PORT_SETTING = "SENDONCE_AWS_PORT"
DEFAULT_AWS_PORT = 5000
# The local stack's SENDONCE_LIMITS_CACHE_SECONDS: a limits change made there is seen within a second.
LOCAL_LIMITS_CACHE_SECONDS = 1


def local_aws_port(environ: Mapping[str, str] | None = None) -> int:
    env = os.environ if environ is None else environ
    return int(env.get(AWS_PORT_SETTING) or DEFAULT_AWS_PORT)


def local_aws_endpoint(environ: Mapping[str, str] | None = None) -> str:
    """The local stack's emulator: http://127.0.0.1:$SENDONCE_AWS_PORT (5000)."""
    return f"http://{HOST}:{local_aws_port(environ)}"


def client(service: str, endpoint: str) -> Any:
    """A client of the emulator at `endpoint` (its fixed region and dummy credentials)."""
    return boto3.session.Session().client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",  # noqa: S106 - the emulator's dummy credentials
    )


def deployed_client(service: str, region: str | None) -> Any:
    """A client of a deployed stack's account: the default boto3 session (AWS_PROFILE, AWS_REGION,
    credentials), in `region` when given."""
    return boto3.session.Session(region_name=region).client(service)
