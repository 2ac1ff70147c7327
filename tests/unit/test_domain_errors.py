"""Domain errors become answers through one table (`sendonce.api.errors.DOMAIN_ERRORS`).

Every subclass of `SendonceError` the layer defines has a row along its MRO (SendonceError itself
has none, so a new error is placed on purpose), and raised inside a real handler it is answered
with that row's status, code and headers in the error body: never a 500.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sendonce
from sendonce import composition
from sendonce.api import dependencies
from sendonce.api.app import handle
from sendonce.api.errors import DOMAIN_ERRORS, domain_answer, from_domain_error
from sendonce.errors import SendonceError
from sendonce.messages.service import MessageService

from tests.support.lambda_context import FakeLambdaContext
from tests.unit.unit_fakes import (
    FakeQueue,
    InMemoryApiKeys,
    InMemoryStore,
    fake_api_dependencies,
    key_of,
)

WS = "ws_errors"
MESSAGE_ID = "msg_01KDVDNA00QV9D1V5ZMBF8DBMW"


def _every_module() -> None:
    for module in pkgutil.walk_packages(sendonce.__path__, "sendonce."):
        importlib.import_module(module.name)


def _subclasses(kind: type[SendonceError]) -> list[type[SendonceError]]:
    found: list[type[SendonceError]] = []
    for sub in kind.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


_every_module()
ERRORS = sorted(set(_subclasses(SendonceError)), key=lambda kind: f"{kind.__module__}.{kind.__name__}")


def _instance(kind: type[SendonceError]) -> SendonceError:
    """The error with a plain value for each argument its constructor requires."""
    if kind.__init__ is Exception.__init__:
        return kind("what went wrong")
    arguments: dict[str, Any] = {}
    for name, parameter in inspect.signature(kind.__init__).parameters.items():
        if name == "self":
            continue
        if parameter.default is not inspect.Parameter.empty or parameter.kind in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            continue
        annotation = str(parameter.annotation)
        arguments[name] = 7 if "int" in annotation else f"{name}-value"
    return kind(**arguments)


def test_the_layer_defines_domain_errors_and_the_table_knows_only_those() -> None:
    assert len(ERRORS) >= 20
    assert SendonceError not in DOMAIN_ERRORS
    assert set(DOMAIN_ERRORS) <= set(ERRORS)


@pytest.mark.parametrize("kind", ERRORS, ids=lambda kind: kind.__name__)
def test_every_domain_error_has_a_row_along_its_mro(kind: type[SendonceError]) -> None:
    row = domain_answer(kind)

    assert row is not None, f"{kind.__name__}: add its row to sendonce.api.errors.DOMAIN_ERRORS"
    assert 400 <= row.status < 500 or row.status == 503


@pytest.mark.parametrize("kind", ERRORS, ids=lambda kind: kind.__name__)
def test_the_answer_is_the_rows_status_code_and_headers(kind: type[SendonceError]) -> None:
    error = _instance(kind)
    row = domain_answer(kind)
    assert row is not None

    answer = from_domain_error(error)

    assert (answer.status, answer.code) == (row.status, row.code)
    assert answer.message
    # An answer worth retrying as it is says when.
    assert ("Retry-After" in answer.headers) is (
        answer.status in (429, 503) or answer.code == "rotation_conflict"
    )


@pytest.fixture
def failing_reads() -> Iterator[list[SendonceError]]:
    """The real handler on fakes whose message reads raise the next error put in the list."""
    raised: list[SendonceError] = []

    class Raising(MessageService):
        def get(self, workspace_id: str, message_id: str) -> Any:
            raise raised.pop()

    messages = Raising(store=InMemoryStore(), queue=FakeQueue(), dedup_window=timedelta(minutes=15))
    dependencies.root.use(fake_api_dependencies(messages, InMemoryApiKeys.of(WS)))
    yield raised
    composition.reset_all()


@pytest.mark.parametrize("kind", ERRORS, ids=lambda kind: kind.__name__)
def test_raised_in_a_handler_every_domain_error_is_its_rows_answer_never_a_500(
    failing_reads: list[SendonceError], kind: type[SendonceError]
) -> None:
    failing_reads.append(_instance(kind))
    row = domain_answer(kind)
    assert row is not None
    event = {
        "version": "2.0",
        "routeKey": "GET /v1/messages/{id}",
        "rawPath": f"/v1/messages/{MESSAGE_ID}",
        "rawQueryString": "",
        "headers": {"authorization": f"Bearer {key_of(WS)}"},
        "requestContext": {
            "http": {"method": "GET", "path": f"/v1/messages/{MESSAGE_ID}"},
            "stage": "$default",
        },
        "isBase64Encoded": False,
    }

    answer = handle(event, FakeLambdaContext())  # type: ignore[arg-type]

    assert answer["statusCode"] == row.status
    body = json.loads(answer["body"])
    assert body["success"] is False
    assert body["error"]["code"] == row.code
    assert set(body["error"]) <= {"code", "message", "details"}
