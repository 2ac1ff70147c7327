"""sendonce_local: the template's parameters as the local stack gives them values, and the SQS event
sources' concurrency read from them (issue 27).

- `--parameter-overrides Name=Value ...` and SENDONCE_LOCAL_PARAMETER_OVERRIDES give a parameter a
  value, as `sam deploy --parameter-overrides` would; the command line's win. A name the template
  lacks, a value its rules refuse, or a secret parameter stops the start.
- Each SQS event source runs as many invocations at once as its ScalingConfig.MaximumConcurrency,
  resolved with those values (3 when it sets none), and never more than its function's own cap.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from sendonce_cli.main import build_parser, main

from sendonce_local.environment import Ports, function_environment
from sendonce_local.event_sources import WORKERS_PER_MAPPING, SqsPoller, concurrency_of
from sendonce_local.intrinsics import Resolver
from sendonce_local.lambda_runtime import MAX_ENVIRONMENTS
from sendonce_local.parameters import (
    LOCAL_PARAMETERS,
    OVERRIDES_SETTING,
    InvalidParameter,
    check,
    local_parameters,
    overridden,
    parse_overrides,
)
from sendonce_local.template import SqsMapping, Template, load_template, parse_template

REPO = Path(__file__).resolve().parents[2]
PORTS = Ports(api=3000, aws=5000, sandbox=3001)


@pytest.fixture(scope="module")
def template() -> Template:
    return load_template(REPO / "template.yaml")


def mapping_of(template: Template, queue_id: str) -> SqsMapping:
    (found,) = [m for m in template.sqs_mappings if m.queue_id == queue_id]
    return found


def concurrency(template: Template, queue_id: str, parameters: dict[str, str], limit: int = 10) -> int:
    resolver = Resolver(template, PORTS.aws_endpoint, parameters)
    return concurrency_of(mapping_of(template, queue_id), resolver, limit)


# ---------------------------------------------------------------------------- the overrides
def test_overrides_are_name_value_words_as_sam_deploy_takes_them() -> None:
    assert parse_overrides(["WebhookDeliveryMaxConcurrency=5"]) == {"WebhookDeliveryMaxConcurrency": "5"}
    assert parse_overrides(["A=1 B=x=y", "  C=  ", "A=2"]) == {"A": "2", "B": "x=y", "C": ""}
    assert parse_overrides([""]) == {}


@pytest.mark.parametrize("word", ["WebhookDeliveryMaxConcurrency", "=5"])
def test_a_word_that_is_not_name_value_is_refused(word: str) -> None:
    with pytest.raises(InvalidParameter, match="is not Name=Value"):
        parse_overrides([word])


def test_the_command_line_wins_over_the_environment() -> None:
    environ = {OVERRIDES_SETTING: "WebhookDeliveryMaxConcurrency=4 WebhookSlowLaneMaxConcurrency=3"}

    assert overridden(environ, ["WebhookDeliveryMaxConcurrency=5"]) == {
        "WebhookDeliveryMaxConcurrency": "5",
        "WebhookSlowLaneMaxConcurrency": "3",
    }
    assert overridden({}, []) == {}


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("NoSuchParameter", "1", "has no parameter NoSuchParameter"),
        ("WebhookSecret", "x" * 40, "is a secret"),
        ("WebhookDeliveryMaxConcurrency", "1", "less than its MinValue 2"),
        ("WebhookDeliveryMaxConcurrency", "1001", "more than its MaxValue 1000"),
        ("WebhookDeliveryMaxConcurrency", "five", "not a number"),
        ("SmsProvider", "carrier-pigeon", "not one of sns, http"),
        ("WebhookRetrySchedule", "5,soon", "does not match"),
    ],
)
def test_a_value_the_template_refuses_stops_the_start(
    template: Template, name: str, value: str, reason: str
) -> None:
    with pytest.raises(InvalidParameter, match=reason):
        check(template, {name: value})


def test_the_local_stack_gives_the_queues_its_own_concurrency_unless_told_otherwise(
    template: Template,
) -> None:
    check(template, LOCAL_PARAMETERS)  # its own values are ones the template accepts

    assert local_parameters(template, {}) == LOCAL_PARAMETERS
    told = local_parameters(template, {"WebhookDeliveryMaxConcurrency": "5"})
    assert told == {**LOCAL_PARAMETERS, "WebhookDeliveryMaxConcurrency": "5"}


def test_a_parameter_given_a_value_reaches_the_functions_environment(template: Template) -> None:
    env = function_environment(template, PORTS, environ={}, parameters={"WebhookRetrySchedule": "1,2"})

    assert env["SENDONCE_WEBHOOK_RETRY_SCHEDULE"] == "1,2"
    assert env["WEBHOOK_SLOW_LANE_QUEUE_URL"] == "http://127.0.0.1:5000/123456789012/WebhookSlowLaneQueue"
    assert function_environment(template, PORTS, environ={})["SENDONCE_WEBHOOK_RETRY_SCHEDULE"] == (
        "5,300,1800,7200,18000,36000,36000"
    )


def test_sendonce_run_takes_overrides_as_sam_deploy_does() -> None:
    args = build_parser().parse_args(
        ["run", "--parameter-overrides", "WebhookDeliveryMaxConcurrency=5", "WebhookRetrySchedule=1,1"]
    )

    assert overridden({}, args.parameter_overrides) == {
        "WebhookDeliveryMaxConcurrency": "5",
        "WebhookRetrySchedule": "1,1",
    }
    assert build_parser().parse_args(["run"]).parameter_overrides == []


def test_sendonce_run_refuses_an_override_the_template_refuses_before_starting_anything(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "--parameter-overrides", "WebhookDeliveryMaxConcurrency=1"]) == 2

    assert "less than its MinValue 2; nothing started" in capsys.readouterr().err


# ---------------------------------------------------------------------------- the event sources
def test_an_event_sources_maximum_concurrency_is_read_from_the_template(template: Template) -> None:
    assert mapping_of(template, "WebhookDeliveryQueue").maximum_concurrency == {
        "Ref": "WebhookDeliveryMaxConcurrency"
    }
    assert mapping_of(template, "WebhookSlowLaneQueue").maximum_concurrency == {
        "Ref": "WebhookSlowLaneMaxConcurrency"
    }


def test_each_lane_runs_as_many_invocations_as_its_parameter_says(template: Template) -> None:
    parameters = local_parameters(template, {"WebhookDeliveryMaxConcurrency": "5"})

    assert concurrency(template, "WebhookDeliveryQueue", parameters) == 5
    assert concurrency(template, "WebhookSlowLaneQueue", parameters) == 2  # its Default
    assert concurrency(template, "SmsQueue", parameters) == 3  # the local stack's own value
    assert concurrency(template, "SmsQueue", {}) == 10  # the Default (50), at most the function's cap


def test_no_event_source_runs_more_than_its_function_may(template: Template) -> None:
    assert concurrency(template, "WebhookDeliveryQueue", {"WebhookDeliveryMaxConcurrency": "50"}, 7) == 7


def test_an_event_source_without_a_maximum_runs_three_at_a_time(tmp_path: Path) -> None:
    snippet: dict[str, Any] = {
        "Resources": {
            "Queue": {"Type": "AWS::SQS::Queue", "Properties": {}},
            "Consumer": {
                "Type": "AWS::Serverless::Function",
                "Properties": {
                    "CodeUri": "fn/",
                    "Handler": "app.handler",
                    "Events": {
                        "Plain": {"Type": "SQS", "Properties": {"Queue": {"Fn::GetAtt": ["Queue", "Arn"]}}},
                        "Literal": {
                            "Type": "SQS",
                            "Properties": {"Queue": "Queue", "ScalingConfig": {"MaximumConcurrency": 4}},
                        },
                    },
                },
            },
        }
    }
    snippet_template = parse_template(snippet, tmp_path)
    resolver = Resolver(snippet_template, PORTS.aws_endpoint)
    plain, literal = snippet_template.sqs_mappings

    assert concurrency_of(plain, resolver, MAX_ENVIRONMENTS) == WORKERS_PER_MAPPING == 3
    assert concurrency_of(literal, resolver, MAX_ENVIRONMENTS) == 4


def test_a_poller_runs_one_thread_per_invocation_it_may_make(template: Template) -> None:
    poller = SqsPoller(
        mapping_of(template, "WebhookDeliveryQueue"), None, None, "", threading.Event(), workers=5
    )  # type: ignore[arg-type]

    assert poller.workers == 5


def test_the_banner_says_which_values_the_parameters_were_given(template: Template) -> None:
    from sendonce_local.stack import LocalStack  # noqa: PLC0415 - moto and the handlers

    stack = LocalStack(template, PORTS, {"WebhookDeliveryMaxConcurrency": "5"})

    (line,) = [line for line in stack.banner().splitlines() if line.strip().startswith("parameters")]
    assert "WebhookDeliveryMaxConcurrency=5; the others their Default" in line
    assert OVERRIDES_SETTING in line
