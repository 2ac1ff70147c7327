"""Integration fixtures: every table and queue of template.yaml under moto, and the real handlers.

The resources come from the template itself (through sendonce_local's reader), never from a second
list kept here; the environment is the one the template gives the functions.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import importlib.util
import json
import os
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from sendonce import composition
from sendonce.keyed_hash import KeyedHash
from sendonce.modes import is_test_workspace, live_workspace_of
from sendonce.provider_events.signature import sign

from sendonce_local.deliveries import DeliveryLog
from sendonce_local.emulator import AwsEmulator, create_queues, create_tables
from sendonce_local.environment import LOCAL_LIMITS, template_variables
from sendonce_local.event_filters import passes
from sendonce_local.intrinsics import Resolver, queue_url
from sendonce_local.invocation_isolation import isolate_invocations
from sendonce_local.local_secrets import LocalSecrets, create_secrets
from sendonce_local.stream_sources import judge, lambda_record, stream_arn
from sendonce_local.template import Template, load_template
from tests.support.http_server import Reply, Request, serving
from tests.support.lambda_context import FakeLambdaContext
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
REGION = "us-east-1"
# moto answers queue URLs on this host; the template's !Ref of a queue resolves to the same URL.
SQS_ENDPOINT = f"https://sqs.{REGION}.amazonaws.com"
WORKSPACE = "ws_local"
API_KEY = "sk_local_dev"
_UNSET: Any = object()
# The workspaces whose key is in the ApiKeysTable of the current test's stack (the fixture empties it).
_KEYED: set[str] = set()
_KEYED_LOCK = threading.Lock()


_CLIENTS: dict[tuple[str, ...], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def aws_client(service: str) -> Any:
    """A boto3 client of the emulator, made once per service and environment and then shared.

    Making a client (its service model, its handlers) costs more than most calls a test makes
    with it; clients are safe to share between threads. The environment is part of the key, so a
    client never outlives the endpoint or credentials it was made for.
    """
    environment = tuple(
        os.environ.get(name, "")
        for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")
    )
    key = (service, *environment)
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            _CLIENTS[key] = boto3.client(service, region_name=REGION)
        return _CLIENTS[key]


def key_of(workspace: str) -> str:
    """The API key a test's caller of `workspace` sends: the events/ files' for WORKSPACE, and a
    test key (`sk_test_…`) for a test twin (`sendonce.modes.twin_of`)."""
    if is_test_workspace(workspace):
        return f"sk_test_it_{live_workspace_of(workspace)}"
    return API_KEY if workspace == WORKSPACE else f"sk_it_{workspace}"


def _issue_key(workspace: str) -> str:
    """`workspace`'s key, stored (hashed) in the stack's ApiKeysTable the first time it is asked for."""
    from sendonce.adapters.dynamodb_api_keys import DynamoDbApiKeyStore  # noqa: PLC0415
    from sendonce.auth.api_keys import issue_api_key  # noqa: PLC0415

    key = key_of(workspace)
    with _KEYED_LOCK:
        if workspace not in _KEYED:
            keys = DynamoDbApiKeyStore(aws_client("dynamodb"), "ApiKeysTable")
            issue_api_key(keys, live_workspace_of(workspace), key)  # a test key: stored for the twin
            _KEYED.add(workspace)
    return key


def pytest_configure(config: pytest.Config) -> None:
    # The handlers flush Powertools metrics on every call; most calls record none.
    config.addinivalue_line("filterwarnings", "ignore:No application metrics to publish:UserWarning")


# ---------------------------------------------------------------------------- the functions
def _load_function(name: str) -> ModuleType:
    """functions/<name>/app.py, loaded by its path as its own module (no sys.path edits)."""
    path = ROOT / "functions" / name / "app.py"
    spec = importlib.util.spec_from_file_location(f"sendonce_function_{name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_FUNCTIONS: dict[str, ModuleType] = {}


def function(name: str) -> ModuleType:
    if name not in _FUNCTIONS:
        _FUNCTIONS[name] = _load_function(name)
    return _FUNCTIONS[name]


# ---------------------------------------------------------------------------- event files
def load_event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return event


def api_event(
    name: str,
    *,
    body: Any = _UNSET,
    headers: dict[str, str | None] | None = None,
    workspace: str | None = _UNSET,
    method: str | None = None,
    path: str | None = None,
    query: dict[str, str] | None = None,
    base64_body: bytes | None = None,
) -> dict[str, Any]:
    """An events/ file with its body, headers (None removes one), workspace, method, path or query changed.

    `body`: a dict or list is JSON-encoded, a str is sent as is; `base64_body`: raw bytes sent
    base64-encoded, as API Gateway does for a body it does not take for text. `workspace`: the
    caller, sent as that workspace's API key (issued in the stack on first use); None sends no
    `Authorization` header; left out, the file's own key (WORKSPACE's) is sent.
    """
    event = copy.deepcopy(load_event(name))
    event_headers: dict[str, str] = event.setdefault("headers", {})
    if body is not _UNSET:
        text = body if isinstance(body, str) or body is None else json.dumps(body)
        if text is None:
            event.pop("body", None)
            event_headers.pop("content-length", None)
        else:
            event["body"] = text
            event["isBase64Encoded"] = False
            event_headers["content-length"] = str(len(text.encode("utf-8", errors="surrogatepass")))
    if base64_body is not None:
        event["body"] = base64.b64encode(base64_body).decode("ascii")
        event["isBase64Encoded"] = True
        event_headers["content-length"] = str(len(base64_body))
    for header_name, value in (headers or {}).items():
        event_headers.pop(header_name.lower(), None)
        if value is not None:
            event_headers[header_name.lower()] = value
    if workspace is not _UNSET:
        if workspace is None:
            event_headers.pop("authorization", None)
        else:
            event_headers["authorization"] = f"Bearer {_issue_key(workspace)}"
    if method is not None:
        event["requestContext"]["http"]["method"] = method
    if path is not None:
        event["rawPath"] = path
        event["requestContext"]["http"]["path"] = path
    if method is not None or path is not None:
        route = f"{event['requestContext']['http']['method']} {event['rawPath']}"
        event["routeKey"] = event["requestContext"]["routeKey"] = route
    if query is not None:
        event["rawQueryString"] = "&".join(f"{k}={v}" for k, v in query.items())
        if query:
            event["queryStringParameters"] = dict(query)
        else:
            event.pop("queryStringParameters", None)
    event["requestContext"]["requestId"] = uuid.uuid4().hex[:16] + "="
    return event


@dataclass
class ApiAnswer:
    status: int
    headers: dict[str, str]
    raw_body: str
    json: Any

    def header(self, name: str) -> str | None:
        for key, value in self.headers.items():
            if key.lower() == name.lower():
                return value
        return None


def call_api(event: dict[str, Any]) -> ApiAnswer:
    """The API function's own handler, as API Gateway calls it."""
    response = function("api").handler(event, FakeLambdaContext())
    raw = response.get("body") or ""
    headers = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    parsed = json.loads(raw) if raw and content_type.startswith("application/json") else None
    return ApiAnswer(response["statusCode"], headers, raw, parsed)


def send(
    name: str = "api_send_sms.json",
    body: Any = _UNSET,
    key: str | None = None,
    workspace: str | None = WORKSPACE,
    headers: dict[str, str | None] | None = None,
) -> ApiAnswer:
    extra: dict[str, str | None] = dict(headers or {})
    if key is not None:
        extra["Idempotency-Key"] = key
    return call_api(api_event(name, body=body, headers=extra, workspace=workspace))


def provider_webhook(payload: dict[str, Any], secret: str, at: int | None = None) -> ApiAnswer:
    """`POST /v1/webhooks/http` with `payload`, signed by the HTTP provider with `secret` at `at`
    (unix seconds, now by default), through the API function."""
    raw = json.dumps(payload)
    signature = sign(secret, at if at is not None else int(time.time()), raw.encode())
    event = api_event(
        "api_send_sms.json",
        method="POST",
        path="/v1/webhooks/http",
        body=raw,
        headers={"X-Sendonce-Signature": signature, "Authorization": None},
        workspace=None,
    )
    return call_api(event)


def sqs_event(records: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    """The event Lambda's SQS event source mapping makes of received messages."""
    return {
        "Records": [
            {
                "messageId": record["MessageId"],
                "receiptHandle": record["ReceiptHandle"],
                "body": record["Body"],
                "attributes": {
                    "ApproximateReceiveCount": record.get("Attributes", {}).get(
                        "ApproximateReceiveCount", "1"
                    ),
                    "SentTimestamp": record.get("Attributes", {}).get("SentTimestamp", "0"),
                    "SenderId": record.get("Attributes", {}).get("SenderId", "123456789012"),
                    "ApproximateFirstReceiveTimestamp": record.get("Attributes", {}).get(
                        "ApproximateFirstReceiveTimestamp", "0"
                    ),
                },
                "messageAttributes": {},
                "md5OfBody": hashlib.md5(record["Body"].encode()).hexdigest(),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": REGION,
            }
            for record in records
        ]
    }


# ---------------------------------------------------------------------------- the stack
# The status webhooks' two delivery lanes (issue 27): every delivery starts in the fast lane.
FAST_LANE = "WebhookDeliveryQueue"
SLOW_LANE = "WebhookSlowLaneQueue"


def clear_caches() -> None:
    """Forget every function's dependencies, as a redeploy with new settings would."""
    composition.reset_all()


@dataclass
class Stack:
    template: Template = field(repr=False)
    queue_urls: dict[str, str] = field(repr=False)  # by logical id
    monkeypatch: pytest.MonkeyPatch = field(repr=False)
    secrets: LocalSecrets = field(repr=False)  # the values of the template's secrets in the emulator
    # The MessagesTable stream as each event source mapping reads it: where each shard was read up
    # to, by mapping, and the records read but not yet done (a reported failure is fed again, from there).
    _stream_iterators: dict[str, dict[str, str | None]] = field(default_factory=dict, repr=False)
    _stream_pending: list[dict[str, Any]] = field(default_factory=list, repr=False)
    _handoff_pending: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # hypothesis' failure reports
        printer.text("Stack()")

    @property
    def dynamodb(self) -> Any:
        return aws_client("dynamodb")

    @property
    def sqs(self) -> Any:
        return aws_client("sqs")

    @property
    def keyed_hash(self) -> KeyedHash:
        """The stack's keyed hash, its key read from the emulator's HashingKeySecret as the functions
        read it: what a test finds a lock, a key tie or a suppression entry by."""
        value = aws_client("secretsmanager").get_secret_value(SecretId="HashingKeySecret")["SecretString"]
        return KeyedHash(lambda: str(value))

    def setenv(self, name: str, value: str) -> None:
        """Change one setting of the functions, as a redeploy would (caches cleared)."""
        self.monkeypatch.setenv(name, value)
        clear_caches()

    def put_secret(self, logical_id: str, value: str) -> None:
        """Rotate one of the template's secrets (`put-secret-value`), then start the functions afresh."""
        secretsmanager = aws_client("secretsmanager")
        secretsmanager.put_secret_value(SecretId=logical_id, SecretString=value)
        clear_caches()

    def queue_url(self, channel: str) -> str:
        return self.queue_urls[f"{channel.capitalize()}Queue"]

    def queue_arn(self, channel: str) -> str:
        return f"arn:aws:sqs:{REGION}:123456789012:{channel.capitalize()}Queue"

    def receive(self, channel: str, max_messages: int = 10) -> list[dict[str, Any]]:
        """Every visible record of a channel's queue (received: hidden for the visibility timeout),
        once HandoffFunction has had the stream's new creations, as its mapping would have by then."""
        self.hand_off()
        records: list[dict[str, Any]] = []
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=self.queue_url(channel),
                MaxNumberOfMessages=min(max_messages, 10),
                AttributeNames=["All"],
            ).get("Messages", [])
            if not batch:
                return records
            records.extend(batch)

    def queue_depth(self, channel: str) -> int:
        self.hand_off()
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_url(channel),
            AttributeNames=["All"],
        )["Attributes"]
        return sum(
            int(attributes.get(name, 0))
            for name in (
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            )
        )

    def scan(self, table: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": table}
        while True:
            page = self.dynamodb.scan(**kwargs)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def messages(self) -> list[dict[str, Any]]:
        return [item for item in self.scan("MessagesTable") if item["sk"]["S"] == "MESSAGE"]

    def message(self, message_id: str) -> dict[str, Any]:
        """The message as `GET /v1/messages/{id}` answers it to the fixture's workspace."""
        answer = call_api(api_event("api_get_message.json", path=f"/v1/messages/{message_id}"))
        assert answer.status == 200, answer.raw_body
        message: dict[str, Any] = answer.json["message"]
        return message

    def message_item(self, message_id: str) -> dict[str, Any]:
        item: dict[str, Any] = self.dynamodb.get_item(
            TableName="MessagesTable", Key={"pk": {"S": f"MSG#{message_id}"}, "sk": {"S": "MESSAGE"}}
        )["Item"]
        return item

    def warm_api(self) -> None:
        """Build the API function's dependencies once, as a warm execution environment has them.

        Otherwise the first of many concurrent calls all build boto3 clients at once, which is
        slow and not what a burst against warm functions looks like.
        """
        function("api").root.get()

    # the helpers, reachable from every test through this fixture
    event = staticmethod(api_event)
    call = staticmethod(call_api)
    send = staticmethod(send)
    provider_webhook = staticmethod(provider_webhook)

    def dispatch(self, channel: str, records: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """Feed a channel's queued records to its dispatcher function, as the event source mapping would."""
        if records is None:
            records = self.receive(channel)
        event = sqs_event(records, self.queue_arn(channel))
        context = FakeLambdaContext(function_name=f"sendonce-Dispatch{channel.capitalize()}Function")
        result: dict[str, Any] = function(f"dispatch_{channel}").handler(event, context)
        return result

    # -- status webhooks: the stream's event source mapping and the delivery queue's, by hand
    def read_changes(self, mapping: str = "MessageChanges") -> list[dict[str, Any]]:
        """The MessagesTable stream's records written since `mapping` last read, in Lambda's event shape.

        Each shard is read from where the mapping's last call left it (from its start the first
        time, as TRIM_HORIZON), so a record is read once by each mapping; feeding it again is the
        test's own choice.
        """
        streams = aws_client("dynamodbstreams")
        arn = stream_arn(self.dynamodb, "MessagesTable")
        shards = streams.describe_stream(StreamArn=arn)["StreamDescription"].get("Shards") or []
        iterators = self._stream_iterators.setdefault(mapping, {})
        records: list[dict[str, Any]] = []
        for shard in shards:
            shard_id = shard["ShardId"]
            if shard_id not in iterators:
                iterators[shard_id] = streams.get_shard_iterator(
                    StreamArn=arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
            while (iterator := iterators[shard_id]) is not None:
                answer = streams.get_records(ShardIterator=iterator, Limit=1000)
                iterators[shard_id] = answer.get("NextShardIterator")
                if not answer.get("Records"):
                    break
                records.extend(lambda_record(record, arn) for record in answer["Records"])
        return records

    def drop_handoffs(self) -> None:
        """Forget the creations HandoffFunction failed on, as a stream gives up a record after 24 hours."""
        self.read_changes("Handoff")
        self._handoff_pending.clear()

    def hand_off(self) -> dict[str, Any]:
        """Feed the stream's new creations (the records its filter admits) to HandoffFunction, as
        its event source mapping would; reported failures, and the records after them, are kept
        for the next call."""
        (mapping,) = [m for m in self.template.stream_mappings if m.function_id == "HandoffFunction"]
        self._handoff_pending.extend(r for r in self.read_changes("Handoff") if passes(mapping.filters, r))
        records = list(self._handoff_pending)
        if not records:
            return {"batchItemFailures": []}
        context = FakeLambdaContext(function_name="sendonce-HandoffFunction")
        try:
            result: dict[str, Any] = function("handoff").handler({"Records": records}, context)
        except Exception:  # a raised error leaves every record kept: the mapping retries the batch
            return {"batchItemFailures": [{"itemIdentifier": "*"}]}
        del self._handoff_pending[: judge(records, result, report_failures=True).done]
        return result

    def tell_changes(self, records: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """Feed stream records to MessageChangesFunction's handler, as its event source mapping would.

        Without `records`: the records a failure handed back last time, then every new one, in
        order; the records the handler reports as failed (and all after them) are kept for the
        next call, as the mapping retries from the lowest failed one. With `records`: exactly
        those (a batch fed again), and nothing is kept.
        """
        kept = records is None
        if records is None:
            self._stream_pending.extend(self.read_changes())
            records = list(self._stream_pending)
        if not records:
            return {"batchItemFailures": []}
        context = FakeLambdaContext(function_name="sendonce-MessageChangesFunction")
        # A raised error leaves every record kept: the mapping retries the whole batch.
        result: dict[str, Any] = function("message_changes").handler({"Records": records}, context)
        if kept:
            del self._stream_pending[: judge(records, result, report_failures=True).done]
        return result

    @property
    def webhook_queue_url(self) -> str:
        return self.queue_urls[FAST_LANE]

    def receive_deliveries(self, lane: str = FAST_LANE) -> list[dict[str, Any]]:
        """Every visible record of a delivery lane's queue (received: hidden for the visibility timeout)."""
        records: list[dict[str, Any]] = []
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=self.queue_urls[lane], MaxNumberOfMessages=10, AttributeNames=["All"]
            ).get("Messages", [])
            if not batch:
                return records
            records.extend(batch)

    def deliver_webhook(self, record: dict[str, Any], lane: str = FAST_LANE) -> dict[str, Any]:
        """One record of a delivery lane's queue (`FAST_LANE`, `SLOW_LANE`) fed to
        WebhookDeliveryFunction's handler, as that lane's event source mapping would (a batch of one).

        A record it handled is deleted, as the event source mapping does; a reported failure
        stays on the queue, visible again after the visibility its handler set.
        """
        arn = f"arn:aws:sqs:{REGION}:123456789012:{lane}"
        context = FakeLambdaContext(function_name="sendonce-WebhookDeliveryFunction")
        result: dict[str, Any] = function("webhook_delivery").handler(sqs_event([record], arn), context)
        if not result.get("batchItemFailures"):
            self.sqs.delete_message(QueueUrl=self.queue_urls[lane], ReceiptHandle=record["ReceiptHandle"])
        return result

    def deliver_webhooks(self, *, wait: float = 0.0, lane: str = FAST_LANE) -> list[dict[str, Any]]:
        """Feed every visible record of a delivery lane to the handler, one a batch; with `wait`, go on
        for up to that many seconds while records are still on the queue (retries become visible again)."""
        deadline = time.monotonic() + wait
        results: list[dict[str, Any]] = []
        while True:
            results.extend(self.deliver_webhook(record, lane) for record in self.receive_deliveries(lane))
            if time.monotonic() >= deadline or self.webhook_queue_depth(lane) == 0:
                return results
            time.sleep(0.1)

    def webhook_queue_depth(self, lane: str = FAST_LANE) -> int:
        queue = self.sqs.get_queue_attributes(QueueUrl=self.queue_urls[lane], AttributeNames=["All"])
        attributes = queue["Attributes"]
        return sum(
            int(attributes.get(name, 0))
            for name in (
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            )
        )


def _create_resources(template: Template, secrets: LocalSecrets) -> dict[str, str]:
    create_tables(aws_client("dynamodb"), template)
    resolver = Resolver(template, SQS_ENDPOINT, secrets.parameters())
    create_secrets(aws_client("secretsmanager"), template, resolver, secrets.generated())
    return create_queues(aws_client("sqs"), template, Resolver(template, SQS_ENDPOINT))


_EMULATOR: AwsEmulator | None = None


@contextmanager
def _emulated_aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The local stack's AWS emulator (moto's server, one request per service at a time), emptied.

    Every client of the process, the handlers' included, reaches it through AWS_ENDPOINT_URL. It
    applies each request atomically, as AWS does, and runs transactions at DynamoDB's cost; the
    concurrency tests still interleave the service's requests in every order.
    """
    global _EMULATOR  # noqa: PLW0603  (one server per session, emptied for each test)
    if _EMULATOR is None:
        _EMULATOR = AwsEmulator("127.0.0.1", free_port(), DeliveryLog())
        _EMULATOR.start()
    reset = f"{_EMULATOR.endpoint}/moto-api/reset"
    urllib.request.urlopen(urllib.request.Request(reset, method="POST"), timeout=30).close()
    monkeypatch.setenv("AWS_ENDPOINT_URL", _EMULATOR.endpoint)
    yield _EMULATOR.endpoint


_TEMPLATE: Template | None = None


def template() -> Template:
    global _TEMPLATE  # noqa: PLW0603  (parsed once per session)
    if _TEMPLATE is None:
        _TEMPLATE = load_template(ROOT / "template.yaml")
    return _TEMPLATE


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "WARNING")
    for name in list(os.environ):
        if name.startswith("SENDONCE_"):
            monkeypatch.delenv(name)
    parsed = template()
    clear_caches()
    # The concurrency tests call the handlers from threads of this process, where Lambda runs one
    # invocation per execution environment: Powertools' per-request router state is made per thread
    # (a patch guarded by tests/unit/test_local_library_patches.py).
    isolate_invocations()
    with _emulated_aws(monkeypatch):
        secrets = LocalSecrets.generate({})
        urls = _create_resources(parsed, secrets)
        # The environment the template gives the functions, every !Ref resolved (queues: their URLs).
        created = {queue_url(SQS_ENDPOINT, logical_id): url for logical_id, url in urls.items()}
        for name, value in template_variables(parsed, Resolver(parsed, SQS_ENDPOINT)).items():
            monkeypatch.setenv(name, created.get(value, value))
        # The local stack's limits: wide enough for the races and fuzzers, and counted all the same
        # (every send takes its unit of quota); tests/integration/test_limits.py narrows them.
        for name, value in LOCAL_LIMITS.items():
            monkeypatch.setenv(name, value)
        with _KEYED_LOCK:
            _KEYED.clear()  # the emulator was emptied: no key is stored yet
        _issue_key(WORKSPACE)
        yield Stack(parsed, urls, monkeypatch, secrets)
    clear_caches()


# ---------------------------------------------------------------------------- HTTP provider
@dataclass
class ProviderCall:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeHttpProvider:
    """A tiny HTTP provider: records every call, answers from a script (default 201)."""

    url: str
    calls: list[ProviderCall]
    script: list[tuple[int, float]]  # (status, seconds to wait before answering)

    def answer_next(self, status: int, delay: float = 0.0) -> None:
        self.script.append((status, delay))


@pytest.fixture
def http_provider() -> Iterator[FakeHttpProvider]:
    calls: list[ProviderCall] = []
    script: list[tuple[int, float]] = []
    lock = threading.Lock()

    def respond(request: Request) -> Reply:
        with lock:
            calls.append(ProviderCall(request.path, request.headers, request.json()))
            status, delay = script.pop(0) if script else (201, 0.0)
        if delay:
            request.hold(delay)
        return Reply.json(status, {"id": f"prov_{len(calls)}"} if status < 300 else {"error": "x"})

    with serving(respond) as server:
        yield FakeHttpProvider(server.url, calls, script)


# ---------------------------------------------------------------------------- a webhook receiver
@dataclass(frozen=True)
class ReceivedWebhook:
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes

    @property
    def webhook_id(self) -> str:
        return self.headers.get("webhook-id", "")

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class WebhookReceiver:
    """A customer's endpoints on 127.0.0.1: records every POST, answers each path from its own
    script (200 once the script is spent)."""

    url: str  # <base>/hooks; any path under the base is an endpoint too
    received: list[ReceivedWebhook]
    scripts: dict[str, list[int]]  # by path
    lock: threading.Lock = field(repr=False)
    holds: dict[str, float] = field(default_factory=dict)  # seconds a path waits before it answers

    def answer_next(self, *statuses: int, path: str = "/hooks") -> None:
        with self.lock:
            self.scripts.setdefault(path, []).extend(statuses)

    def hold(self, seconds: float, path: str = "/hooks") -> None:
        """Each request to `path` is answered `seconds` after it arrives (0: at once again); a
        request still held when the test ends is let go."""
        with self.lock:
            self.holds[path] = seconds

    @property
    def requests(self) -> list[ReceivedWebhook]:
        with self.lock:
            return list(self.received)

    def requests_to(self, path: str) -> list[ReceivedWebhook]:
        return [request for request in self.requests if request.path == path]


@pytest.fixture
def webhook_receiver() -> Iterator[WebhookReceiver]:
    received: list[ReceivedWebhook] = []
    scripts: dict[str, list[int]] = {}
    holds: dict[str, float] = {}
    lock = threading.Lock()

    def respond(request: Request) -> Reply:
        with lock:
            received.append(ReceivedWebhook(request.path, request.headers, request.body))
            script = scripts.get(request.path) or []
            status = script.pop(0) if script else 200
            held = holds.get(request.path, 0.0)
        if held:
            request.hold(held)
        return Reply(status)

    with serving(respond) as server:
        yield WebhookReceiver(f"{server.url}/hooks", received, scripts, lock, holds)


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on."""
    return free_port()


Sender = Callable[..., ApiAnswer]
