"""sendonce_local: reading template.yaml and resolving the handlers' environment."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from cfn_tools import load_yaml

from sendonce_local.environment import Ports, function_environment
from sendonce_local.intrinsics import Resolver
from sendonce_local.template import load_template, parse_template

REPO = Path(__file__).resolve().parents[2]
PORTS = Ports(api=3000, aws=5000, sandbox=3001)


@pytest.fixture(scope="module")
def template():
    return load_template(REPO / "template.yaml")


def test_every_table_and_queue_is_found(template) -> None:
    assert {t.logical_id for t in template.tables} >= {"MessagesTable", "IdempotencyTable", "ApiKeysTable"}
    assert {q.logical_id for q in template.queues} >= {"SmsQueue", "SmsDeadLetterQueue", "EmailQueue"}


def test_routes_reach_the_api_function(template) -> None:
    routes = {route.route_key: route for route in template.routes}

    assert routes["POST /v1/messages"].function_id == "ApiFunction"
    assert routes["GET /v1/health"].function_id == "ApiFunction"
    assert routes["$default"].function_id == "ApiFunction"


def _with_auth(template_document: dict, route_auth: dict | None, api_auth: dict | None) -> dict:
    document = copy.deepcopy(template_document)
    if api_auth is not None:
        document["Resources"]["HttpApi"]["Properties"]["Auth"] = api_auth
    if route_auth is not None:
        events = document["Resources"]["ApiFunction"]["Properties"]["Events"]
        events["ListMessages"]["Properties"]["Auth"] = route_auth
    return document


@pytest.mark.parametrize(
    ("route_auth", "api_auth"),
    [
        (None, {"DefaultAuthorizer": "Keys", "Authorizers": {"Keys": {"FunctionArn": "arn:f"}}}),
        ({"Authorizer": "Keys"}, {"Authorizers": {"Keys": {"FunctionArn": "arn:f"}}}),
    ],
)
def test_a_template_that_gives_a_route_an_authorizer_is_refused_not_served_without_it(
    route_auth: dict | None, api_auth: dict | None
) -> None:
    document = load_yaml((REPO / "template.yaml").read_text(encoding="utf-8"))

    with pytest.raises(ValueError, match="authorizers are not emulated"):
        parse_template(_with_auth(document, route_auth, api_auth), REPO)


def test_sqs_mappings_name_their_queue_and_report_partial_failures(template) -> None:
    mappings = {m.function_id: m for m in template.sqs_mappings}

    assert mappings["DispatchSmsFunction"].queue_id == "SmsQueue"
    assert mappings["DispatchSmsFunction"].batch_size == 10
    assert mappings["DispatchSmsFunction"].report_batch_item_failures is True


def test_functions_merge_globals(template) -> None:
    api = template.functions["ApiFunction"]

    assert api.code_dir == REPO / "functions" / "api"
    assert api.handler == "app.handler"
    assert api.timeout_seconds == 15  # its own
    assert "MESSAGES_TABLE" in api.environment  # Globals
    assert template.functions["DispatchSmsFunction"].timeout_seconds == 30  # Globals


def test_environment_resolves_intrinsics(template) -> None:
    env = function_environment(template, PORTS, environ={})

    assert env["MESSAGES_TABLE"] == "MessagesTable"
    assert env["SMS_QUEUE_URL"] == "http://127.0.0.1:5000/123456789012/SmsQueue"
    assert env["SENDONCE_DEDUP_WINDOW_SECONDS"] == "900"
    assert env["SENDONCE_HTTP_PROVIDER_URL"] == "http://127.0.0.1:3001"  # local default beats the template's
    assert env["SENDONCE_EMAIL_FROM"] == "no-reply@sendonce.local"
    assert env["AWS_ENDPOINT_URL"] == "http://127.0.0.1:5000"
    assert env["AWS_DEFAULT_REGION"] == "us-east-1"


def test_the_process_environment_wins_except_for_aws(template) -> None:
    env = function_environment(
        template,
        PORTS,
        environ={
            "SENDONCE_DEDUP_WINDOW_SECONDS": "5",
            "AWS_ENDPOINT_URL": "https://real.example",
            "UNRELATED": "x",
        },
    )

    assert env["SENDONCE_DEDUP_WINDOW_SECONDS"] == "5"
    assert env["AWS_ENDPOINT_URL"] == "http://127.0.0.1:5000"
    assert "UNRELATED" not in env


SNIPPET = {
    "Parameters": {"Rate": {"Type": "String", "Default": "rate(1 minute)"}},
    "Resources": {
        "Queue": {"Type": "AWS::SQS::Queue", "Properties": {}},
        "Sweep": {
            "Type": "AWS::Serverless::Function",
            "Properties": {
                "CodeUri": "fn/",
                "Handler": "app.handler",
                "Environment": {
                    "Variables": {
                        "ARN": {"Fn::GetAtt": ["Queue", "Arn"]},
                        "NAME": {"Fn::Sub": "${Queue.QueueName}-${AWS::Region}-${!Literal}"},
                    }
                },
                "Events": {
                    "Tick": {"Type": "Schedule", "Properties": {"Schedule": "rate(5 minutes)"}},
                    "Tock": {
                        "Type": "ScheduleV2",
                        "Properties": {"ScheduleExpression": "cron(0 12 * * ? *)"},
                    },
                },
            },
        },
    },
}


def test_a_snippet_with_schedules_and_intrinsics(tmp_path: Path) -> None:
    template = parse_template(SNIPPET, tmp_path)
    resolver = Resolver(template, "http://127.0.0.1:5000")
    env = template.functions["Sweep"].environment

    assert [(s.event_name, s.expression, s.kind) for s in template.schedules] == [
        ("Tick", "rate(5 minutes)", "Schedule"),
        ("Tock", "cron(0 12 * * ? *)", "ScheduleV2"),
    ]
    assert resolver.resolve(env["ARN"]) == "arn:aws:sqs:us-east-1:123456789012:Queue"
    assert resolver.resolve(env["NAME"]) == "Queue-us-east-1-${Literal}"
    assert resolver.resolve({"Ref": "Rate"}) == "rate(1 minute)"


# ---------------------------------------------------------------------------- buckets
def test_the_campaigns_bucket_is_found_and_named_as_s3_names_allow(template) -> None:
    resolver = Resolver(template, "http://127.0.0.1:5000")
    env = function_environment(template, PORTS, environ={})

    assert [bucket.logical_id for bucket in template.buckets] == ["CampaignsBucket"]  # not its policy
    assert env["CAMPAIGNS_BUCKET"] == "sendonce-local-campaignsbucket"
    assert (
        resolver.resolve({"Fn::GetAtt": ["CampaignsBucket", "Arn"]})
        == "arn:aws:s3:::sendonce-local-campaignsbucket"
    )
    assert (
        resolver.resolve({"Fn::Sub": "${CampaignsBucket.Arn}/campaigns/*"})
        == "arn:aws:s3:::sendonce-local-campaignsbucket/campaigns/*"
    )
    # The bucket policy resolves too (nothing applies it: sendonce_local.emulator.create_buckets).
    policy = template.resources["CampaignsBucketPolicy"]["Properties"]
    assert resolver.resolve(policy["Bucket"]) == "sendonce-local-campaignsbucket"


def test_a_bucket_that_names_itself_keeps_its_name(tmp_path: Path) -> None:
    snippet = {
        "Resources": {
            "Named": {
                "Type": "AWS::S3::Bucket",
                "Properties": {"BucketName": {"Fn::Sub": "${AWS::StackName}-named"}},
            },
            "Unnamed": {"Type": "AWS::S3::Bucket"},
        }
    }
    template = parse_template(snippet, tmp_path)
    resolver = Resolver(template, "http://127.0.0.1:5000")

    assert [bucket.logical_id for bucket in template.buckets] == ["Named", "Unnamed"]
    assert resolver.resolve({"Ref": "Named"}) == "sendonce-local-named"
    assert resolver.resolve({"Ref": "Unnamed"}) == "sendonce-local-unnamed"
    with pytest.raises(KeyError, match=r"Named\.WebsiteURL is not emulated"):
        resolver.resolve({"Fn::GetAtt": ["Named", "WebsiteURL"]})
