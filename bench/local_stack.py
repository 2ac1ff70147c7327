"""The in-process bench stack: moto's server on a free loopback port, provisioned from the template.

It reuses `sendonce_local` (template reading, emulator, provisioning, the functions' environment,
loading handlers by file path), so the handlers run exactly as `sendonce run` runs them, minus
the SQS pollers: the bench feeds the dispatcher itself.
"""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sendonce import composition
from sendonce_cli.api_keys import store_api_key

from sendonce_local import dynamodb_local
from sendonce_local.deliveries import DeliveryLog
from sendonce_local.emulator import AwsEmulator, client, create_tables, provision
from sendonce_local.environment import HOST, Ports, apply_environment, function_environment
from sendonce_local.lambda_runtime import FunctionRegistry
from sendonce_local.template import Template, load_template
from tests.support.ports import free_port

# The environment before the in-process stack points it at itself: what `sendonce run` is started with.
ORIGINAL_ENVIRONMENT = dict(os.environ)
ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"
WORKSPACE = "ws_bench"
API_KEY = "sk_bench_key"
# The DynamoDB engines a bench can run on: moto's (the local stack's), or DynamoDB Local (AWS's own).
MOTO = "moto"
DYNAMODB_LOCAL = "dynamodb-local"


def free_ports() -> Ports:
    return Ports(api=free_port(HOST), aws=free_port(HOST), sandbox=free_port(HOST))


@dataclass
class BenchStack:
    template: Template
    ports: Ports
    emulator: AwsEmulator
    functions: FunctionRegistry
    queue_urls: dict[str, str]
    deliveries: DeliveryLog

    @property
    def endpoint(self) -> str:
        return self.ports.aws_endpoint

    def client(self, service: str) -> Any:
        """A client for the bench's own reads: not one the handlers use."""
        return client(service, self.endpoint)

    def stop(self) -> None:
        self.emulator.stop()


def start_stack() -> BenchStack:
    # A new stack's functions start afresh: no composition root keeps clients of an earlier emulator.
    composition.reset_all()
    template = load_template(TEMPLATE)
    ports = free_ports()
    environment = function_environment(template, ports)
    # The sms dispatcher talks to the emulated SNS: no provider sandbox is needed in-process.
    environment["SENDONCE_SMS_PROVIDER"] = "sns"
    # Limits read as a deployed function reads them (every 5 s at most), not as the local stack does.
    environment["SENDONCE_LIMITS_CACHE_SECONDS"] = "5"
    apply_environment(environment)
    deliveries = DeliveryLog()
    emulator = AwsEmulator(HOST, ports.aws, deliveries)
    emulator.start()
    # moto keeps its state per process: a stack started after another one in this process starts empty.
    urllib.request.urlopen(
        urllib.request.Request(f"{ports.aws_endpoint}/moto-api/reset", method="POST"), timeout=30
    ).close()
    queue_urls = provision(template, ports.aws_endpoint, os.environ["SENDONCE_EMAIL_FROM"])
    store_api_key(client("dynamodb", ports.aws_endpoint), "ApiKeysTable", WORKSPACE, API_KEY)
    return BenchStack(template, ports, emulator, FunctionRegistry(template.functions), queue_urls, deliveries)


@contextmanager
def dynamodb_engine(stack: BenchStack, engine: str, tables: tuple[str, ...] = ()) -> Iterator[Any]:
    """A DynamoDB client of the stack's tables on `engine`; the functions use that engine meanwhile.

    On DynamoDB Local, the template's tables (those named in `tables`, or all of them) are created
    afresh and the bench's API key stored; SQS and the rest stay on moto. The composition roots are
    reset on the way in and out, so no function keeps a client of the other engine.
    """
    if engine == MOTO:
        yield stack.client("dynamodb")
        return
    server = dynamodb_local.start()
    saved = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
    try:
        dynamodb = client("dynamodb", server.endpoint)
        chosen = [t for t in stack.template.tables if not tables or t.logical_id in tables]
        create_tables(dynamodb, replace(stack.template, tables=chosen))
        if any(t.logical_id == "ApiKeysTable" for t in chosen):
            store_api_key(dynamodb, "ApiKeysTable", WORKSPACE, API_KEY)
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = server.endpoint
        composition.reset_all()
        yield dynamodb
    finally:
        if saved is None:
            os.environ.pop("AWS_ENDPOINT_URL_DYNAMODB", None)
        else:
            os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = saved
        composition.reset_all()
        server.stop()


Measure = Callable[[BenchStack], tuple[dict[str, Any], dict[str, Any]]]


def on_each_engine(measure: Measure, details: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`measure`'s figures and details on moto, and again with the tables on DynamoDB Local when it is
    installed (under its name; SQS stays on moto), on one stack started for them."""
    engines = [MOTO] + ([DYNAMODB_LOCAL] if dynamodb_local.unavailable() is None else [])
    stack = start_stack()
    figures: dict[str, Any] = {}
    try:
        for engine in engines:
            with dynamodb_engine(stack, engine):
                measured, seen = measure(stack)
            if engine == MOTO:
                figures.update(measured)
                details.update(seen)
            else:
                figures[engine] = measured
                details[engine] = seen
    finally:
        stack.stop()
    return figures, details


def engines_named() -> str:
    """The engines `on_each_engine` measures on, for a progress line."""
    return MOTO + (f", {DYNAMODB_LOCAL}" if dynamodb_local.unavailable() is None else "")


def drain(sqs: Any, queue: str) -> None:
    """Every record of a queue received and deleted: moto's SQS slows down as a queue grows, and no
    dispatcher drains it in a bench of the API alone."""
    while True:
        records = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=60).get(
            "Messages", []
        )
        if not records:
            return
        sqs.delete_message_batch(
            QueueUrl=queue,
            Entries=[{"Id": str(i), "ReceiptHandle": r["ReceiptHandle"]} for i, r in enumerate(records)],
        )


def limited_workspace(stack: BenchStack, workspace: str, key: str, **changes: Any) -> None:
    """A second workspace, its key, and its limits (`DynamoDbLimits.set_limits`'s `controls` or
    `protection`) in force at once: written as of a minute ago, so no execution environment waits
    for the change. On DynamoDB Local's tables while they are there."""
    from sendonce.adapters.dynamodb_limits import DynamoDbLimits  # noqa: PLC0415 - the paired benches only
    from sendonce.limits.model import Limits  # noqa: PLC0415

    local = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
    dynamodb = client("dynamodb", local) if local else stack.client("dynamodb")
    store_api_key(dynamodb, "ApiKeysTable", workspace, key)
    limits = DynamoDbLimits(dynamodb, "LimitsTable", defaults=Limits(rate_per_second=1, daily_quota=0))
    limits.set_limits(
        workspace, None, None, now=datetime.now(UTC) - timedelta(minutes=1), cache_seconds=0, **changes
    )
