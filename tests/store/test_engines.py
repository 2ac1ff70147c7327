"""DynamoDB Local runs here, and listens on the loopback address 127.0.0.1 only."""

from __future__ import annotations

import socket

import pytest

from tests.store.conftest import DYNAMODB_LOCAL_MISSING, IN_CI, SKIPPED


def test_dynamodb_local_runs_here_on_127_0_0_1_only(request: pytest.FixtureRequest) -> None:
    if DYNAMODB_LOCAL_MISSING is not None:
        if IN_CI:
            pytest.fail(f"DynamoDB Local must run in CI: {DYNAMODB_LOCAL_MISSING}", pytrace=False)
        pytest.skip(SKIPPED.format(reason=DYNAMODB_LOCAL_MISSING))
    server = request.getfixturevalue("dynamodb_local_server")

    with socket.create_connection(("127.0.0.1", server.port), timeout=5):
        pass
    try:
        # Another address of the loopback network: a server listening on every interface answers it.
        socket.create_connection(("127.0.0.2", server.port), timeout=5).close()
    except OSError:
        return
    pytest.fail("DynamoDB Local answers on 127.0.0.2: it listens beyond 127.0.0.1")
