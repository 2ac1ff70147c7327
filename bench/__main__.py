"""`python -m bench [--quick] [--no-storm] [--no-outbox-peak]`: measure, write bench/results.json,
print the table.

The exit code is 0 whatever the figures: target checks are reported, never enforced. A ratio that
decides a target is the median of ROUNDS rounds of one run: the API's paths run in rounds that
alternate moto, the limits off and DynamoDB Local, and results.json keeps each ratio's rounds
(`spread`, by the figure's path).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.call_counter import COUNTER

COUNTER.install()  # before any client is built, so every client the handlers use is hooked

from sendonce import composition  # noqa: E402

from bench.auth_lookup import fresh_key_store, look_up, measure_key_lookups  # noqa: E402
from bench.baseline import BaselineHandler  # noqa: E402
from bench.batch import run_batch_bench  # noqa: E402
from bench.campaigns import RECIPIENTS as CAMPAIGN_RECIPIENTS  # noqa: E402
from bench.campaigns import run_campaign_bench  # noqa: E402
from bench.capacity import CapacityProbe, Units, expiry_of, message_life, one_workspace, scaled  # noqa: E402
from bench.capped import run_capped_bench  # noqa: E402
from bench.cold_start import cold_starts, cold_starts_by_runtime, import_time_top  # noqa: E402
from bench.cost import (  # noqa: E402
    PRICES_READ_ON,
    SQS_BATCH_SIZE,
    LambdaUse,
    SendCost,
    delivery_queue_requests,
)
from bench.failover import run_failover_bench  # noqa: E402
from bench.guarded import run_guarded_bench  # noqa: E402
from bench.latency import LatencyRun, merged, run_latency  # noqa: E402
from bench.local_stack import DYNAMODB_LOCAL, ROOT, BenchStack, dynamodb_engine, start_stack  # noqa: E402
from bench.outbox_peak import PEAK, run_outbox_peak  # noqa: E402
from bench.paths import Workload  # noqa: E402
from bench.probes import (  # noqa: E402
    Invocations,
    StreamReaders,
    apply_delivery_reports,
    dispatch,
    hand_off,
    queued_records,
)
from bench.quiet import silenced_stdout  # noqa: E402
from bench.report import checks, cold_start_ratios, ratios, table  # noqa: E402
from bench.stats import ROUNDS, median_of_rounds, mode, percentile, spread, summary_ms  # noqa: E402
from bench.status_events import MESSAGES as EVENT_MESSAGES  # noqa: E402
from bench.status_events import Telling, measure_events, plain_messages  # noqa: E402
from bench.storm import run_storm  # noqa: E402
from bench.templated import run_templated_bench  # noqa: E402
from bench.webhooks import run_webhook_bench  # noqa: E402
from sendonce_local.environment import function_environment  # noqa: E402
from sendonce_local.lambda_runtime import LambdaContext  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
DETAILS = HERE / "details.json"


def _ms(seconds: list[float]) -> float:
    return round(percentile(seconds, 0.5) * 1000, 2)


def _capacity(stack: BenchStack, probe: CapacityProbe) -> tuple[dict[str, Units], dict[str, Telling]]:
    """DynamoDB units of one request of each path, by the billing rules; and of a message's status
    events, with no endpoint and with one (`bench.status_events`)."""
    api = stack.functions["ApiFunction"]
    handler, context = api.load(), LambdaContext(api.spec)
    workload = Workload()
    units: dict[str, Units] = {}
    with silenced_stdout():
        # Unmeasured: the function reads its workspace's limits once a minute, not once a send, and
        # takes the request rate's tokens in leases.
        handler(workload.make("send_new").event, context)
        for path in ("send_new", "duplicate", "send_new_with_key", "replay"):
            # Each path's units averaged over requests: a lease of the rate's tokens (1 WRU) is
            # taken once in several requests.
            taken, limits = Units(), 0.0
            for _ in range(CAPACITY_REQUESTS):
                request = workload.make(path)
                one = probe.measure(lambda request=request: handler(request.event, context))
                limits += _limits_wru(one)
                taken.add(one)
            units[f"{path}.limits"] = Units(round(limits / CAPACITY_REQUESTS, 2))
            each = scaled(taken, 1 / CAPACITY_REQUESTS)
            units[path] = Units(round(each.wru, 2), round(each.rru, 2), sorted(set(taken.detail)), each.uses)
    # The API key check on a miss (a key this execution environment has not found yet); it resets
    # the composition roots, so it comes after the API paths.
    keys = fresh_key_store()
    with silenced_stdout():
        units["auth_miss"] = probe.measure(lambda: look_up(keys))
    # Messages whose lives are a send's alone (no duplicate caught on them): the first one's dispatch
    # and delivery report priced, then the events of the others (`bench.status_events`).
    records = plain_messages(stack, queued_records(stack, PLAIN_POOL))[: 1 + 2 * EVENT_MESSAGES]
    if len(records) < 3:
        raise RuntimeError(f"only {len(records)} queued messages caught no duplicate")
    units["dispatch"] = probe.measure(lambda: dispatch(stack, records[:1]))
    units["delivery_report"] = probe.measure(lambda: apply_delivery_reports(stack, records[:1]))
    dispatch(stack, records[1:])
    apply_delivery_reports(stack, records[1:])
    events = measure_events(stack, probe, records[1:])
    alone, told = events["no_endpoint"], events["one_endpoint"]
    units["events"] = _rounded(alone.per_message(alone.units))
    units["events.one_endpoint"] = _rounded(told.per_message(told.units))
    units["webhook_delivery.one_endpoint"] = _rounded(told.per_message(told.delivery_units))
    return units, events


# Queued messages looked at for lives that are a send's alone; about half are (the keyed sends: the
# latency run's new sends each have a duplicate caught on them).
PLAIN_POOL = 40


def _rounded(units: Units) -> Units:
    return Units(round(units.wru, 2), round(units.rru, 2), sorted(set(units.detail)), units.uses)


SUPPRESSION_PARTITION = "SUPPRESSION#"  # the suppression entries' keys (adapters/dynamodb_suppressions.py)


def _suppression_units(units: Units) -> Units:
    """What the suppression checks among `units` take: a read of the entries, or ConditionChecks on them."""
    uses = [
        use for use in units.uses if use.index is None and use.partition.startswith(SUPPRESSION_PARTITION)
    ]
    return Units(round(sum(use.wcu for use in uses), 2), round(sum(use.rcu for use in uses), 2))


# Requests of each path whose DynamoDB units are averaged.
CAPACITY_REQUESTS = 20
WRU_LINE = re.compile(r"^(?P<table>\S+) .*: (?P<base>[\d.]+) WRU \+ (?P<gsi>[\d.]+) GSI$")


def _limits_wru(units: Units) -> float:
    """The WRU a request of these units spent on LimitsTable (the rate lease and the quota shard)."""
    total = 0.0
    for line in units.detail:
        match = WRU_LINE.match(line)
        if match and match["table"] == "LimitsTable":
            total += float(match["base"]) + float(match["gsi"])
    return total


# Each round after the first on an engine or setting starts with these unmeasured requests of each
# path: the clients are new (the composition roots were reset on the way in).
REWARMUP = 5


def _without_limits(handlers: dict[str, Any], api: Any, rounds: int, seed: int) -> LatencyRun:
    """The same paths with the limits off (no LIMITS_TABLE): what the limits cost in calls and time."""
    saved = os.environ.pop("LIMITS_TABLE", None)
    composition.reset_all()
    try:
        return run_latency(
            handlers, lambda: LambdaContext(api.spec), rounds=rounds, warmup=REWARMUP, seed=seed
        )
    finally:
        if saved is not None:
            os.environ["LIMITS_TABLE"] = saved
        composition.reset_all()


def _on_dynamodb_local(
    stack: BenchStack, baseline_queue: str, api: Any, rounds: int, seed: int
) -> LatencyRun:
    """The same paths and baseline with every table on DynamoDB Local (AWS's own engine; SQS stays
    on moto): what a transaction costs against a put where the engine is DynamoDB's."""
    with dynamodb_engine(stack, DYNAMODB_LOCAL):
        handlers = {"baseline": BaselineHandler("MessagesTable", baseline_queue), "api": api.load()}
        return run_latency(
            handlers, lambda: LambdaContext(api.spec), rounds=rounds, warmup=REWARMUP, seed=seed
        )


@dataclass
class LatencyRounds:
    """The API's paths in ROUNDS rounds, each on moto, then with the limits off, then on DynamoDB Local."""

    moto: list[LatencyRun] = field(default_factory=list)
    without_limits: list[LatencyRun] = field(default_factory=list)
    dynamodb_local: list[LatencyRun] = field(default_factory=list)


def _latency_rounds(
    stack: BenchStack, baseline_queue: str, api: Any, args: argparse.Namespace
) -> LatencyRounds:
    handlers = {"baseline": BaselineHandler("MessagesTable", baseline_queue), "api": api.load()}
    # The requests of the runs before the rounds (300 on moto, a third of that with the limits off
    # and as many on DynamoDB Local), cut into rounds.
    main, other = args.rounds // ROUNDS, max(7, args.rounds // (3 * ROUNDS))
    out = LatencyRounds()
    for number in range(ROUNDS):
        print(
            f"latency, round {number + 1} of {ROUNDS}: {main} interleaved rounds on moto, {other} with the "
            f"limits off, {other} on DynamoDB Local ...",
            file=sys.stderr,
            flush=True,
        )
        warmup = args.warmup if number == 0 else REWARMUP
        composition.reset_all()
        run = run_latency(
            handlers, lambda: LambdaContext(api.spec), rounds=main, warmup=warmup, seed=5 + number
        )
        out.moto.append(run)
        out.without_limits.append(_without_limits(handlers, api, other, seed=105 + number))
        out.dynamodb_local.append(_on_dynamodb_local(stack, baseline_queue, api, other, seed=205 + number))
    return out


def _ratios_of_rounds(runs: list[LatencyRun]) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Each ratio of `ratios` taken round by round: the medians, and each one's rounds."""
    by_round = [
        ratios({path: summary_ms(samples.seconds) for path, samples in run.paths.items()}) for run in runs
    ]
    values = {name: [one[name] for one in by_round] for name in by_round[0]}
    return {name: median_of_rounds(rounds) for name, rounds in values.items()}, values


def measure_in_process(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    stack = start_stack()
    probe = CapacityProbe(stack.endpoint)
    COUNTER.add_client_hook(probe.hook)
    try:
        baseline_queue = stack.client("sqs").create_queue(QueueName="BenchBaselineQueue")["QueueUrl"]
        api = stack.functions["ApiFunction"]
        rounds = _latency_rounds(stack, baseline_queue, api, args)
        run, without_limits, on_dynamodb_local = (
            merged(rounds.moto),
            merged(rounds.without_limits),
            merged(rounds.dynamodb_local),
        )
        failures = {path: samples.failures for path, samples in run.paths.items() if samples.failures}
        if failures:
            print(f"warning: unexpected answers {failures}", file=sys.stderr)
        handed = hand_off(stack, StreamReaders(stack))
        auth = measure_key_lookups(args.invocations)
        records = queued_records(stack, args.invocations)
        dispatched = dispatch(stack, records)
        reported = apply_delivery_reports(stack, records)
        capacity, events = _capacity(stack, probe)
    finally:
        stack.stop()
    # Each item's expiry (TTL) takes nothing of its table but a write of each index it leaves:
    # priced on a message's life on the real adapters (bench/capacity.py), with no endpoint and one.
    capacity["expiry"] = _rounded(expiry_of(message_life(endpoints=0, keyed=False)))
    capacity["expiry.one_endpoint"] = _rounded(expiry_of(message_life(endpoints=1, keyed=False)))

    ratio, ratio_rounds = _ratios_of_rounds(rounds.moto)
    ratio_local, ratio_local_rounds = _ratios_of_rounds(rounds.dynamodb_local)
    off_ratio, off_rounds = _ratios_of_rounds(rounds.without_limits)
    spreads: dict[str, Any] = {
        **{f"ratio.{name}": spread(values, 2) for name, values in ratio_rounds.items()},
        **{f"ratio_dynamodb_local.{name}": spread(values, 2) for name, values in ratio_local_rounds.items()},
        "limits.send_new_p50_ratio_without_limits": spread(off_rounds["send_new_p50"], 2),
    }
    latency = {path: summary_ms(samples.seconds) for path, samples in run.paths.items()}
    latency_local = {path: summary_ms(samples.seconds) for path, samples in on_dynamodb_local.paths.items()}
    calls = {path: mode(samples.calls) for path, samples in run.paths.items() if path != "baseline"}
    calls["dispatch"] = mode(dispatched.calls)
    calls["auth_hit"] = mode(auth.hit.calls)
    calls["auth_miss"] = mode(auth.miss.calls)
    # Per created message, off the request path: the stream's batches of up to 100 creations.
    handoff = {
        "messages": handed.message_bytes,
        "invocations": len(handed.calls),
        "calls_per_message": round(sum(handed.calls) / handed.message_bytes, 3),
        "ms_per_message": round(sum(handed.seconds) * 1000 / handed.message_bytes, 3),
    }
    send_cost, send_cost_one_endpoint = _send_costs(
        stack, capacity, events, latency, handed, dispatched, reported
    )
    off_calls = {
        path: mode(samples.calls) for path, samples in without_limits.paths.items() if path != "baseline"
    }
    limits = {
        "extra_calls": {path: calls[path] - off_calls[path] for path in off_calls},
        "calls_without_limits": off_calls,
        # send_new p50 with limits off over the same runs' baseline (shorter runs than the main ones).
        "send_new_p50_ratio_without_limits": off_ratio["send_new_p50"],
        "wru_of_limits_per_send": capacity["send_new.limits"].wru,
    }
    suppression = {part: _suppression_units(capacity[part]) for part in ("send_new", "dispatch")}
    figures = {
        "calls": calls,
        "latency_ms": latency,
        "ratio": ratio,
        "latency_ms_dynamodb_local": latency_local,
        "ratio_dynamodb_local": ratio_local,
        "handoff": handoff,
        "cost": round(send_cost.usd_per_million(), 2),
        "cost_one_endpoint": round(send_cost_one_endpoint.usd_per_million(), 2),
        "limits": limits,
        "spread": spreads,
    }
    details = {
        "samples": {path: len(samples.seconds) for path, samples in run.paths.items()},
        "unexpected_answers": {
            path: samples.unexpected for path, samples in run.paths.items() if samples.unexpected
        },
        "call_counts_seen": {path: sorted(set(samples.calls)) for path, samples in run.paths.items()},
        "operations": {
            **{path: samples.operations for path, samples in run.paths.items()},
            "dispatch": dispatched.operations,
            "delivery_report": reported.operations,
            "auth_miss": auth.miss.operations,
        },
        "aws_ms_p50": {path: _ms(samples.aws_seconds) for path, samples in run.paths.items()},
        "dispatch_ms_p50": _ms(dispatched.seconds),
        "delivery_report_ms_p50": _ms(reported.seconds),
        "delivery_report_calls": mode(reported.calls),
        "auth_miss_ms_p50": _ms(auth.miss.seconds),
        "auth_hit_ms_p50": round(percentile(auth.hit.seconds, 0.5) * 1000, 3),
        "dynamodb_units": {
            path: {"wru": units.wru, "rru": units.rru, "detail": units.detail}
            for path, units in capacity.items()
        },
        "sqs_message_bytes": dispatched.message_bytes,
        "status_events": {name: telling.figures() for name, telling in events.items()},
        "cost_usd_per_million_sends": {
            "prices_read_on": PRICES_READ_ON,
            "lines": {name: round(value, 4) for name, value in send_cost.lines().items()},
            "lines_one_endpoint": {
                name: round(value, 4) for name, value in send_cost_one_endpoint.lines().items()
            },
            "wru": round(send_cost.wru, 2),
            "rru": round(send_cost.rru, 2),
            "wru_one_endpoint": round(send_cost_one_endpoint.wru, 2),
            "rru_one_endpoint": round(send_cost_one_endpoint.rru, 2),
            "wru_by_part": {part: capacity[part].wru for part in (*LIFE, *EVENTS_ONE_ENDPOINT)},
            "rru_by_part": {part: capacity[part].rru for part in (*LIFE, *EVENTS_ONE_ENDPOINT)},
            "suppression_checks": {
                "wru": round(sum(units.wru for units in suppression.values()), 2),
                "rru": round(sum(units.rru for units in suppression.values()), 2),
                "by_part": {
                    part: {"wru": units.wru, "rru": units.rru} for part, units in suppression.items()
                },
            },
        },
    }
    return figures, details


# A message's life, one delivery report of it, its status events and every item's expiry, with no
# endpoint; with one endpoint its events are larger and each is delivered.
LIFE = ("send_new", "dispatch", "delivery_report", "events", "expiry")
EVENTS_ONE_ENDPOINT = ("events.one_endpoint", "webhook_delivery.one_endpoint", "expiry.one_endpoint")


def _send_costs(
    stack: BenchStack,
    capacity: dict[str, Units],
    events: dict[str, Telling],
    latency: dict[str, dict[str, float]],
    handed: Invocations,
    dispatched: Invocations,
    reported: Invocations,
) -> tuple[SendCost, SendCost]:
    """What a million sends cost: with no status-webhook endpoint, and with one taking every event."""
    specs = stack.template.functions
    alone, told = events["no_endpoint"], events["one_endpoint"]

    def changes(telling: Telling) -> LambdaUse:
        memory = specs["MessageChangesFunction"].memory_mb
        return LambdaUse.stream_share(memory, telling.ms_per_record(), telling.records_per_message())

    without = SendCost(
        wru=sum(capacity[part].wru for part in LIFE),
        rru=sum(capacity[part].rru for part in LIFE),
        sqs_message_bytes=dispatched.message_bytes,
        api=LambdaUse(specs["ApiFunction"].memory_mb, latency["send_new"]["p50"]),
        dispatcher=LambdaUse.in_batches(
            specs["DispatchSmsFunction"].memory_mb, _ms(dispatched.seconds), SQS_BATCH_SIZE
        ),
        handoff=LambdaUse(
            specs["HandoffFunction"].memory_mb,
            _ms(handed.seconds),
            len(handed.seconds) / handed.message_bytes,
        ),
        status=LambdaUse.in_batches(specs["StatusFunction"].memory_mb, _ms(reported.seconds), SQS_BATCH_SIZE),
        changes=changes(alone),
    )
    with_parts = (*(part for part in LIFE if part not in ("events", "expiry")), *EVENTS_ONE_ENDPOINT)
    one_endpoint = replace(
        without,
        wru=sum(capacity[part].wru for part in with_parts),
        rru=sum(capacity[part].rru for part in with_parts),
        changes=changes(told),
        deliveries=LambdaUse.in_batches(
            specs["WebhookDeliveryFunction"].memory_mb, _ms(told.delivered.seconds), SQS_BATCH_SIZE
        ).times(told.deliveries_per_message()),
        webhook_sqs_requests=delivery_queue_requests(
            told.queue_calls_per_message(), told.deliveries_per_message()
        ),
    )
    return without, one_endpoint


def measure_cold_starts(
    args: argparse.Namespace,
) -> tuple[dict[str, float], dict[str, Any], dict[str, Any]]:
    from bench.local_stack import TEMPLATE, free_ports  # noqa: PLC0415
    from sendonce_local.template import load_template  # noqa: PLC0415

    template = load_template(TEMPLATE)
    environment = function_environment(template, free_ports())
    print(f"cold start: {args.cold_runs} fresh interpreters per function ...", file=sys.stderr, flush=True)
    cold = cold_starts(template.functions, environment, ROOT, args.cold_runs)
    print("cold start by runtime, the layer as it ships ...", file=sys.stderr, flush=True)
    by_runtime = cold_starts_by_runtime(template.functions, environment, ROOT, args.cold_runs)
    by_runtime["deployed"] = str(template.globals.get("Function", {}).get("Runtime", ""))
    return cold, by_runtime, import_time_top(template.functions["ApiFunction"], environment, ROOT)


def _lift_spread(section: str, figures: dict[str, Any], into: dict[str, Any]) -> None:
    """A part's rounds (its figures' `spread`, at any depth) into results.json's one `spread`, each
    under its figure's path."""
    for name, kept in (figures.pop("spread", None) or {}).items():
        into[f"{section}.{name}"] = kept
    for name, value in figures.items():
        if isinstance(value, dict):
            _lift_spread(f"{section}.{name}", value, into)


def _optional_part(
    name: str,
    skip: bool,
    details: dict[str, Any],
    run: Callable[[], tuple[dict[str, Any], dict[str, Any]]],
) -> dict[str, Any] | None:
    """A part of the run that may be skipped, or fail alone: the rest of the figures still stand."""
    if skip:
        return None
    try:
        figures, details[name] = run()
    except Exception as error:
        details[name] = {"error": repr(error)}
        print(f"{name} failed: {error!r}", file=sys.stderr)
        return None
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="a fast smoke run (fewer samples, smaller storm)"
    )
    parser.add_argument("--no-storm", action="store_true", help="skip the storm through `sendonce run`")
    parser.add_argument(
        "--no-outbox-peak", action="store_true", help="skip the outbox's 10,000 messages due in one minute"
    )
    parser.add_argument("--no-webhooks", action="store_true", help="skip the status webhook figures")
    parser.add_argument("--no-batch", action="store_true", help="skip the batch figures")
    parser.add_argument("--no-templates", action="store_true", help="skip the templated send figures")
    parser.add_argument("--no-failover", action="store_true", help="skip the failover delivery figures")
    parser.add_argument("--no-send-controls", action="store_true", help="skip the capped send figures")
    parser.add_argument("--no-protections", action="store_true", help="skip the guarded send figures")
    parser.add_argument(
        "--no-campaigns",
        action="store_true",
        help="skip the 100,000-recipient campaign (alone: bench.campaigns)",
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.rounds, args.warmup = (60, 5) if args.quick else (300, 20)
    args.invocations = 20 if args.quick else 100
    args.cold_runs = 3 if args.quick else 21
    args.storm_requests = 300 if args.quick else 1000
    args.outbox_peak = 1000 if args.quick else PEAK
    warnings.filterwarnings("ignore", message="No application metrics to publish")

    figures, details = measure_in_process(args)
    cold, by_runtime, importtime = measure_cold_starts(args)
    details["importtime_api_function"] = importtime
    storm = None
    if not args.no_storm:
        print(f"storm: {args.storm_requests} requests at concurrency 32 ...", file=sys.stderr, flush=True)
        try:
            result = run_storm(args.storm_requests, concurrency=32)
            storm = result.figures()
            details["storm"] = {
                "statuses": result.statuses,
                "distinct_delivered": result.distinct_delivered,
                "delivered_by_channel": result.by_channel,
                "unexpected": result.unexpected,
            }
        except Exception as error:  # the rest of the figures still stand
            details["storm"] = {"error": repr(error)}
            print(f"storm failed: {error!r}", file=sys.stderr)

    webhooks = _optional_part(
        "webhooks",
        args.no_webhooks,
        details,
        lambda: run_webhook_bench(
            rounds=args.rounds,
            told_changes=20,
            messages=30 if args.quick else 100,
            lanes_messages=10 if args.quick else 40,
        ),
    )
    batch = _optional_part(
        "batch", args.no_batch, details, lambda: run_batch_bench(rounds=3 if args.quick else 5)
    )
    templates = _optional_part(
        "templates", args.no_templates, details, lambda: run_templated_bench(rounds=5 if args.quick else 15)
    )
    failover = _optional_part(
        "failover", args.no_failover, details, lambda: run_failover_bench(rounds=3 if args.quick else 5)
    )
    send_controls = _optional_part(
        "send_controls",
        args.no_send_controls,
        details,
        lambda: run_capped_bench(rounds=5 if args.quick else 15),
    )
    protections = _optional_part(
        "protections",
        args.no_protections,
        details,
        lambda: run_guarded_bench(rounds=5 if args.quick else 15),
    )
    campaigns = _optional_part(
        "campaigns",
        args.no_campaigns,
        details,
        lambda: run_campaign_bench(recipients=10_000 if args.quick else CAMPAIGN_RECIPIENTS),
    )
    if campaigns is None and not args.no_campaigns:  # failed: its checks fail, never vanish
        campaigns = {"error": details["campaigns"].get("error")}

    # One workspace at 10,000 sends a second, partition by partition (DynamoDB's billing rules on the
    # item images of one message's life).
    at_10k = one_workspace(10_000)
    busiest = max(
        at_10k["partitions"], key=lambda row: max(row["wcu_per_second"] / 1000, row["rcu_per_second"] / 3000)
    )
    partitions = {
        "all_under": at_10k["all_under"],
        "over": at_10k["over"],
        "busiest": f"{busiest['table']} {busiest['index'] or ''} {busiest['partition']}".replace("  ", " "),
        "busiest_wcu_per_second": round(busiest["wcu_per_second"], 1),
        "busiest_rcu_per_second": round(busiest["rcu_per_second"], 1),
    }
    details["partitions_at_10k"] = at_10k

    outbox_peak = None
    if not args.no_outbox_peak:
        peak = run_outbox_peak(args.outbox_peak)
        outbox_peak = peak.figures()
        details["outbox_peak"] = peak.details()

    spreads = figures["spread"]
    for section, figures_of in (
        ("webhooks", webhooks),
        ("batch", batch),
        ("templates", templates),
        ("failover", failover),
        ("send_controls", send_controls),
        ("protections", protections),
    ):
        if figures_of:
            _lift_spread(section, figures_of, spreads)
    results: dict[str, Any] = {
        "calls": figures["calls"],
        "latency_ms": figures["latency_ms"],
        "ratio": figures["ratio"],
        "latency_ms_dynamodb_local": figures["latency_ms_dynamodb_local"],
        "ratio_dynamodb_local": figures["ratio_dynamodb_local"],
        "handoff": figures["handoff"],
        "cold_start_ms": cold,
        "cold_start_ratio": cold_start_ratios(cold),
        "cold_start_by_runtime": by_runtime,
        "storm": storm,
        "outbox_peak": outbox_peak,
        "webhooks": webhooks,
        "batch": batch,
        "templates": templates,
        "failover": failover,
        "send_controls": send_controls,
        "protections": protections,
        "campaigns": campaigns,
        "cost_usd_per_million_sends": figures["cost"],
        "cost_usd_per_million_sends_one_endpoint": figures["cost_one_endpoint"],
        "limits": figures["limits"],
        "partitions_at_10k_sends_per_second": partitions,
        "spread": spreads,
    }
    details["checks"] = [vars(check) for check in checks(results)]
    details["mode"] = "quick" if args.quick else "full"
    args.output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    (args.output.parent / DETAILS.name).write_text(json.dumps(details, indent=2) + "\n", encoding="utf-8")
    print(table(results, details))
    print(f"\nwrote {args.output} and {DETAILS.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
