"""`python -m bench [--quick] [--no-storm] [--no-outbox-peak]`: measure, write bench/results.json,
print the table.

The exit code is 0 whatever the figures: target checks are reported, never enforced.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any

from bench.call_counter import COUNTER

COUNTER.install()  # before any client is built, so every client the handlers use is hooked

from sendonce import composition  # noqa: E402

from bench.auth_lookup import fresh_key_store, look_up, measure_key_lookups  # noqa: E402
from bench.baseline import BaselineHandler  # noqa: E402
from bench.batch import run_batch_bench  # noqa: E402
from bench.capacity import CapacityProbe, Units, one_workspace  # noqa: E402
from bench.cold_start import cold_starts, cold_starts_by_runtime, import_time_top  # noqa: E402
from bench.cost import PRICES_READ_ON, SQS_BATCH_SIZE, LambdaUse, SendCost  # noqa: E402
from bench.latency import run_latency  # noqa: E402
from bench.local_stack import DYNAMODB_LOCAL, ROOT, BenchStack, dynamodb_engine, start_stack  # noqa: E402
from bench.outbox_peak import PEAK, run_outbox_peak  # noqa: E402
from bench.paths import Workload  # noqa: E402
from bench.probes import (  # noqa: E402
    StreamReaders,
    apply_delivery_reports,
    dispatch,
    hand_off,
    queued_records,
)
from bench.quiet import silenced_stdout  # noqa: E402
from bench.report import checks, cold_start_ratios, ratios, table  # noqa: E402
from bench.stats import mode, percentile, summary_ms  # noqa: E402
from bench.storm import run_storm  # noqa: E402
from bench.webhooks import run_webhook_bench  # noqa: E402
from sendonce_local.environment import function_environment  # noqa: E402
from sendonce_local.lambda_runtime import LambdaContext  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
DETAILS = HERE / "details.json"


def _ms(seconds: list[float]) -> float:
    return round(percentile(seconds, 0.5) * 1000, 2)


def _capacity(stack: BenchStack, probe: CapacityProbe) -> dict[str, Units]:
    """DynamoDB units of one request of each path, by the billing rules."""
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
            units[path] = Units(
                round(taken.wru / CAPACITY_REQUESTS, 2),
                round(taken.rru / CAPACITY_REQUESTS, 2),
                sorted(set(taken.detail)),
            )
    # The API key check on a miss (a key this execution environment has not found yet); it resets
    # the composition roots, so it comes after the API paths.
    keys = fresh_key_store()
    with silenced_stdout():
        units["auth_miss"] = probe.measure(lambda: look_up(keys))
    records = queued_records(stack, 1)
    units["dispatch"] = probe.measure(lambda: dispatch(stack, records))
    units["delivery_report"] = probe.measure(lambda: apply_delivery_reports(stack, records))
    return units


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


def _without_limits(handlers: dict[str, Any], api: Any, args: argparse.Namespace) -> Any:
    """The same paths with the limits off (no LIMITS_TABLE): what the limits cost in calls and time."""
    saved = os.environ.pop("LIMITS_TABLE", None)
    composition.reset_all()
    try:
        rounds = max(20, args.rounds // 3)
        print(f"latency without limits: {rounds} interleaved rounds ...", file=sys.stderr, flush=True)
        return run_latency(handlers, lambda: LambdaContext(api.spec), rounds=rounds, warmup=5)
    finally:
        if saved is not None:
            os.environ["LIMITS_TABLE"] = saved
        composition.reset_all()


def _on_dynamodb_local(stack: BenchStack, baseline_queue: str, api: Any, args: argparse.Namespace) -> Any:
    """The same paths and baseline with every table on DynamoDB Local (AWS's own engine; SQS stays
    on moto): what a transaction costs against a put where the engine is DynamoDB's."""
    with dynamodb_engine(stack, DYNAMODB_LOCAL):
        handlers = {"baseline": BaselineHandler("MessagesTable", baseline_queue), "api": api.load()}
        rounds = max(20, args.rounds // 3)
        print(f"latency on DynamoDB Local: {rounds} interleaved rounds ...", file=sys.stderr, flush=True)
        return run_latency(handlers, lambda: LambdaContext(api.spec), rounds=rounds, warmup=5)


def measure_in_process(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    stack = start_stack()
    probe = CapacityProbe(stack.endpoint)
    COUNTER.add_client_hook(probe.hook)
    try:
        baseline_queue = stack.client("sqs").create_queue(QueueName="BenchBaselineQueue")["QueueUrl"]
        api = stack.functions["ApiFunction"]
        handlers = {"baseline": BaselineHandler("MessagesTable", baseline_queue), "api": api.load()}
        print(f"latency: {args.rounds} interleaved rounds ...", file=sys.stderr, flush=True)
        run = run_latency(handlers, lambda: LambdaContext(api.spec), rounds=args.rounds, warmup=args.warmup)
        failures = {path: samples.failures for path, samples in run.paths.items() if samples.failures}
        if failures:
            print(f"warning: unexpected answers {failures}", file=sys.stderr)
        without_limits = _without_limits(handlers, api, args)
        on_dynamodb_local = _on_dynamodb_local(stack, baseline_queue, api, args)
        handed = hand_off(stack, StreamReaders(stack))
        auth = measure_key_lookups(args.invocations)
        records = queued_records(stack, args.invocations)
        dispatched = dispatch(stack, records)
        reported = apply_delivery_reports(stack, records)
        capacity = _capacity(stack, probe)
    finally:
        stack.stop()

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
    specs = stack.template.functions
    per_send = ("send_new", "dispatch", "delivery_report")  # a message's life, one report of it
    send_cost = SendCost(
        wru=sum(capacity[part].wru for part in per_send),
        rru=sum(capacity[part].rru for part in per_send),
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
    )
    off_calls = {
        path: mode(samples.calls) for path, samples in without_limits.paths.items() if path != "baseline"
    }
    off_p50 = {path: summary_ms(samples.seconds)["p50"] for path, samples in without_limits.paths.items()}
    limits = {
        "extra_calls": {path: calls[path] - off_calls[path] for path in off_calls},
        "calls_without_limits": off_calls,
        # send_new p50 with limits off over that run's baseline (a shorter run than the main one).
        "send_new_p50_ratio_without_limits": round(off_p50["send_new"] / off_p50["baseline"], 2),
        "wru_of_limits_per_send": capacity["send_new.limits"].wru,
    }
    figures = {
        "calls": calls,
        "latency_ms": latency,
        "latency_ms_dynamodb_local": latency_local,
        "handoff": handoff,
        "cost": round(send_cost.usd_per_million(), 2),
        "limits": limits,
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
        "cost_usd_per_million_sends": {
            "prices_read_on": PRICES_READ_ON,
            "lines": {name: round(value, 4) for name, value in send_cost.lines().items()},
        },
    }
    return figures, details


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

    webhooks = None
    if not args.no_webhooks:
        try:
            webhooks, details["webhooks"] = run_webhook_bench(
                rounds=args.rounds,
                told_changes=20,
                messages=30 if args.quick else 100,
                lanes_messages=10 if args.quick else 40,
            )
        except Exception as error:  # the rest of the figures still stand
            details["webhooks"] = {"error": repr(error)}
            print(f"webhooks failed: {error!r}", file=sys.stderr)

    batch = None
    if not args.no_batch:
        try:
            batch, details["batch"] = run_batch_bench(rounds=3 if args.quick else 5)
        except Exception as error:  # the rest of the figures still stand
            details["batch"] = {"error": repr(error)}
            print(f"batch failed: {error!r}", file=sys.stderr)

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

    results: dict[str, Any] = {
        "calls": figures["calls"],
        "latency_ms": figures["latency_ms"],
        "ratio": ratios(figures["latency_ms"]),
        "latency_ms_dynamodb_local": figures["latency_ms_dynamodb_local"],
        "ratio_dynamodb_local": ratios(figures["latency_ms_dynamodb_local"]),
        "handoff": figures["handoff"],
        "cold_start_ms": cold,
        "cold_start_ratio": cold_start_ratios(cold),
        "cold_start_by_runtime": by_runtime,
        "storm": storm,
        "outbox_peak": outbox_peak,
        "webhooks": webhooks,
        "batch": batch,
        "cost_usd_per_million_sends": figures["cost"],
        "limits": figures["limits"],
        "partitions_at_10k_sends_per_second": partitions,
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
