"""tests/support: the one HTTP test server, the free port and the Lambda context every tier uses."""

from __future__ import annotations

import http.client
import socket
import threading
import time
import urllib.request

import pytest

from tests.support.http_server import Reply, Request, serving
from tests.support.lambda_context import FakeLambdaContext, readings
from tests.support.ports import free_port


def test_a_request_reaches_the_function_and_its_reply_the_client() -> None:
    seen: list[Request] = []

    def respond(request: Request) -> Reply:
        seen.append(request)
        return Reply.json(201, {"echo": request.json()})

    with serving(respond) as server:
        sent = urllib.request.Request(
            f"{server.url}/hooks?x=1", data=b'{"a": 1}', headers={"X-Name": "v"}, method="PATCH"
        )
        with urllib.request.urlopen(sent, timeout=5) as answer:
            assert (answer.status, answer.headers["Content-Type"]) == (201, "application/json")
            assert answer.read() == b'{"echo": {"a": 1}}'

    [request] = seen
    assert (request.method, request.path, request.headers["x-name"], request.body) == (
        "PATCH",
        "/hooks?x=1",
        "v",
        b'{"a": 1}',
    )
    assert request.arrived_at <= time.time()


def test_no_reply_closes_the_connection_without_a_word() -> None:
    with serving(lambda _: None) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        connection.request("POST", "/", body=b"{}")
        with pytest.raises(http.client.RemoteDisconnected):
            connection.getresponse()
        connection.close()


def test_a_held_request_is_let_go_when_the_server_stops() -> None:
    holding = threading.Event()
    answers: list[int] = []

    def respond(request: Request) -> Reply:
        holding.set()
        request.hold(60)
        return Reply(204)

    def call(url: str) -> None:
        with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=30) as answer:
            answers.append(answer.status)

    started = time.monotonic()
    with serving(respond) as server:
        caller = threading.Thread(target=call, args=(server.url,))
        caller.start()
        assert holding.wait(10)
    caller.join(30)

    assert answers == [204]
    assert time.monotonic() - started < 30  # generous: not the 60 s of the hold


def test_a_free_port_has_nobody_listening_and_can_be_bound() -> None:
    port = free_port()

    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    with socket.create_server(("127.0.0.1", port)):
        pass


def test_the_lambda_context_tells_a_fixed_time_left_or_each_reading() -> None:
    assert FakeLambdaContext(remaining_millis=1_234).get_remaining_time_in_millis() == 1_234
    context = FakeLambdaContext(function_name="sendonce-OutboxFunction", time_left=readings(9, 5))

    assert [context.get_remaining_time_in_millis() for _ in range(3)] == [9, 5, 5]
    assert context.invoked_function_arn.endswith(":function:sendonce-OutboxFunction")
