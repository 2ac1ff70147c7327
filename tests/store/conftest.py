"""The stores' contract, on three engines: moto, DynamoDB Local (AWS's own engine) and the unit
tier's in-memory fakes (tests/unit/unit_fakes.py), so a fake can never drift from the real store.

A test that speaks to the stores through their ports takes `engine` (or `stores`) and runs once on
each of the three; what it observes beside the ports (the messages written, the dedup locks and
their holders, the reclaims counted on a message, everything at once) each engine answers from its
own state. A test about the DynamoDB adapters themselves (their items, requests, TTL attributes,
cancellation reasons, faults injected into botocore) takes `dynamodb_engine` and runs on moto and
DynamoDB Local only. Where a fake and the DynamoDB store disagree, the fake is wrong.

The tables are the template's own (`create_tables` of sendonce_local), created afresh for every
test; each test of the fake engine starts on empty fakes, its threads switching as often as Python
lets them, so a fake's call that does not run alone loses the races. DynamoDB Local is started once per
session, in memory, on 127.0.0.1. Where it cannot run (no Java 17, or `make install` not run), its
tests are left out and one skipped test says why and how to get them; in CI (`CI=true`) they stay
in and fail, so the tier can never pass there without AWS's engine.

moto's backends are not thread-safe, while each DynamoDB request is atomic: on moto, the client
takes one lock for the span of each request, through botocore's public event hooks. The races
still interleave the adapters' requests in every order. moto's transactions are the local stack's
(`sendonce_local.moto_transactions`: moto's own answers, without a copy of every table a
transaction touches), so a transaction costs what it does on DynamoDB, not the table's size.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, TypeVar

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from moto import mock_aws
from msgspec import Struct
from sendonce.activity.ports import ProviderEventLog
from sendonce.adapters.dynamodb_activity import DynamoDbProviderEventLog
from sendonce.adapters.dynamodb_campaigns import DynamoDbCampaignStore
from sendonce.adapters.dynamodb_dispatch import DynamoDbDispatchStore
from sendonce.adapters.dynamodb_items import lock_key, message_key
from sendonce.adapters.dynamodb_limits import DynamoDbLimits
from sendonce.adapters.dynamodb_outbox import DynamoDbOutboxStore
from sendonce.adapters.dynamodb_provider_events import DynamoDbProviderEventStore
from sendonce.adapters.dynamodb_provider_health import DynamoDbProviderHealth
from sendonce.adapters.dynamodb_sending import DynamoDbSendingStore
from sendonce.adapters.dynamodb_simulator import DynamoDbSimulatorStore
from sendonce.adapters.dynamodb_suppressions import DynamoDbSuppressionStore
from sendonce.adapters.dynamodb_templates import DynamoDbTemplateStore
from sendonce.campaigns.ports import CampaignStore
from sendonce.dedup.identity import dedup_identity, template_identity
from sendonce.dispatch.ports import DispatchStore, OutboxEntry, OutboxStore, ProviderHealth
from sendonce.idempotency.keys import tie_identity
from sendonce.limits.model import Limits
from sendonce.limits.ports import LimitsStore
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Channel, Message, Status, TemplateRef
from sendonce.messages.ports import Created, CreateOutcome, DedupClaim, KeyTie, SendingStore
from sendonce.provider_events.model import ProviderEvent, ProviderEventType
from sendonce.provider_events.ports import ProviderEventStore
from sendonce.simulator.ports import SimulatorDeliveries, SimulatorStore
from sendonce.suppressions.ports import SuppressionStore
from sendonce.templates.ports import TemplateStore

from sendonce_local import dynamodb_local, moto_transactions
from sendonce_local.emulator import create_tables
from sendonce_local.template import Template, load_template
from tests.unit.campaign_fakes import InMemoryCampaignStore
from tests.unit.unit_fakes import (
    TEST_KEYED_HASH,
    FakeLimits,
    InMemoryProviderEvents,
    InMemoryProviderHealth,
    InMemorySimulatorStore,
    InMemoryStore,
    InMemorySuppressions,
    InMemoryTemplates,
)

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
TABLE = "MessagesTable"
LIMITS_TABLE = "LimitsTable"  # the quota shards a charged create takes
STORE_TABLES = (TABLE, LIMITS_TABLE)
MOTO, DYNAMODB_LOCAL, FAKE = "moto", "dynamodb-local", "fake"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# Where DynamoDB Local cannot run, outside CI, its part of the tier is left out and
# test_engines.py says so, once. In CI it stays in, and fails.
DYNAMODB_LOCAL_MISSING = dynamodb_local.unavailable()
DYNAMODB_ENGINES = (MOTO, DYNAMODB_LOCAL) if IN_CI or DYNAMODB_LOCAL_MISSING is None else (MOTO,)
ENGINES = (*DYNAMODB_ENGINES, FAKE)
# Years ahead of the real clock: DynamoDB Local runs the table's TTL on the real clock, so an item
# whose `expiresAt` is days after a NOW in the past (a quota day's counters) would be removed in the
# middle of a test once that day has passed.
NOW = datetime(2036, 11, 30, 12, 0, tzinfo=UTC)
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
        _TEMPLATE = dataclasses.replace(
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


class Engine:
    """Where a test's stores keep their state, and what the test observes of it beside the ports:
    the messages written, the dedup locks and who holds them (expired or not), the reclaims counted
    on a message, and everything at once (`snapshot`: equal before and after when nothing was
    written)."""

    name: str

    def stores(self) -> Stores:
        raise NotImplementedError

    def charged_store(self) -> tuple[SendingStore, LimitsStore]:
        """A sending store whose creates take their unit of a daily quota, and where it is counted."""
        raise NotImplementedError

    def provider_health(self, after: int, cooloff_seconds: float) -> ProviderHealth:
        """One execution environment's view of the providers' runs and cool-offs: each call is another
        environment, all of them sharing the engine's state (and reading it afresh every time)."""
        raise NotImplementedError

    def message_ids(self) -> set[str]:
        raise NotImplementedError

    def locks(self) -> list[tuple[str, str]]:
        """Every dedup lock as (lock id, holder's message id), in lock id order."""
        raise NotImplementedError

    def lock_holder(self, lock_id: str) -> str | None:
        return dict(self.locks()).get(lock_id)

    def reclaims(self, message_id: str) -> int:
        """How often the outbox put the message's dead claims back."""
        raise NotImplementedError

    def snapshot(self) -> object:
        raise NotImplementedError


@dataclass
class DynamoDbEngine(Engine):
    """moto or DynamoDB Local: the adapters over one client, and the table's items."""

    name: str
    client: Any

    def stores(self) -> Stores:
        return build_stores(self.client)

    def charged_store(self) -> tuple[SendingStore, LimitsStore]:
        # The races of re-plans on DynamoDB Local, beside the other lane on two cores, may take longer
        # than the API's 10 s of patience: what they test is the day's exactness, not that patience.
        limits = DynamoDbLimits(self.client, LIMITS_TABLE, defaults=Limits(1, 0), plan_wait_seconds=60)
        return DynamoDbSendingStore(self.client, TABLE, quota=limits, keyed_hash=TEST_KEYED_HASH), limits

    def provider_health(self, after: int, cooloff_seconds: float) -> ProviderHealth:
        return DynamoDbProviderHealth(
            self.client, TABLE, after=after, cooloff_seconds=cooloff_seconds, cache_seconds=0
        )

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

    def locks(self) -> list[tuple[str, str]]:
        prefix = lock_key("")["pk"]["S"]
        return sorted(
            (item["pk"]["S"].removeprefix(prefix), item["messageId"]["S"])
            for item in self.items()
            if item["sk"]["S"] == lock_key("")["sk"]["S"]
        )

    def lock_holder(self, lock_id: str) -> str | None:
        item = self.item(lock_key(lock_id))
        return item["messageId"]["S"] if item else None

    def reclaims(self, message_id: str) -> int:
        item = self.item(message_key(message_id)) or {}
        return int(item.get("reclaims", {}).get("N", "0"))

    def snapshot(self) -> object:
        return sorted(map(str, self.items()))

    def new_client(self) -> Any:
        """A second client of the same engine, for hooks that must not touch the shared one."""
        client = _client(self.client.meta.endpoint_url if self.name == DYNAMODB_LOCAL else None)
        if self.name == MOTO:
            _one_request_at_a_time(client)
        return client


@dataclass
class FakeEngine(Engine):
    """The unit tier's fakes, sharing their state as the adapters share one table."""

    name: str = FAKE
    store: InMemoryStore = field(default_factory=InMemoryStore)
    simulator: InMemorySimulatorStore = field(default_factory=InMemorySimulatorStore)
    suppressions: InMemorySuppressions = field(init=False)
    events: InMemoryProviderEvents = field(init=False)
    templates: InMemoryTemplates = field(default_factory=InMemoryTemplates)
    campaigns: InMemoryCampaignStore = field(init=False)
    health: InMemoryProviderHealth | None = None

    def __post_init__(self) -> None:
        self.campaigns = InMemoryCampaignStore(gates=self.store.gates)  # the gate the creates check
        self.suppressions = self.store.suppressions  # one table: a write's checks see the list
        self.events = InMemoryProviderEvents(self.store, self.suppressions)
        self.store.templates = self.templates  # and a create from a template checks its head

    def stores(self) -> Stores:
        return Stores(
            sending=self.store,
            delivery=self.store,
            outbox=self.store,
            events=self.events,
            suppressions=self.suppressions,
            simulator=self.simulator,
            templates=self.templates,
            campaigns=self.campaigns,
            provider_event_log=self.events.log,
        )

    def charged_store(self) -> tuple[SendingStore, LimitsStore]:
        return self.store, FakeLimits(store=self.store)

    def provider_health(self, after: int, cooloff_seconds: float) -> ProviderHealth:
        if self.health is None:
            self.health = InMemoryProviderHealth(after=after, seconds=cooloff_seconds)
        return self.health

    def message_ids(self) -> set[str]:
        with self.store.guard:
            return set(self.store.messages)

    def locks(self) -> list[tuple[str, str]]:
        with self.store.guard:
            return sorted((lock_id, lock.message_id) for lock_id, lock in self.store.locks.items())

    def reclaims(self, message_id: str) -> int:
        return self.store.reclaims.get(message_id, 0)

    def snapshot(self) -> object:
        with self.store.guard, self.suppressions.guard, self.templates.guard:
            return repr(
                (
                    self.store.messages,
                    sorted(self.store.locks.items()),
                    self.store.ties,
                    self.store.outbox_due,
                    self.events.recorded,
                    self.suppressions.own,
                    self.suppressions.shared,
                    self.templates.heads,
                    self.templates.versions,
                )
            )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each test on every engine; one about the DynamoDB adapters (`dynamodb_engine`) on moto and
    DynamoDB Local. The tests of one engine run together."""
    if "engine_client" in metafunc.fixturenames:
        engines = DYNAMODB_ENGINES if "dynamodb_engine" in metafunc.fixturenames else ENGINES
        metafunc.parametrize("engine_client", engines, indirect=True, scope="package")


@pytest.fixture(scope="package")
def engine_client(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    """Each DynamoDB engine's client, once for the whole tier (the fake engine has none)."""
    if request.param == FAKE:
        yield FAKE, None
        return
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
    """One engine, empty: the template's tables created afresh for this test, and no fault left
    over; or new fakes."""
    name, client = engine_client
    if client is None:
        # Threads switch as often as they can: a fake's call that does not run alone shows in the races.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            yield FakeEngine()
        finally:
            sys.setswitchinterval(interval)
        return
    for table in client.list_tables()["TableNames"]:
        client.delete_table(TableName=table)
    create_tables(client, template())
    yield DynamoDbEngine(name, client)
    # The client outlives the test (one per engine for the package): a fault injected into it must not.
    while _INJECTED:
        injected_into, handler = _INJECTED.pop()
        injected_into.meta.events.unregister(CONFLICT_EVENT, handler)


@pytest.fixture
def dynamodb_engine(engine: Engine) -> DynamoDbEngine:
    """The engine of a test about the DynamoDB adapters themselves: moto or DynamoDB Local."""
    assert isinstance(engine, DynamoDbEngine), engine
    return engine


# ---------------------------------------------------------------------------- the stores
class SimulatorRecords(SimulatorStore, SimulatorDeliveries, Protocol):
    """The simulator's store, as the simulator writes it and the API reads it."""


@dataclass
class Stores:
    """The stores of every context over one engine, by their ports; the only place that names the
    DynamoDB adapter classes."""

    sending: SendingStore
    delivery: DispatchStore
    outbox: OutboxStore
    events: ProviderEventStore
    suppressions: SuppressionStore
    simulator: SimulatorRecords
    templates: TemplateStore
    campaigns: CampaignStore
    provider_event_log: ProviderEventLog


def build_stores(client: Any) -> Stores:
    return Stores(
        sending=DynamoDbSendingStore(client, TABLE, keyed_hash=TEST_KEYED_HASH),
        delivery=DynamoDbDispatchStore(client, TABLE, TEST_KEYED_HASH),
        outbox=DynamoDbOutboxStore(client, TABLE),
        events=DynamoDbProviderEventStore(client, TABLE, TEST_KEYED_HASH),
        suppressions=DynamoDbSuppressionStore(client, TABLE, TEST_KEYED_HASH),
        simulator=DynamoDbSimulatorStore(client, TABLE),
        templates=DynamoDbTemplateStore(client, TABLE),
        campaigns=DynamoDbCampaignStore(client, TABLE),
        provider_event_log=DynamoDbProviderEventLog(client, TABLE),
    )


@pytest.fixture
def stores(engine: Engine) -> Stores:
    return engine.stores()


# ---------------------------------------------------------------------------- messages
class Draft(Struct):
    """A message about to be created, with the lock and the tie the sending use case would take."""

    message: Message
    claim: DedupClaim
    tie: KeyTie | None = None
    handoff_due_at: datetime = NOW + timedelta(minutes=2)


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
    template: tuple[str, int, dict[str, Any]] | None = None,
) -> Draft:
    """`template`: sent from one (its name, the version rendered, the data), with its second lock."""
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
        template=TemplateRef(template[0], template[1]) if template is not None else None,
    )
    claim = DedupClaim(
        lock_id=TEST_KEYED_HASH(dedup_identity(workspace, to, None, body)),
        expires_at=now + window,
        template_lock_id=template_identity(workspace, to, template[0], template[2]) if template else None,
    )
    tie = KeyTie(TEST_KEYED_HASH(tie_identity(workspace, key, to)), fingerprint) if key is not None else None
    return Draft(message, claim, tie, handoff_due_at or now + timedelta(minutes=2))


def create(stores: Stores, made: Draft, now: datetime = NOW) -> CreateOutcome:
    return stores.sending.create(made.message, made.claim, made.tie, made.handoff_due_at, now)


def created(stores: Stores, now: datetime = NOW, **changes: Any) -> Message:
    """A message written through the sending store (asserted created), as the store returned it."""
    outcome = create(stores, draft(now=now, **changes), now)
    assert isinstance(outcome, Created), outcome
    return outcome.message


def opt_out(event_id: str, to: str = "+15550100000", message_id: str | None = None) -> ProviderEvent:
    """The HTTP provider's `opted_out` event: naming no message, a STOP to the shared sending number."""
    return ProviderEvent(
        provider="http",
        event_id=event_id,
        message_id=message_id,
        type=ProviderEventType.OPTED_OUT,
        occurred_at="2036-11-30T12:00:00Z",
        to=to,
    )


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


@contextmanager
def dynamodb_calls(engine: DynamoDbEngine) -> Iterator[list[str]]:
    """The names of the DynamoDB operations the engine's client makes inside the block, in order."""
    made: list[str] = []

    def count(model: Any, **_: Any) -> None:
        made.append(model.name)

    engine.client.meta.events.register("before-call.dynamodb", count)
    try:
        yield made
    finally:
        engine.client.meta.events.unregister("before-call.dynamodb", count)
