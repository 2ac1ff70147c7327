"""A campaign of 100,000 recipients on the in-process stack, driven to `completed` (CONTRACT section 14).

One run on one stack: first `PLAIN_SENDS` plain sms sends through the API function's real handler
(after `WARMUP` unmeasured ones), each counted as the other parts of the bench count a send
(`bench.call_counter`); then a campaign of `RECIPIENTS` distinct recipients:

- created through the API function (`POST /v1/campaigns`, no inline recipients: the answer carries
  a presigned upload URL), its JSON Lines list PUT to that URL as a client would (when the local
  stack makes no CampaignsBucket, the bucket and the object are made through the emulator's S3 API
  instead, and the figures say so: `upload`);
- started through the API function (`POST /v1/campaigns/{id}/start`, which hands a plan to the
  CampaignQueue);
- driven as its SQS event source mapping drives CampaignFunction (`BatchSize: 1`): the bench
  receives the queue's records, hands each alone to the function's real handler, deletes it when
  the handler reports no failure and makes it visible again when it does, until the queue is empty.
  One invocation at a time: the in-process emulator answers one request at a time anyway.

Measured: the time from the start's request to the last invocation's end, and the campaign's own
`startedAt` to `completedAt`; each invocation's AWS calls by operation and its time, by kind of work
(the plan, a page); the calls of the API's two requests; and the mapping's own calls (a receive for
each batch of records the bench took and a delete for each record done, the calls the mapping makes
on AWS). `fanout_calls_per_recipient` is all of them over the recipients; a plain send's
`plain_calls_per_send` is its calls averaged over its sends (its rate leases and limits reads
included), and `calls_beyond_plain_per_recipient` the difference: the fan-out's creates replace the
API's create of a plain send, and everything after a create (the stream's hand-off, the per-channel
queues, the dispatchers) is the same for both, so neither side counts it.

Exactly once: every message of the campaign read back from the MessagesTable (a `Scan` filtered on
the campaign, the recipient projected), and checked against the list: as many messages as
recipients, each recipient once; and the campaign's counts (`GET /v1/campaigns/{id}`) consistent
with them (`accepted == messages`, `accepted + duplicates + suppressed + invalid == total`, status
`completed`).

Alone: `python -m bench.campaigns [--recipients N] [--runs K] [--dynamodb-local]` writes
`bench/results_campaigns.json` (never bench/results.json) and prints it; with several runs, each
figure is the median of the runs and every run is kept.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import statistics
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sendonce.adapters.dynamodb_items import parse_datetime

from bench.call_counter import COUNTER
from bench.capacity import CapacityProbe, Units
from bench.events import send_event, sqs_event
from bench.local_stack import (
    API_KEY,
    DYNAMODB_LOCAL,
    MOTO,
    WORKSPACE,
    BenchStack,
    drain,
    dynamodb_engine,
    start_stack,
)
from bench.quiet import silenced_stdout
from bench.stats import mode, percentile
from sendonce_local.constants import ACCOUNT_ID, REGION
from sendonce_local.intrinsics import queue_arn
from sendonce_local.lambda_runtime import LambdaContext

RECIPIENTS = 100_000
# The bench's pace is the API's highest (`limits.model.MAX_RATE_PER_SECOND`): it measures the
# fan-out, not the pace, which holds no page back at that rate.
RATE_PER_SECOND = 100_000
PLAIN_SENDS = 200
WARMUP = 20
QUEUE = "CampaignQueue"
FUNCTION = "CampaignFunction"
# A received batch stays hidden while the bench works through it one record at a time.
VISIBILITY_SECONDS = 1800
BODY = "The spring sale starts now: 20% off everything until Sunday."
# A progress line every this many pages.
PROGRESS_EVERY = 25
HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results_campaigns.json"


def recipient(number: int) -> str:
    """The campaign's recipients: distinct numbers, none a plain send of the same run uses."""
    return f"+1555{number:07d}"


def plain_recipient(number: int) -> str:
    return f"+1556{number % 10_000_000:07d}"


def recipients_file(count: int, first: int = 0) -> bytes:
    """A campaign's JSON Lines list: `count` distinct recipients from `first` on, one a line."""
    return b"".join(
        json.dumps(
            {"to": recipient(number), "metadata": {"line": str(number - first + 1)}}, separators=(",", ":")
        ).encode()
        + b"\n"
        for number in range(first, first + count)
    )


def api_event(method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """An HTTP API request of the bench's workspace, as the API function receives it."""
    event = send_event(body or {}, API_KEY)
    if body is None:
        event["body"] = None
        event["headers"].pop("content-length", None)
        event["headers"].pop("content-type", None)
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    event["routeKey"] = event["requestContext"]["routeKey"] = f"{method} {path}"
    return event


@dataclass
class Work:
    """The invocations of one kind of the campaign function's work (a plan, a page)."""

    invocations: int = 0
    failures: int = 0
    calls: int = 0
    seconds: list[float] = field(default_factory=list)
    page_calls: list[int] = field(default_factory=list)
    operations: Counter[str] = field(default_factory=Counter)

    def add(self, seconds: float, operations: list[str], failed: bool) -> None:
        self.invocations += 1
        self.failures += int(failed)
        self.calls += len(operations)
        self.seconds.append(seconds)
        self.page_calls.append(len(operations))
        self.operations.update(operations)

    def figures(self) -> dict[str, Any]:
        return {
            "invocations": self.invocations,
            "failures": self.failures,
            "calls": self.calls,
            "calls_per_invocation_p50": percentile(self.page_calls, 0.5) if self.page_calls else None,
            "ms_p50": round(percentile(self.seconds, 0.5) * 1000, 1) if self.seconds else None,
            "ms_p95": round(percentile(self.seconds, 0.95) * 1000, 1) if self.seconds else None,
            "ms_total": round(sum(self.seconds) * 1000, 1),
            "operations": dict(sorted(self.operations.items())),
        }


@dataclass
class Mapping:
    """The calls the SQS event source mapping makes on AWS for the records the bench handed on."""

    receives: int = 0
    deletes: int = 0
    redeliveries: int = 0

    @property
    def calls(self) -> int:
        return self.receives + self.deletes


@dataclass
class CampaignRun:
    """One campaign driven to its end: what it took, and what its function and the API did."""

    campaign_id: str
    recipients: int
    upload: str
    seconds: float = 0.0
    campaign: dict[str, Any] = field(default_factory=dict)
    work: dict[str, Work] = field(default_factory=dict)
    mapping: Mapping = field(default_factory=Mapping)
    api_operations: list[str] = field(default_factory=list)

    @property
    def calls(self) -> int:
        """Every call of the campaign: its API requests, its function's, the mapping's."""
        return sum(work.calls for work in self.work.values()) + len(self.api_operations) + self.mapping.calls

    def operations(self) -> Counter[str]:
        """The campaign's calls by operation, the mapping's named as its own."""
        out: Counter[str] = Counter(self.api_operations)
        for work in self.work.values():
            out.update(work.operations)
        out["sqs.ReceiveMessage (the mapping's)"] += self.mapping.receives
        out["sqs.DeleteMessage (the mapping's)"] += self.mapping.deletes
        return out


class CampaignBench:
    def __init__(self, stack: BenchStack, dynamodb: Any) -> None:
        self.stack = stack
        self.dynamodb = dynamodb
        api = stack.functions["ApiFunction"]
        self.api, self.api_context = api.load(), LambdaContext(api.spec)
        self.sqs = stack.client("sqs")

    # ------------------------------------------------------------------ plain sends
    def plain_sends(self, count: int, warmup: int) -> dict[str, Any]:
        calls: list[int] = []
        operations: Counter[str] = Counter()
        with silenced_stdout():
            for number in range(warmup + count):
                body = {
                    "channel": "sms",
                    "to": plain_recipient(number),
                    "body": f"{BODY} {uuid.uuid4().hex[:8]}",
                }
                with COUNTER.counting() as log:
                    answer = self.api(send_event(body, API_KEY), self.api_context)
                if answer.get("statusCode") != 201:
                    raise RuntimeError(f"a plain send was not created: {answer}")
                if number >= warmup:
                    calls.append(len(log))
                    operations.update(log.operations())
        drain(self.sqs, self.stack.queue_urls["SmsQueue"])
        return {
            "sends": count,
            "calls_mode": mode(calls),
            "calls_per_send": round(sum(calls) / count, 4),
            "operations": dict(sorted(operations.items())),
        }

    # ------------------------------------------------------------------ a campaign
    def call_api(
        self, method: str, path: str, body: dict[str, Any] | None = None, into: list[str] | None = None
    ) -> tuple[int, Any]:
        """The API function's answer to a request; its calls added to `into` when given."""
        with silenced_stdout(), COUNTER.counting() as log:
            answer = self.api(api_event(method, path, body), self.api_context)
        if into is not None:
            into += log.operations()
        return int(answer["statusCode"]), json.loads(answer.get("body") or "null")

    def campaign(self, count: int, first: int = 0) -> CampaignRun:
        """A campaign to recipients `first` to `first + count - 1`: created, uploaded, started and
        driven to its end; its figures."""
        api_operations: list[str] = []
        status, created = self.call_api(
            "POST",
            "/v1/campaigns",
            {"name": f"bench {count:,}", "channel": "sms", "body": BODY, "ratePerSecond": RATE_PER_SECOND},
            api_operations,
        )
        if status != 201:
            raise RuntimeError(f"the campaign was not created: {status} {created}")
        campaign_id = created["campaign"]["id"]
        run = CampaignRun(
            campaign_id,
            count,
            self.upload(campaign_id, created.get("upload"), recipients_file(count, first)),
            api_operations=api_operations,
        )
        started = time.perf_counter()
        status, answer = self.call_api("POST", f"/v1/campaigns/{campaign_id}/start", None, api_operations)
        if status != 202:
            raise RuntimeError(f"the campaign did not start: {status} {answer}")
        self.drive(run)
        run.seconds = time.perf_counter() - started
        # The bench's own look, not the campaign's: its calls are not counted.
        status, got = self.call_api("GET", f"/v1/campaigns/{campaign_id}")
        if status != 200:
            raise RuntimeError(f"the campaign was not read: {status} {got}")
        run.campaign = got["campaign"]
        return run

    def upload(self, campaign_id: str, upload: dict[str, Any] | None, body: bytes) -> str:
        """The list PUT to the presigned URL; else stored through the emulator's S3 API (said so)."""
        if upload is not None:
            request = urllib.request.Request(upload["url"], data=body, method="PUT")
            try:
                with urllib.request.urlopen(request, timeout=120) as answer:
                    if answer.status == 200 and self._stored_size(campaign_id) == len(body):
                        return "presigned PUT"
            except urllib.error.URLError as error:
                print(f"campaigns: the presigned PUT failed ({error}); stored directly", file=sys.stderr)
        s3, bucket = self.stack.client("s3"), _bucket()
        try:
            s3.head_bucket(Bucket=bucket)
        except Exception:  # the local stack made no bucket: made here, as the template names it
            s3.create_bucket(Bucket=bucket)
        s3.put_object(Bucket=bucket, Key=_object_key(campaign_id), Body=body)
        return "put_object through the emulator's S3 API (no presigned upload)"

    def _stored_size(self, campaign_id: str) -> int | None:
        try:
            head = self.stack.client("s3").head_object(Bucket=_bucket(), Key=_object_key(campaign_id))
        except Exception:
            return None
        return int(head["ContentLength"])

    def drive(self, run: CampaignRun) -> None:
        """The CampaignQueue's records, each handed alone to the function, until the queue is empty."""
        function = self.stack.functions[FUNCTION]
        handler = function.load()
        url, arn = self.stack.queue_urls[QUEUE], queue_arn(QUEUE)
        while True:
            records = self.sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=VISIBILITY_SECONDS,
                AttributeNames=["All"],
            ).get("Messages", [])
            if not records:
                if _queue_empty(self.sqs, url):
                    return
                time.sleep(0.2)  # a record held back (a plan's delay) or made visible again
                continue
            run.mapping.receives += 1
            for record in records:
                kind = str(json.loads(record["Body"]).get("kind"))
                if int(record.get("Attributes", {}).get("ApproximateReceiveCount", "1")) > 1:
                    run.mapping.redeliveries += 1
                context = LambdaContext(function.spec)  # each invocation its own time left
                with silenced_stdout(), COUNTER.counting() as log:
                    started = time.perf_counter()
                    result = handler(sqs_event([record], arn), context)
                    elapsed = time.perf_counter() - started
                failed = bool(result.get("batchItemFailures"))
                work = run.work.setdefault(kind, Work())
                work.add(elapsed, log.operations(), failed)
                if kind == "page" and work.invocations % PROGRESS_EVERY == 0:
                    print(
                        f"campaigns: {work.invocations} pages, {sum(work.seconds):.0f} s in the function",
                        file=sys.stderr,
                        flush=True,
                    )
                if failed:
                    self.sqs.change_message_visibility(
                        QueueUrl=url, ReceiptHandle=record["ReceiptHandle"], VisibilityTimeout=0
                    )
                else:
                    self.sqs.delete_message(QueueUrl=url, ReceiptHandle=record["ReceiptHandle"])
                    run.mapping.deletes += 1

    def messages(self, campaign_id: str, engine: str) -> list[str]:
        """The recipient of each message of the campaign, read from the MessagesTable: a `Scan` on
        DynamoDB Local; on moto, its table's items as its server in this process holds them (each
        page of moto's `Scan` sorts the whole table again: minutes for a table of 300,000 items)."""
        if engine == MOTO:
            return moto_campaign_recipients(campaign_id)
        found: list[str] = []
        for item in _scan(
            self.dynamodb,
            TableName="MessagesTable",
            FilterExpression="sk = :message AND campaignId = :campaign",
            ProjectionExpression="#to",
            ExpressionAttributeNames={"#to": "to"},
            ExpressionAttributeValues={":message": {"S": "MESSAGE"}, ":campaign": {"S": campaign_id}},
        ):
            found.append(item["to"]["S"])
        return found


def moto_campaign_recipients(campaign_id: str) -> list[str]:
    """The recipient of each message of the campaign in the MessagesTable of moto's server, which
    runs in this process (`bench.local_stack`): its items read where moto keeps them."""
    from moto.dynamodb.models import dynamodb_backends  # noqa: PLC0415

    table = dynamodb_backends[ACCOUNT_ID][REGION].get_table("MessagesTable")
    found: list[str] = []
    for items in list(table.items.values()):
        for item in list(items.values()):
            attributes = item.attrs
            ours = "campaignId" in attributes and attributes["campaignId"].value == campaign_id
            if ours and attributes["sk"].value == "MESSAGE":
                found.append(attributes["to"].value)
    return found


def _bucket() -> str:
    return os.environ["CAMPAIGNS_BUCKET"]


def _object_key(campaign_id: str) -> str:
    return f"campaigns/{WORKSPACE}/{campaign_id}.jsonl"


def _queue_empty(sqs: Any, url: str) -> bool:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return all(int(value) == 0 for value in attributes.values())


def _scan(dynamodb: Any, **request: Any) -> Iterator[dict[str, Any]]:
    while True:
        response = dynamodb.scan(**request)
        yield from response.get("Items", [])
        if "LastEvaluatedKey" not in response:
            return
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def exactly_once(
    listed: Collection[str], recipients: list[str], counts: dict[str, int], status: str
) -> dict[str, Any]:
    """What a campaign's messages (`recipients`: the recipient of each) and counts say of each
    recipient of its list (`listed`, distinct) getting exactly one message."""
    expected, sent_to = set(listed), set(recipients)
    consistent = (
        counts.get("total") == len(expected)
        and counts.get("accepted") == len(recipients)
        and sum(counts.get(name, 0) for name in ("accepted", "duplicates", "suppressed", "invalid"))
        == counts.get("total")
    )
    every_once = (
        status == "completed" and len(recipients) == len(sent_to) and sent_to == expected and consistent
    )
    return {
        "messages": len(recipients),
        "distinct_recipients": len(sent_to),
        "missing": len(expected - sent_to),
        "unlisted": len(sent_to - expected),
        "repeated": len(recipients) - len(sent_to),
        "counts_consistent": consistent,
        "every_recipient_once": every_once,
    }


def _seconds_between(started_at: str | None, completed_at: str | None) -> float | None:
    if not started_at or not completed_at:
        return None
    return round((parse_datetime(completed_at) - parse_datetime(started_at)).total_seconds(), 1)


# ---------------------------------------------------------------------- DynamoDB capacity
# A second, small campaign on the same stack, every DynamoDB call of it priced by DynamoDB's billing
# rules (`bench.capacity.CapacityProbe`): what a recipient takes, and of which partitions.
CAPACITY_RECIPIENTS = 1_000
CAPACITY_FIRST = 5_000_000  # its recipients: none of the main campaign's
ULID = re.compile(r"(?<![0-9A-Z])[0-9A-HJKMNP-TV-Z]{26}(?![0-9A-Z])")
HASH = re.compile(r"[0-9a-f]{16,}")


def family(partition: str, campaign_id: str) -> str:
    """A partition key value with its ids, hashes and numbers named by kind: keys of one family."""
    text = partition.replace(campaign_id, "<campaign>").replace(WORKSPACE, "<ws>")
    text = ULID.sub("<id>", text)
    text = HASH.sub("<hash>", text)
    return re.sub(r"(?<![a-z])\d+", "<n>", text)


def priced(units: Units, recipients: int, campaign_id: str) -> dict[str, Any]:
    """Units per recipient: in all, by table or index and partition family, and the busiest keys."""
    by_family: dict[str, list[float]] = {}
    by_key: dict[str, list[float]] = {}
    for use in units.uses:
        where = f"{use.table}{'/' + use.index if use.index else ''}"
        one = by_family.setdefault(f"{where} {family(use.partition, campaign_id)}", [0.0, 0.0])
        one[0] += use.wcu
        one[1] += use.rcu
        key = by_key.setdefault(f"{where} {use.partition}", [0.0, 0.0])
        key[0] += use.wcu
        key[1] += use.rcu

    def each(pair: list[float]) -> dict[str, float]:
        return {"wcu": round(pair[0] / recipients, 4), "rcu": round(pair[1] / recipients, 4)}

    busiest = sorted(by_key.items(), key=lambda item: -max(item[1][0], item[1][1] / 3))[:8]
    return {
        "recipients": recipients,
        "wru_per_recipient": round(units.wru / recipients, 3),
        "rru_per_recipient": round(units.rru / recipients, 3),
        "by_partition_family": {name: each(pair) for name, pair in sorted(by_family.items())},
        "busiest_keys": {
            family(name, campaign_id) if campaign_id in name or WORKSPACE in name else name: each(pair)
            for name, pair in busiest
        },
    }


def measure_capacity(bench: CampaignBench, probe: CapacityProbe) -> dict[str, Any]:
    probe.units = Units()
    probe.active = True
    try:
        run = bench.campaign(CAPACITY_RECIPIENTS, CAPACITY_FIRST)
    finally:
        probe.active = False
    return priced(probe.units, CAPACITY_RECIPIENTS, run.campaign_id)


# ---------------------------------------------------------------------- the run
def measure(
    stack: BenchStack, dynamodb: Any, engine: str, recipients: int, plain_sends: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    # Every DynamoDB client built from here on (the functions build theirs with their first
    # request) can be priced; only the small campaign is.
    probe = CapacityProbe(dynamodb.meta.endpoint_url)
    COUNTER.add_client_hook(probe.hook)
    bench = CampaignBench(stack, dynamodb)
    plain = bench.plain_sends(plain_sends, WARMUP)
    run = bench.campaign(recipients)
    read = time.perf_counter()
    sent_to = bench.messages(run.campaign_id, engine)
    read_seconds = time.perf_counter() - read
    listed = [recipient(number) for number in range(recipients)]
    once = exactly_once(listed, sent_to, run.campaign["counts"], run.campaign["status"])
    capacity = measure_capacity(bench, probe)

    pages, plan = run.work.get("page", Work()), run.work.get("plan", Work())
    per_recipient = run.calls / recipients
    figures = {
        "recipients": recipients,
        "seconds_to_complete": round(run.seconds, 1),
        "seconds_started_to_completed": _seconds_between(
            run.campaign.get("startedAt"), run.campaign.get("completedAt")
        ),
        "status": run.campaign["status"],
        "plan_ms": plan.figures()["ms_p50"],
        "pages": pages.invocations,
        "page_ms_p50": pages.figures()["ms_p50"],
        "page_calls_p50": pages.figures()["calls_per_invocation_p50"],
        "fanout_calls_per_recipient": round(per_recipient, 4),
        "plain_calls_per_send": plain["calls_per_send"],
        "calls_beyond_plain_per_recipient": round(per_recipient - plain["calls_per_send"], 4),
        "messages": once["messages"],
        "distinct_recipients": once["distinct_recipients"],
        "every_recipient_once": once["every_recipient_once"],
        "wru_per_recipient": capacity["wru_per_recipient"],
        "rru_per_recipient": capacity["rru_per_recipient"],
        "upload": run.upload,
    }
    details = {
        "campaign": run.campaign,
        "exactly_once": once,
        "messages_read_seconds": round(read_seconds, 1),
        "plain": plain,
        "calls": {
            "total": run.calls,
            "function": sum(work.calls for work in run.work.values()),
            "api_create_and_start": len(run.api_operations),
            "event_source_mapping": run.mapping.calls,
            "by_operation": dict(sorted(run.operations().items())),
        },
        "work": {kind: work.figures() for kind, work in sorted(run.work.items())},
        "event_source_mapping": vars(run.mapping),
        "capacity": capacity,
        "rate_per_second": RATE_PER_SECOND,
    }
    return figures, details


def run_campaign_bench(
    recipients: int = RECIPIENTS, plain_sends: int = PLAIN_SENDS, engines: tuple[str, ...] = (MOTO,)
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The campaign's figures on moto, and under `dynamodb-local` when asked (SQS and S3 stay on moto)."""
    print(
        f"campaigns: {recipients:,} recipients, {plain_sends} plain sends beside, on "
        f"{', '.join(engines)} ...",
        file=sys.stderr,
        flush=True,
    )
    figures: dict[str, Any] = {}
    details: dict[str, Any] = {}
    for engine in engines:
        stack = start_stack()
        try:
            with dynamodb_engine(stack, engine) as dynamodb:
                measured, seen = measure(stack, dynamodb, engine, recipients, plain_sends)
        finally:
            stack.stop()
        if engine == MOTO:
            figures.update(measured)
            details.update(seen)
        else:
            figures[engine] = measured
            details[engine] = seen
    return figures, details


def _median_of_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure of several runs: the median of its numbers, else the first run's value; a check
    (`every_recipient_once`) holds only when it held in every run."""
    out: dict[str, Any] = {}
    for name, first in runs[0].items():
        values = [run.get(name) for run in runs]
        numbers = [
            value for value in values if isinstance(value, int | float) and not isinstance(value, bool)
        ]
        if isinstance(first, bool):
            out[name] = all(value is True for value in values)
        elif len(numbers) == len(values):
            out[name] = round(statistics.median(numbers), 4)
        else:
            out[name] = first
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.campaigns", description=__doc__)
    parser.add_argument("--recipients", type=int, default=RECIPIENTS)
    parser.add_argument("--plain-sends", type=int, default=PLAIN_SENDS)
    parser.add_argument("--runs", type=int, default=1, help="runs on fresh stacks; figures are their medians")
    parser.add_argument(
        "--dynamodb-local",
        action="store_true",
        help="also with the tables on DynamoDB Local (SQS, S3 on moto)",
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    COUNTER.install()
    engines = (MOTO, DYNAMODB_LOCAL) if args.dynamodb_local else (MOTO,)
    runs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for number in range(args.runs):
        print(f"campaigns: run {number + 1} of {args.runs}", file=sys.stderr, flush=True)
        runs.append(run_campaign_bench(args.recipients, args.plain_sends, engines))
    figures = _median_of_runs([run[0] for run in runs])
    for engine in engines[1:]:
        figures[engine] = _median_of_runs([run[0][engine] for run in runs])
    result = {
        "campaigns": figures,
        "runs": [copy.deepcopy(run[0]) for run in runs],
        "details": [run[1] for run in runs],
        "command": "python -m bench.campaigns " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({"campaigns": figures, "runs": result["runs"]}, indent=2))
    print(f"\nwrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
