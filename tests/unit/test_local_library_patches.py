"""The patches of third-party internals that remain, each pinned to what it was written against.

- `sendonce_local.moto_transactions` replaces moto's `DynamoDBBackend.transact_write_items` (the
  local stack, the bench and the integration tier run on it).
- `sendonce_local.moto_sqs` keeps moto's SQS from counting a queue's messages on each message sent
  or received, and reads a message's visibility from `time.time()` (the emulator installs it).
- `sendonce_local.emulator` keeps what moto's server works out afresh on every request (a host's
  backend, a response class's method names), and `sendonce_local.emulator_middleware` reads when a
  queue's next hidden or delayed message comes due from moto's SQS models (so that a waiting
  receive polls again then, not every 200 ms).
- `sendonce_local.invocation_isolation` swaps Powertools' `BaseRouter` state for per-thread state
  (only the integration tier, which calls the handlers from threads of one process; the local stack
  runs each execution environment in its own process and patches nothing).

Each fails here when the installed library is not the pinned version, when the source of what the
patch replaces or relies on differs from the one recorded (reviewed) below, or when the patched
behaviour differs from the library's own on the cases sendonce depends on. To move a pin: read the
patch against the new source, then record the new version and hashes here.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb import comparisons, exceptions
from moto.dynamodb.models import DynamoDBBackend

from sendonce_local import moto_sqs, moto_transactions

ROOT = Path(__file__).resolve().parents[2]

MOTO = "5.2.5"
MOTO_SOURCES = {  # what moto_transactions replaces (the first) and calls or raises (the rest)
    "DynamoDBBackend.transact_write_items": "81db2cb7d94e39c9",
    "DynamoDBBackend.get_item": "290b95c46b38bc5a",
    "DynamoDBBackend.put_item": "f5d9a5042c77b89e",
    "DynamoDBBackend.delete_item": "083a4bb1af18f6fd",
    "DynamoDBBackend.update_item": "218984588dd689a5",
    "DynamoDBBackend.get_table": "a738146035fc206b",
    "comparisons.get_filter_expression": "0bb9e2d345c7f17f",
    "exceptions.ConditionalCheckFailed": "55f63a46640a2661",
    "exceptions.TransactionCanceledException": "05625e50da04ee42",
    "exceptions.MultipleTransactionsException": "6f38c21a2f40d9b2",
    "exceptions.MockValidationException": "e56b6f56aab16fcb",
    "exceptions.TooManyTransactionsException": "26f2ff9d8e8c203f",
    "exceptions.TransactWriteSingleOpException": "42658ca544bec7c7",
}
# What the emulator's caches and the middleware's wait rely on: a host's backend and a class's
# method names depend on nothing else; a message's receivable time is its visible_at and delayed_until
# (epoch milliseconds), set only by these methods; a queue keeps its messages in `_messages`.
MOTO_EMULATOR_SOURCES = {
    "DomainDispatcherApplication.get_backend_for_host": "1f41972c1e4e660f",
    "DomainDispatcherApplication.get_application": "0ff6939685bde917",
    "backends.list_of_moto_modules": "4f741a10b06500e8",
    "utils.method_names_from_class": "9dbac89d082b655f",
    "responses.BaseResponse.call_action": "26076963fd17fd1a",
    "sqs.Message.visible": "5129b573308de62a",
    "sqs.Message.delayed": "e2fd48abf582683a",
    "sqs.Message.change_visibility": "fcde8986de1390dc",
    "sqs.Message.delay": "4af4d292f3a61eaa",
    "sqs.Queue.__init__": "0a4781ed5a21a050",
    "sqs.SQSBackend.receive_message": "065f3e5e7d214408",
}
# What moto_sqs wraps (the counts, the two calls, a message's visibility) and what runs within the
# calls (none reads a count but through `Queue.attributes`, which is read for other attributes).
MOTO_SQS_SOURCES = {
    "sqs.Queue.attributes": "40cb990b121628d5",
    "sqs.Queue.approximate_number_of_messages": "d357a9506a56d2f8",
    "sqs.Queue.approximate_number_of_messages_delayed": "c3c1dadb0c42ed5f",
    "sqs.Queue.approximate_number_of_messages_not_visible": "5dbecc4dda174358",
    "sqs.Queue.messages": "03a531dbcbcf9aee",
    "sqs.Queue.add_message": "f27c9231c1f20433",
    "sqs.SQSBackend.send_message": "bf161af09a9e6b86",
    "sqs.SQSBackend.send_message_batch": "0707ad219481c867",
    "sqs.SQSBackend._validate_message": "39cb57c19e596164",
    "sqs.SQSBackend.get_queue_attributes": "58417223da457b5a",
    "sqs.SQSBackend.is_message_valid_based_on_retention_period": "cca23b94a5f3af9d",
}
POWERTOOLS = "3.37.0"
# invocation_isolation relies on how every method of the event handler module reads and writes
# `current_event`, `lambda_context` and `context`: the whole module is recorded.
POWERTOOLS_API_GATEWAY_MODULE = "4891268517cd52b5"


def _digest(text: str | bytes) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()[:16]


def _pin(pyproject: Path, distribution: str) -> str:
    found = re.search(rf'"{re.escape(distribution)}(?:\[[^\]]*\])?==([^"]+)"', pyproject.read_text())
    assert found, f"{distribution} is not pinned with == in {pyproject}"
    return found.group(1)


# ---------------------------------------------------------------------------- moto
def test_moto_is_the_pinned_version_the_transaction_patch_was_written_against() -> None:
    assert _pin(ROOT / "pyproject.toml", "moto") == MOTO
    assert importlib.metadata.version("moto") == MOTO


def test_the_moto_source_the_transaction_patch_replaces_and_calls_is_the_recorded_one() -> None:
    assert not getattr(moto_transactions.ORIGINAL, "_sendonce_item_rollback", False)
    owners = {"DynamoDBBackend": DynamoDBBackend, "comparisons": comparisons, "exceptions": exceptions}
    objects = {"DynamoDBBackend.transact_write_items": moto_transactions.ORIGINAL}
    for name in MOTO_SOURCES:
        owner, _, attribute = name.partition(".")
        objects.setdefault(name, getattr(owners[owner], attribute))
    assert {name: _digest(inspect.getsource(obj)) for name, obj in objects.items()} == MOTO_SOURCES


def _put(pk: str, value: str, condition: str | None = None, table: str = "T") -> dict[str, Any]:
    put: dict[str, Any] = {"TableName": table, "Item": {"pk": {"S": pk}, "v": {"S": value}}}
    if condition:
        put["ConditionExpression"] = condition
        put["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return {"Put": put}


def _update(pk: str, expression: str, values: dict[str, Any], condition: str | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {
        "TableName": "T",
        "Key": {"pk": {"S": pk}},
        "UpdateExpression": expression,
        "ExpressionAttributeValues": values,
    }
    if condition:
        update["ConditionExpression"] = condition
    return {"Update": update}


# The transactions sendonce writes, reduced to their shapes: a create with its lock and key, the
# key tie, a status move under a condition, a release (delete), plus moto's validation paths.
SCENARIOS: dict[str, list[dict[str, Any]]] = {
    "commit across tables": [_put("new", "1"), _put("held", "new"), _put("k", "1", table="U")],
    "a condition fails last (ALL_OLD)": [
        _put("new", "1"),
        _update("bystander", "SET v = :v", {":v": {"S": "changed"}}),
        _put("held", "mine", condition="attribute_not_exists(pk)"),
    ],
    "a condition fails first": [
        _put("held", "mine", condition="attribute_not_exists(pk)"),
        _put("new", "1"),
    ],
    "two conditions fail": [
        _put("held", "a", condition="attribute_not_exists(pk)"),
        _put("bystander", "b", condition="attribute_not_exists(pk)"),
    ],
    "a condition check": [
        {
            "ConditionCheck": {
                "TableName": "T",
                "Key": {"pk": {"S": "held"}},
                "ConditionExpression": "v = :v",
                "ExpressionAttributeValues": {":v": {"S": "other"}},
            }
        },
        _put("new", "1"),
    ],
    "a conditional update passes, a delete commits": [
        _update("held", "SET v = :v", {":v": {"S": "sent"}, ":o": {"S": "old"}}, condition="v = :o"),
        {"Delete": {"TableName": "T", "Key": {"pk": {"S": "bystander"}}}},
    ],
    "a conditional update fails without ALL_OLD": [
        _update("held", "SET v = :v", {":v": {"S": "sent"}, ":o": {"S": "nope"}}, condition="v = :o"),
    ],
    "two operations on one item": [_put("new", "1"), _update("new", "SET v = :v", {":v": {"S": "2"}})],
    "a missing table": [_put("new", "1"), _put("x", "1", table="Missing")],
    "an invalid update": [_put("new", "1"), _update("held", "SET v = v + :v", {":v": {"S": "x"}})],
}


@pytest.fixture
def regions(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Two regions holding the same tables: one for moto's own transactions, one for the patch."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        clients = {}
        for region in ("us-east-1", "eu-west-1"):
            client = boto3.client("dynamodb", region_name=region)
            for table in ("T", "U"):
                client.create_table(
                    TableName=table,
                    AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                    KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                    BillingMode="PAY_PER_REQUEST",
                )
            client.put_item(TableName="T", Item={"pk": {"S": "held"}, "v": {"S": "old"}})
            client.put_item(TableName="T", Item={"pk": {"S": "bystander"}, "v": {"S": "untouched"}})
            clients[region] = client
        yield clients


def _outcome(client: Any, items: list[dict[str, Any]]) -> dict[str, Any]:
    try:
        client.transact_write_items(TransactItems=items)
        answer: dict[str, Any] = {"error": None}
    except ClientError as error:
        answer = {
            "error": error.response["Error"],
            "reasons": error.response.get("CancellationReasons"),
        }
    for table in ("T", "U"):
        answer[table] = sorted(
            json.dumps(item, sort_keys=True) for item in client.scan(TableName=table)["Items"]
        )
    return answer


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_patched_transaction_answers_and_writes_exactly_what_moto_s_own_does(
    regions: dict[str, Any], monkeypatch: pytest.MonkeyPatch, scenario: str
) -> None:
    items = SCENARIOS[scenario]
    monkeypatch.setattr(DynamoDBBackend, "transact_write_items", moto_transactions.ORIGINAL)
    moto_answer = _outcome(regions["us-east-1"], items)
    monkeypatch.setattr(DynamoDBBackend, "transact_write_items", moto_transactions.transact_write_items)
    patched_answer = _outcome(regions["eu-west-1"], items)

    assert patched_answer == moto_answer


def test_the_moto_source_the_emulator_caches_and_its_receive_wait_rely_on_is_the_recorded_one() -> None:
    from moto import backends  # noqa: PLC0415
    from moto.core import responses, utils  # noqa: PLC0415
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication  # noqa: PLC0415
    from moto.sqs import models as sqs  # noqa: PLC0415

    objects = {
        "DomainDispatcherApplication.get_backend_for_host": DomainDispatcherApplication.get_backend_for_host,
        "DomainDispatcherApplication.get_application": DomainDispatcherApplication.get_application,
        "backends.list_of_moto_modules": backends.list_of_moto_modules,
        "utils.method_names_from_class": utils.method_names_from_class,
        "responses.BaseResponse.call_action": responses.BaseResponse.call_action,
        # moto's own, whether or not an emulator of this process installed moto_sqs's
        "sqs.Message.visible": moto_sqs.ORIGINAL["Message.visible"].fget,
        "sqs.Message.delayed": moto_sqs.ORIGINAL["Message.delayed"].fget,
        "sqs.Message.change_visibility": sqs.Message.change_visibility,
        "sqs.Message.delay": sqs.Message.delay,
        "sqs.Queue.__init__": sqs.Queue.__init__,
        "sqs.SQSBackend.receive_message": sqs.SQSBackend.receive_message,
    }
    assert {name: _digest(inspect.getsource(obj)) for name, obj in objects.items()} == MOTO_EMULATOR_SOURCES


def test_the_moto_source_the_sqs_patch_wraps_and_runs_within_is_the_recorded_one() -> None:
    from moto.sqs import models as sqs  # noqa: PLC0415

    def moto_own(name: str) -> Any:
        found = moto_sqs.ORIGINAL.get(name.removeprefix("sqs."))
        if found is None:
            owner, _, attribute = name.removeprefix("sqs.").partition(".")
            found = getattr(getattr(sqs, owner), attribute)
        return found.fget if isinstance(found, property) else found

    assert {name: _digest(inspect.getsource(moto_own(name))) for name in MOTO_SQS_SOURCES} == MOTO_SQS_SOURCES


@pytest.fixture
def sqs_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        moto_sqs.install()
        yield boto3.client("sqs", region_name="us-east-1")


def test_with_the_sqs_patch_a_queue_s_counts_are_moto_s_and_its_messages_come_and_go_as_before(
    sqs_client: Any,
) -> None:
    url = sqs_client.create_queue(QueueName="Counted", Attributes={"MessageRetentionPeriod": "60"})[
        "QueueUrl"
    ]
    sqs_client.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(n), "MessageBody": f"m{n}"} for n in range(4)]
    )
    sqs_client.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)

    received = sqs_client.receive_message(QueueUrl=url, MaxNumberOfMessages=3, VisibilityTimeout=60)[
        "Messages"
    ]
    counts = sqs_client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    one = sqs_client.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])

    assert len(received) == 3
    assert {m["Body"] for m in received} <= {"m0", "m1", "m2", "m3"}
    assert (
        counts["ApproximateNumberOfMessages"],
        counts["ApproximateNumberOfMessagesNotVisible"],
        counts["ApproximateNumberOfMessagesDelayed"],
    ) == ("1", "3", "1")
    assert one["Attributes"] == {"ApproximateNumberOfMessagesDelayed": "1"}
    assert counts["MessageRetentionPeriod"] == "60"
    assert not moto_sqs.skipping_counts()


def test_within_a_send_the_counts_read_zero_and_outside_it_they_are_counted(sqs_client: Any) -> None:
    from moto.sqs.models import Queue, sqs_backends  # noqa: PLC0415

    url = sqs_client.create_queue(QueueName="Probed")["QueueUrl"]
    sqs_client.send_message(QueueUrl=url, MessageBody="waiting")
    queue: Queue = sqs_backends["123456789012"]["us-east-1"].queues["Probed"]
    seen: list[int] = []
    original_add = Queue.add_message

    def add_message(self: Queue, message: Any) -> None:
        seen.append(self.approximate_number_of_messages)
        original_add(self, message)

    Queue.add_message = add_message  # type: ignore[method-assign]
    try:
        sqs_client.send_message(QueueUrl=url, MessageBody="probed")
    finally:
        Queue.add_message = original_add  # type: ignore[method-assign]

    assert seen == [0]
    assert queue.approximate_number_of_messages == 2


@pytest.mark.parametrize("offset_ms", [-60_000, -1_000, 1_000, 60_000])
def test_a_message_s_visibility_and_delay_read_as_moto_reads_them(offset_ms: int) -> None:
    from moto.core.utils import unix_time_millis  # noqa: PLC0415
    from moto.sqs.models import Message  # noqa: PLC0415

    moto_sqs.install()
    message = Message("id", "body")
    message.visible_at = message.delayed_until = unix_time_millis() + offset_ms

    assert message.visible == moto_sqs.ORIGINAL["Message.visible"].fget(message)
    assert message.delayed == moto_sqs.ORIGINAL["Message.delayed"].fget(message)


def test_the_emulator_s_caches_answer_what_moto_works_out_afresh() -> None:
    from moto.core import responses, utils  # noqa: PLC0415
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app  # noqa: PLC0415

    from sendonce_local.emulator import BackendByHost, install_method_names_cache  # noqa: PLC0415

    hosts = [
        None,
        "moto_api",
        "sqs",
        "dynamodb.us-east-1.amazonaws.com",
        "streams.dynamodb.us-east-1.amazonaws.com",
        "sqs.us-east-1.amazonaws.com",
        "sns.us-east-1.amazonaws.com",
        "email.us-east-1.amazonaws.com",
        "secretsmanager.us-east-1.amazonaws.com",
    ]
    moto_own, cached = DomainDispatcherApplication(create_backend_app), BackendByHost()
    for _ in range(2):  # worked out, then kept
        assert [cached.get_backend_for_host(host) for host in hosts] == [
            moto_own.get_backend_for_host(host) for host in hosts
        ]
    from moto.dynamodb.responses import DynamoHandler  # noqa: PLC0415
    from moto.sqs.responses import SQSResponse  # noqa: PLC0415

    install_method_names_cache()
    for response_class in {DynamoHandler, SQSResponse, *responses.BaseResponse.__subclasses__()}:
        for _ in range(2):
            assert responses.method_names_from_class(response_class) == utils.method_names_from_class(
                response_class
            )


# ---------------------------------------------------------------------------- Powertools
def test_powertools_is_the_pinned_version_the_isolation_patch_was_written_against() -> None:
    assert _pin(ROOT / "layers" / "sendonce" / "pyproject.toml", "aws-lambda-powertools") == POWERTOOLS
    assert importlib.metadata.version("aws-lambda-powertools") == POWERTOOLS


def test_the_powertools_source_the_isolation_patch_relies_on_is_the_recorded_one() -> None:
    from aws_lambda_powertools.event_handler import api_gateway  # noqa: PLC0415

    assert _digest(Path(api_gateway.__file__).read_bytes()) == POWERTOOLS_API_GATEWAY_MODULE


# A resolver exercising what the patch touches: the event and context through the resolver, a
# router and a middleware; route arguments; context appended by a middleware; 404s and errors.
RESOLVER_SCRIPT = """
import json, sys
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

if sys.argv[1] == "isolated":
    from sendonce_local.invocation_isolation import isolate_invocations
    isolate_invocations()

app = APIGatewayHttpResolver()
router = APIGatewayHttpRouter()

def tag(app, next_middleware):
    app.append_context(tagged=app.current_event.raw_path)
    return next_middleware(app)

@app.get("/items/<id>", middlewares=[tag])
def item(id):
    return {"id": id, "path": app.current_event.path, "q": app.current_event.get_query_string_value("q"),
            "tagged": app.context.get("tagged"), "request": app.lambda_context["request"],
            "args": app.context.get("_route_args")}

@router.post("/things/<name>")
def thing(name):
    return {"name": name, "body": router.current_event.json_body, "ctx": sorted(router.context)}

@app.get("/boom")
def boom():
    raise ValueError("boom")

@app.exception_handler(ValueError)
def on_value_error(error):
    from aws_lambda_powertools.event_handler import Response
    return Response(status_code=418, content_type="text/plain", body=str(error))

app.include_router(router, prefix="/v1")

def event(method, path, query="", body=None):
    return {"version": "2.0", "routeKey": f"{method} {path}", "rawPath": path, "rawQueryString": query,
            "headers": {"content-type": "application/json"}, "isBase64Encoded": False,
            "queryStringParameters": dict(p.split("=") for p in query.split("&")) if query else None,
            "body": json.dumps(body) if body is not None else None,
            "requestContext": {"http": {"method": method, "path": path, "sourceIp": "127.0.0.1"},
                               "stage": "$default"}}

answers = []
for n, (method, path, query, body) in enumerate([
    ("GET", "/items/1", "q=a", None), ("POST", "/v1/things/x", "", {"k": 1}), ("GET", "/items/2", "", None),
    ("GET", "/nowhere", "", None), ("GET", "/boom", "", None), ("POST", "/v1/things/y", "", [1, 2]),
]):
    answers.append(app.resolve(event(method, path, query, body), {"request": n}))
    answers.append({"after": sorted(app.context), "event": app.current_event.raw_path})
print(json.dumps(answers, sort_keys=True))
"""


def _resolve(mode: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", RESOLVER_SCRIPT, mode], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(done.stdout)


def test_the_isolated_resolver_answers_one_thread_exactly_as_powertools_own_does() -> None:
    original, isolated = _resolve("original"), _resolve("isolated")

    assert [answer.get("statusCode") for answer in original[::2]] == [200, 200, 200, 404, 418, 200]
    assert isolated == original
