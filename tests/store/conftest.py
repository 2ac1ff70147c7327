"""The store adapters' contract, on two engines: moto, and DynamoDB Local (AWS's own engine).

Every test here takes the `engine` fixture and so runs once on each. The tables are the template's
own (`create_tables` of sendonce_local), created afresh for every test. DynamoDB Local is started
once per session, in memory, on 127.0.0.1. Where it cannot run (no Java 17, or `make install` not
run), its tests are left out and one skipped test says why and how to get them; in CI (`CI=true`)
they stay in and fail, so the tier can never pass there without AWS's engine.

moto's backends are not thread-safe, while each DynamoDB request is atomic: on moto, the client
takes one lock for the span of each request, through botocore's public event hooks. The races
still interleave the adapters' requests in every order. moto's transactions are the local stack's
(`sendonce_local.moto_transactions`: moto's own answers, without a copy of every table a
transaction touches), so a transaction costs what it does on DynamoDB, not the table's size.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from moto import mock_aws
from sendonce.adapters.dynamodb_delivery import DynamoDbDeliveryStore
from sendonce.adapters.dynamodb_outbox import DynamoDbOutboxStore
from sendonce.adapters.dynamodb_provider_events import DynamoDbProviderEventStore
from sendonce.adapters.dynamodb_sending import DynamoDbSendingStore
from sendonce.dedup.identity import dedup_identity
from sendonce.delivery.ports import OutboxEntry
from sendonce.idempotency.keys import tie_identity
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Channel, Message, Status
from sendonce.messages.ports import Created, CreateOutcome, DedupClaim, KeyTie

from sendonce_local import dynamodb_local, moto_transactions
from sendonce_local.emulator import create_tables
from sendonce_local.template import Template, load_template

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
TABLE = "MessagesTable"
STORE_TABLES = (TABLE, "LimitsTable")  # the limits table: the quota shards a charged create takes
MOTO, DYNAMODB_LOCAL = "moto", "dynamodb-local"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# Where DynamoDB Local cannot run, outside CI, its half of the tier is left out and
# test_engines.py says so, once. In CI it stays in, and fails.
DYNAMODB_LOCAL_MISSING = dynamodb_local.unavailable()
ENGINES = (MOTO, DYNAMODB_LOCAL) if IN_CI or DYNAMODB_LOCAL_MISSING is None else (MOTO,)
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DEDUP_WINDOW = timedelta(minutes=15)
SKIPPED = (
    "DynamoDB Local tests skipped ({reason}). They run the store's contract on AWS's own engine: "
    "install Java 17, then run `make install`."
)
T = TypeVar("T")


# ---------------------------------------------------------------------------- the engines
_TEMPLATE: Template | None = None


def template() -> Template:
    """template.yaml with the tables the stores use (the others would only slow every test)."""
    global _TEMPLATE  # noqa: PLW0603  (parsed once per session)
    if _TEMPLATE is None:
        whole = load_template(ROOT / "template.yaml")
        _TEMPLATE = replace(
            whole, tables=[table for table in whole.tables if table.logical_id in STORE_TABLES]
        )
        assert _TEMPLATE.tables, f"template.yaml has no {TABLE}"
    return _TEMPLATE


def _client(endpoint: str | None = None) -> Any:
    return boto3.session.Session().client(
        "dynamodb",
        region_name=REGION,
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",  # the engines' dummy credentials
        config=Config(max_pool_connections=64),  # the races' 30 threads at once
    )


_MOTO_REQUEST = threading.Lock()  # held for the span of each request to moto, whichever client makes it


def _one_request_at_a_time(client: Any, lock: threading.Lock = _MOTO_REQUEST) -> None:
    """Each request of this client runs alone, as each DynamoDB request is atomic."""
    held = threading.local()

    def acquire(**_: Any) -> None:
        lock.acquire()
        held.lock = True

    def release(**_: Any) -> None:
        # A more specific before-call hook may have answered the call before `acquire` ran.
        if getattr(held, "lock", False):
            held.lock = False
            lock.release()

    client.meta.events.register_first("before-call.dynamodb", acquire)
    client.meta.events.register("after-call.dynamodb", release)
    client.meta.events.register("after-call-error.dynamodb", release)


@pytest.fixture(scope="session")
def dynamodb_local_server() -> Iterator[dynamodb_local.DynamoDbLocal]:
    try:
        server = dynamodb_local.start()
    except dynamodb_local.DynamoDbLocalUnavailable as error:
        if IN_CI:
            pytest.fail(f"DynamoDB Local must run in CI: {error}", pytrace=False)
        pytest.skip(SKIPPED.format(reason=str(error).splitlines()[0]))
    yield server
    server.stop()


@dataclass
class Engine:
    name: str
    client: Any

    def item(self, key: dict[str, Any]) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self.client.get_item(TableName=TABLE, Key=key, ConsistentRead=True).get(
            "Item"
        )
        return item

    def items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        request: dict[str, Any] = {"TableName": TABLE, "ConsistentRead": True}
        while True:
            page = self.client.scan(**request)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return items
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def message_ids(self) -> set[str]:
        return {item["id"]["S"] for item in self.items() if item["sk"]["S"] == "MESSAGE"}

    def new_client(self) -> Any:
        """A second client of the same engine, for hooks that must not touch the shared one."""
        client = _client(self.client.meta.endpoint_url if self.name == DYNAMODB_LOCAL else None)
        if self.name == MOTO:
            _one_request_at_a_time(client)
        return client


@pytest.fixture(scope="package", params=ENGINES)
def engine_client(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    """Each engine's client, once for the whole tier: the tests of one engine run together."""
    with pytest.MonkeyPatch.context() as environment:
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL"):
            environment.delenv(name, raising=False)
        if request.param == DYNAMODB_LOCAL:
            server: dynamodb_local.DynamoDbLocal = request.getfixturevalue("dynamodb_local_server")
            yield DYNAMODB_LOCAL, _client(server.endpoint)
            return
        moto_transactions.install()
        with mock_aws():
            client = _client()
            _one_request_at_a_time(client)
            yield MOTO, client


@pytest.fixture
def engine(engine_client: tuple[str, Any]) -> Iterator[Engine]:
    """One engine, with the template's tables created afresh for this test, and no fault left over."""
    name, client = engine_client
    for table in client.list_tables()["TableNames"]:
        client.delete_table(TableName=table)
    create_tables(client, template())
    yield Engine(name, client)
    # The client outlives the test (one per engine for the package): a fault injected into it must not.
    while _INJECTED:
        injected_into, handler = _INJECTED.pop()
        injected_into.meta.events.unregister(CONFLICT_EVENT, handler)


# ---------------------------------------------------------------------------- the adapters
@dataclass
class Stores:
    """The three contexts' stores over one table; the only place that names the adapter classes."""

    sending: DynamoDbSendingStore
    delivery: DynamoDbDeliveryStore
    outbox: DynamoDbOutboxStore
    events: DynamoDbProviderEventStore


def build_stores(client: Any) -> Stores:
    return Stores(
        sending=DynamoDbSendingStore(client, TABLE),
        delivery=DynamoDbDeliveryStore(client, TABLE),
        outbox=DynamoDbOutboxStore(client, TABLE),
        events=DynamoDbProviderEventStore(client, TABLE),
    )


@pytest.fixture
def stores(engine: Engine) -> Stores:
    return build_stores(engine.client)


# ---------------------------------------------------------------------------- messages
@dataclass
class Draft:
    """A message about to be created, with the lock and the tie the sending use case would take."""

    message: Message
    claim: DedupClaim
    tie: KeyTie | None = None
    handoff_due_at: datetime = field(default=NOW + timedelta(minutes=2))


def draft(
    *,
    workspace: str = "ws_a",
    to: str = "+15550100000",
    body: str = "hello",
    now: datetime = NOW,
    status: Status = Status.QUEUED,
    send_at: datetime | None = None,
    key: str | None = None,
    fingerprint: str = "fingerprint-1",
    window: timedelta = DEDUP_WINDOW,
    message_id: str | None = None,
    handoff_due_at: datetime | None = None,
) -> Draft:
    message = Message(
        id=message_id or new_message_id(),
        workspace_id=workspace,
        channel=Channel("sms"),
        to=to,
        body=body,
        status=status,
        created_at=now,
        updated_at=now,
        send_at=send_at,
        idempotency_key=key,
    )
    claim = DedupClaim(lock_id=dedup_identity(workspace, to, None, body), expires_at=now + window)
    tie = KeyTie(tie_identity(workspace, key, to), fingerprint) if key is not None else None
    return Draft(message, claim, tie, handoff_due_at or now + timedelta(minutes=2))


def create(stores: Stores, made: Draft, now: datetime = NOW) -> CreateOutcome:
    return stores.sending.create(made.message, made.claim, made.tie, made.handoff_due_at, now)


def created(stores: Stores, now: datetime = NOW, **changes: Any) -> Message:
    """A message written through the sending store (asserted created), as the store returned it."""
    outcome = create(stores, draft(now=now, **changes), now)
    assert isinstance(outcome, Created), outcome
    return outcome.message


# ---------------------------------------------------------------------------- injected conflicts
CONFLICT_EVENT = "before-call.dynamodb.TransactWriteItems"
_INJECTED: list[tuple[Any, Callable[..., Any]]] = []  # (client, handler): undone when the test ends


def conflicts(client: Any, times: int, only_with: str | None = None) -> list[int]:
    """The first `times` TransactWriteItems of `client` (those whose body names `only_with`, when
    given) canceled by a conflict, as DynamoDB does when two transactions touch one item at once
    (neither engine ever does); the calls, counted."""
    calls: list[int] = []

    def answer(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if only_with is not None and only_with not in params["body"].decode():
            return None
        calls.append(1)
        if len(calls) > times:
            return None
        count = len(json.loads(params["body"])["TransactItems"])
        reasons = [{"Code": "None"}] * count
        reasons[min(1, count - 1)] = {
            "Code": "TransactionConflict",
            "Message": "Transaction is ongoing for the item",
        }
        parsed = {
            "Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"},
            "CancellationReasons": reasons,
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }
        return AWSResponse(url="", status_code=400, headers={}, raw=None), parsed

    client.meta.events.register(CONFLICT_EVENT, answer)
    _INJECTED.append((client, answer))
    return calls


# ---------------------------------------------------------------------------- races
def race(count: int, run: Callable[[int], T]) -> list[T | BaseException]:
    """`run(i)` in `count` threads released at the same instant; each one's answer or exception."""
    barrier = threading.Barrier(count)
    answers: list[T | BaseException] = [RuntimeError("did not run")] * count

    def contender(index: int) -> None:
        barrier.wait()
        try:
            answers[index] = run(index)
        except BaseException as error:  # reported by the test, not lost in a thread
            answers[index] = error

    threads = [threading.Thread(target=contender, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


def only(answers: Sequence[Any], kind: type) -> list[Any]:
    return [answer for answer in answers if isinstance(answer, kind)]


def outbox_due(stores: Stores, now: datetime, limit: int) -> list[OutboxEntry]:
    """The `limit` oldest entries of the Outbox index due by `now`, whatever their status."""
    entries = [entry for page in stores.outbox.due_pages(now, frozenset(Status)) for entry in page]
    return sorted(entries, key=lambda entry: entry.due_at)[:limit]
