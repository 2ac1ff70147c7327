"""The deployed stack's timing, retention and alarms, read from template.yaml (the README, Deploy).

A queue hides a received record at least six times as long as its consumer may run, so a batch still
running is never handed to a second consumer; a provider call always fits in a dispatcher's run.
Every log group expires, and messages carry a retention. What breaks the promise raises an alarm.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from sendonce import channels
from sendonce.adapters import dynamodb_dedup_locks
from sendonce.channels import ChannelSpec
from sendonce.dispatch.outbox import metric_name
from sendonce.dispatch.retry_policy import RetryPolicy
from sendonce.entrypoints.dispatch import PROVIDER_CALL_MARGIN_SECONDS
from sendonce.entrypoints.webhook_delivery import DELIVERY_WORKERS

from sendonce_local.template import Template, load_template

REPO = Path(__file__).resolve().parents[2]
LOG_GROUP = "AWS::Logs::LogGroup"
# A provider call, then the claim's record and the batch's answer, within the dispatcher's Timeout.
PROVIDER_MARGIN_SECONDS = 10
LOCK_RELEASE_FAILED = "message.dedup.lock_release_failed"
# Who releases dedup locks: the API (cancel), the dispatchers (a failed send), the status function
# (a failed event). Their logs carry a failed release.
LOCK_RELEASERS = {
    "ApiFunction",
    "DispatchSmsFunction",
    "DispatchImessageFunction",
    "DispatchEmailFunction",
    "StatusFunction",
}
# The metric each alarm watches: each one is a message whose fate needs a person.
ALARMED_METRICS = {
    "MessageUnknown",
    "OutboxStrandedUnknown",
    "OutboxReclaimCapReached",
    "DedupLockReleaseFailed",
}


@pytest.fixture(scope="module")
def template() -> Template:
    return load_template(REPO / "template.yaml")


def _of_type(template: Template, kind: str) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource["Properties"]
        for logical_id, resource in template.resources.items()
        if resource["Type"] == kind
    }


# ------------------------------------------------------------------------------------ visibility
def test_every_queue_with_a_redrive_policy_has_a_consumer(template: Template) -> None:
    consumed = {mapping.queue_id for mapping in template.sqs_mappings}
    redriven = {queue.logical_id for queue in template.queues if "RedrivePolicy" in queue.properties}

    assert redriven == consumed


@pytest.mark.parametrize(
    "queue_id",
    [
        "SmsQueue",
        "ImessageQueue",
        "EmailQueue",
        "EventsQueue",
        "WebhookDeliveryQueue",
        "WebhookSlowLaneQueue",
    ],
)
def test_a_queue_hides_a_record_six_times_its_consumers_timeout(template: Template, queue_id: str) -> None:
    (queue,) = [queue for queue in template.queues if queue.logical_id == queue_id]
    consumers = [mapping.function_id for mapping in template.sqs_mappings if mapping.queue_id == queue_id]

    assert consumers
    for function_id in consumers:
        timeout = template.functions[function_id].timeout_seconds
        assert int(queue.properties["VisibilityTimeout"]) >= 6 * timeout, (queue_id, function_id)


def test_the_longest_provider_timeout_fits_in_a_dispatchers_run(template: Template) -> None:
    longest = int(template.parameters["ProviderTimeoutSeconds"]["MaxValue"])
    dispatchers = [
        spec
        for spec in template.functions.values()
        if spec.environment.get("SENDONCE_PROVIDER_TIMEOUT_SECONDS") == {"Ref": "ProviderTimeoutSeconds"}
    ]

    assert len(dispatchers) == 3
    # A dispatcher claims no message once less than a call plus its margin is left: a fresh run
    # always has room for one, and the slowest call still leaves time to record its outcome.
    assert PROVIDER_CALL_MARGIN_SECONDS <= PROVIDER_MARGIN_SECONDS
    for spec in dispatchers:
        assert longest + PROVIDER_MARGIN_SECONDS <= spec.timeout_seconds, spec.logical_id


# Each queue's consumer is bounded by its event source's MaximumConcurrency, a parameter; the
# webhook delivery function's two lanes each have their own (issue 27).
CONCURRENCY_PARAMETERS = {
    "WebhookDeliveryQueue": "WebhookDeliveryMaxConcurrency",
    "WebhookSlowLaneQueue": "WebhookSlowLaneMaxConcurrency",
}
# The campaign fan-out has its own too: its runs are long, and each campaign keeps its own pace; so
# do erasures.
OWN_CONCURRENCY_PARAMETERS = {
    **CONCURRENCY_PARAMETERS,
    "CampaignQueue": "CampaignMaxConcurrency",
    "ErasureQueue": "ErasureMaxConcurrency",  # rare, each a recipient's messages paged through
}


def test_a_queue_consumer_is_bounded_by_its_event_source(template: Template) -> None:
    for mapping in template.sqs_mappings:
        events = template.resources[mapping.function_id]["Properties"]["Events"]
        scaling = events[mapping.event_name]["Properties"]["ScalingConfig"]
        parameter = OWN_CONCURRENCY_PARAMETERS.get(mapping.queue_id, "DispatcherMaxConcurrency")
        assert scaling == {"MaximumConcurrency": {"Ref": parameter}}, mapping.queue_id
        assert int(template.parameters[parameter]["MinValue"]) >= 2  # AWS's least


def test_the_webhook_lanes_feed_one_function_whose_concurrency_is_their_sum(template: Template) -> None:
    lanes = {m.queue_id: m for m in template.sqs_mappings if m.function_id == "WebhookDeliveryFunction"}

    assert set(lanes) == set(CONCURRENCY_PARAMETERS)
    # A batch's records are delivered side by side, one thread each.
    assert all(mapping.batch_size == DELIVERY_WORKERS for mapping in lanes.values())
    assert all(mapping.report_batch_item_failures for mapping in lanes.values())
    assert int(template.parameters["WebhookSlowLaneMaxConcurrency"]["Default"]) == 10
    for parameter in CONCURRENCY_PARAMETERS.values():
        assert "sum" in template.parameters[parameter]["Description"]


def test_the_delivery_functions_run_covers_the_slow_lanes_full_wait(template: Template) -> None:
    """The slow lane gives an endpoint the promised 15 s; the event's read before and the writes
    after (the attempt, the flag, a postponement) need a margin; the batch's records run side by side."""
    from sendonce.status_webhooks.delivery import FAST_LANE_PATIENCE_SECONDS  # noqa: PLC0415

    timeout = template.functions["WebhookDeliveryFunction"].timeout_seconds
    assert timeout >= 15 + 5
    assert FAST_LANE_PATIENCE_SECONDS < 15


def test_the_slow_lane_is_redriven_encrypted_and_alarmed_like_the_fast_lane(template: Template) -> None:
    queues = {queue.logical_id: queue.properties for queue in template.queues}
    alarms = _of_type(template, "AWS::CloudWatch::Alarm")
    for lane in ("WebhookDeliveryQueue", "WebhookSlowLaneQueue"):
        dead_letters = lane.replace("Queue", "DeadLetterQueue")
        redrive = queues[lane]["RedrivePolicy"]
        assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": [dead_letters, "Arn"]}
        assert int(redrive["maxReceiveCount"]) == 30
        assert queues[lane]["KmsMasterKeyId"] == queues[dead_letters]["KmsMasterKeyId"] == "alias/aws/sqs"
        watched = [
            alarm
            for alarm in alarms.values()
            if alarm.get("Dimensions")
            == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [dead_letters, "QueueName"]}}]
        ]
        assert len(watched) == 1, dead_letters


# ------------------------------------------------------------------------------------- retention
def test_log_retention_is_a_parameter_of_30_days_by_default(template: Template) -> None:
    spec = template.parameters["LogRetentionDays"]

    assert spec["Type"] == "Number"
    assert int(spec["Default"]) == 30
    assert 30 in [int(value) for value in spec["AllowedValues"]]


def test_every_log_group_expires(template: Template) -> None:
    groups = _of_type(template, LOG_GROUP)

    assert groups
    for logical_id, properties in groups.items():
        assert properties["RetentionInDays"] == {"Ref": "LogRetentionDays"}, logical_id


@pytest.mark.parametrize(
    "function_id",
    [
        "ApiFunction",
        "DispatchSmsFunction",
        "DispatchImessageFunction",
        "DispatchEmailFunction",
        "StatusFunction",
        "OutboxFunction",
    ],
)
def test_a_function_logs_to_its_own_expiring_group(template: Template, function_id: str) -> None:
    properties = template.resources[function_id]["Properties"]
    group_id = properties["LoggingConfig"]["LogGroup"]["Ref"]

    assert template.resource_type(group_id) == LOG_GROUP
    assert function_id in str(template.resources[group_id]["Properties"]["LogGroupName"])
    others = {
        template.resources[other]["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        for other in template.functions
        if other != function_id
    }
    assert group_id not in others


def test_every_function_logs_to_a_group_of_the_stack(template: Template) -> None:
    for function_id in template.functions:
        assert "LoggingConfig" in template.resources[function_id]["Properties"], function_id


def test_the_api_access_log_goes_to_an_expiring_group(template: Template) -> None:
    settings = template.resources["HttpApi"]["Properties"]["AccessLogSettings"]
    destination = settings["DestinationArn"]["Fn::Sub"]

    assert destination.endswith(":log-group:${ApiAccessLogGroup}")
    assert template.resource_type("ApiAccessLogGroup") == LOG_GROUP
    assert "$context.requestId" in settings["Format"]


def test_messages_carry_a_retention_of_90_days_by_default(template: Template) -> None:
    spec = template.parameters["MessageRetentionDays"]

    assert spec["Type"] == "Number"
    assert int(spec["Default"]) == 90
    assert int(spec["MinValue"]) == 1
    api = template.functions["ApiFunction"].environment
    assert api["SENDONCE_MESSAGE_RETENTION_DAYS"] == {"Ref": "MessageRetentionDays"}


def test_every_table_can_be_restored_to_a_point_in_time(template: Template) -> None:
    for table in template.tables:
        recovery = table.properties.get("PointInTimeRecoverySpecification") or {}
        assert recovery.get("PointInTimeRecoveryEnabled") is True, table.logical_id


# ---------------------------------------------------------------------------------------- alarms
@pytest.mark.parametrize("metric", sorted(ALARMED_METRICS))
def test_a_message_whose_fate_needs_a_person_raises_an_alarm(template: Template, metric: str) -> None:
    alarms = [
        properties
        for properties in _of_type(template, "AWS::CloudWatch::Alarm").values()
        if properties.get("MetricName") == metric
    ]

    assert len(alarms) == 1, metric
    (alarm,) = alarms
    assert alarm["Namespace"] == "sendonce"
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "sendonce"}]
    assert alarm["Statistic"] == "Sum"
    assert (alarm["ComparisonOperator"], int(alarm["Threshold"])) == ("GreaterThanThreshold", 0)
    assert alarm["AlarmActions"]["Fn::If"][0] == "HasAlarmTopic"


def test_the_alarmed_outbox_metrics_are_the_ones_the_outbox_emits() -> None:
    assert metric_name("stranded_unknown") in ALARMED_METRICS
    assert metric_name("reclaim_cap_reached") in ALARMED_METRICS


def test_a_failed_lock_release_in_any_log_becomes_the_alarmed_metric(template: Template) -> None:
    assert LOCK_RELEASE_FAILED in inspect.getsource(dynamodb_dedup_locks)  # the event the code logs
    filters = _of_type(template, "AWS::Logs::MetricFilter")
    watched = set()
    for properties in filters.values():
        if LOCK_RELEASE_FAILED not in properties["FilterPattern"]:
            continue
        assert properties["FilterPattern"] == f'{{ $.event = "{LOCK_RELEASE_FAILED}" }}'
        (transformation,) = properties["MetricTransformations"]
        assert transformation["MetricNamespace"] == "sendonce"
        assert transformation["MetricName"] == "DedupLockReleaseFailed"
        assert transformation["Dimensions"] == [{"Key": "service", "Value": "$.service"}]
        group_id = properties["LogGroupName"]["Ref"]
        watched |= {
            function_id
            for function_id in template.functions
            if template.resources[function_id]["Properties"]["LoggingConfig"]["LogGroup"] == {"Ref": group_id}
        }

    assert watched == LOCK_RELEASERS


@pytest.mark.parametrize("spec", channels.all_specs(), ids=lambda spec: spec.name)
def test_an_hour_of_throttling_fits_in_a_channel_queues_receives(
    template: Template, spec: ChannelSpec
) -> None:
    # Each throttled attempt is one receive of the record; the shortest waits the jitter allows make
    # the most receives before the hour is over. The record must not reach its dead-letter queue first.
    policy, waited, receives = RetryPolicy(), 0.0, 0
    while waited < policy.throttle_budget_seconds:
        receives += 1
        ceiling = min(policy.throttle_cap_seconds, policy.base_seconds * 2 ** min(receives - 1, 62))
        waited += max(1, ceiling / 2)
    redrive = template.resources[f"{spec.resource_name}Queue"]["Properties"]["RedrivePolicy"]
    assert redrive["maxReceiveCount"] > receives + 1


# ------------------------------------------------------------------------------------ runtime
# Lambda runs SnapStart for Python from 3.12 on.
SNAPSTART_PYTHONS = {"python3.12", "python3.13"}


def test_the_layer_is_built_and_compiled_for_the_functions_runtime(template: Template) -> None:
    runtime = template.globals["Function"]["Runtime"]
    layer = template.resources["SendonceLayer"]["Properties"]
    makefile = (REPO / "layers" / "sendonce" / "Makefile").read_text(encoding="utf-8")

    assert layer["CompatibleRuntimes"] == [runtime]
    assert f"PYTHON_VERSION := {runtime.removeprefix('python')}\n" in makefile
    # A .pyc used whatever the modification times the zip and Lambda's file system leave its source.
    assert "--invalidation-mode unchecked-hash" in makefile
    for resource in template.resources.values():
        if resource["Type"] == "AWS::Serverless::Function":
            assert "Runtime" not in resource["Properties"], "every function runs the one runtime"


def test_snapstart_is_a_parameter_off_by_default_for_every_function(template: Template) -> None:
    parameter = template.parameters["SnapStart"]
    function_globals = template.globals["Function"]

    assert parameter["Default"] == "off"
    assert set(parameter["AllowedValues"]) == {"on", "off"}
    assert template.conditions["SnapStartOn"] == {"Fn::Equals": [{"Ref": "SnapStart"}, "on"]}
    assert function_globals["SnapStart"] == {
        "ApplyOn": {"Fn::If": ["SnapStartOn", "PublishedVersions", "None"]}
    }
    assert function_globals["Runtime"] in SNAPSTART_PYTHONS
    # A snapshot serves published versions only: every event source and route invokes the alias.
    assert function_globals["AutoPublishAlias"]


def test_what_every_function_shares_is_said_once_in_globals(template: Template) -> None:
    """A property with one value on every function goes in Globals; a function restates none of them."""
    functions = [
        resource["Properties"]
        for resource in template.resources.values()
        if resource["Type"] == "AWS::Serverless::Function"
    ]
    function_globals = template.globals["Function"]

    shared = set.intersection(*(set(properties) for properties in functions))
    repeated = {name for name in shared if all(p[name] == functions[0][name] for p in functions)}
    assert not repeated, f"every function sets {sorted(repeated)} alike: say it once in Globals"
    for properties in functions:
        restated = {name for name, value in properties.items() if function_globals.get(name) == value}
        assert not restated, f"{properties['CodeUri']} restates {sorted(restated)} of Globals"
    variables = [set((p.get("Environment") or {}).get("Variables") or {}) for p in functions]
    everywhere = set.intersection(*variables)
    assert not everywhere, f"every function sets {sorted(everywhere)}: say it once in Globals"


def test_tracing_is_off_and_nothing_traces(template: Template) -> None:
    """Decided by its cold-start cost (docs/performance.md, "Tracing"): no function traces, no role
    gets X-Ray's policy (SAM adds none for Disabled), and the layer carries no tracer."""
    assert template.globals["Function"]["Tracing"] == "Disabled"
    for resource in template.resources.values():
        if resource["Type"] == "AWS::Serverless::Function":
            assert "Tracing" not in resource["Properties"]
    layer = REPO / "layers" / "sendonce"
    assert "xray" not in (layer / "pyproject.toml").read_text(encoding="utf-8").lower()
    for module in (layer / "sendonce").rglob("*.py"):
        source = module.read_text(encoding="utf-8")
        assert "aws_xray_sdk" not in source, module
        assert not re.search(r"\bimport\b.*\bTracer\b", source), module
