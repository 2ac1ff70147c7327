"""The deployed stack's permissions, read from template.yaml (CONTRACT section 10).

Each function's role grants exactly the actions its code uses (EXPECTED_ACTIONS: a new permission is
a deliberate change here), each on resources of this stack. No publish or send action is allowed on
"*", except an SMS (sns:Publish), which AWS grants only so and which a Deny keeps off every topic.
Only SES, for this stack's configuration set, may publish to the topic of SES events. Every checkov
check the template skips says why, on the resource it skips.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from sendonce.adapters import dynamodb_webhooks

from sendonce_local.template import Template, load_template, references

REPO = Path(__file__).resolve().parents[2]

# What each function's code calls (its composition root and the adapters it builds), and nothing else.
# Transactions need the action of each item: a Put needs PutItem, an Update UpdateItem.
EXPECTED_ACTIONS: dict[str, dict[str, set[str]]] = {
    # entrypoints.api.build: DynamoDbApiKeyStore (the caller's key), DynamoDbSendingStore (create
    # transaction of Puts, cancel, lock release, get, list on the two keys-only indexes, then the
    # items), Powertools idempotency, SqsMessageQueue, SqsEventQueue, DynamoDbWebhookStore
    # (endpoints, events listed through their index).
    "ApiFunction": {
        "Allow": {
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:Query",
            "dynamodb:BatchGetItem",  # listing pages; quota shards summed; a send's recipient suppressed?
            "sqs:SendMessage",
            "secretsmanager:GetSecretValue",
        }
    },
    # entrypoints.dispatch.build: DynamoDbDeliveryStore (claim, finish, lock release),
    # DynamoDbSuppressionStore (the claimed recipient's two entries, one BatchGetItem), SqsRedelivery,
    # the channel's provider (and the HTTP provider's token), and test messages' simulator
    # (DynamoDbSimulatorStore's UpdateItems, SqsEventQueue).
    "DispatchSmsFunction": {
        "Allow": {
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:BatchGetItem",
            "sqs:ChangeMessageVisibility",
            "sqs:SendMessage",
            "sns:Publish",
            "secretsmanager:GetSecretValue",
        },
        "Deny": {"sns:Publish"},
    },
    "DispatchImessageFunction": {
        "Allow": {
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:BatchGetItem",
            "sqs:ChangeMessageVisibility",
            "sqs:SendMessage",
            "secretsmanager:GetSecretValue",
        }
    },
    "DispatchEmailFunction": {
        "Allow": {
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:BatchGetItem",
            "sqs:ChangeMessageVisibility",
            "sqs:SendMessage",
            "ses:SendEmail",
            "secretsmanager:GetSecretValue",
        }
    },
    # entrypoints.status.build: DynamoDbProviderEventStore (get, record, transaction, lock release)
    "StatusFunction": {
        "Allow": {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}
    },
    # entrypoints.outbox.build: DynamoDbOutboxStore (the Outbox index, moves), SqsMessageQueue
    "OutboxFunction": {"Allow": {"dynamodb:Query", "dynamodb:UpdateItem", "sqs:SendMessage"}},
    # entrypoints.handoff.build: SqsMessageQueue; and the MessagesTable's stream.
    "HandoffFunction": {
        "Allow": {
            "sqs:SendMessage",
            "dynamodb:DescribeStream",
            "dynamodb:GetRecords",
            "dynamodb:GetShardIterator",
            "dynamodb:ListStreams",
        }
    },
    # entrypoints.message_changes.build: DynamoDbWebhookStore (Applied, the event transaction of
    # Puts, endpoints), SqsDeliveryQueue; and the MessagesTable's stream.
    "MessageChangesFunction": {
        "Allow": {
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:Query",
            "sqs:SendMessage",
            "dynamodb:DescribeStream",
            "dynamodb:GetRecords",
            "dynamodb:GetShardIterator",
            "dynamodb:ListStreams",
        }
    },
    # entrypoints.webhook_delivery.build: DynamoDbWebhookStore (event, attempts; the endpoint and
    # its slow-lane flag in one BatchGetItem, the flag's copies written and removed by
    # BatchWriteItem), SqsRedelivery on each lane, SqsDeliveryQueue (a move to the slow lane).
    "WebhookDeliveryFunction": {
        "Allow": {
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
            "dynamodb:BatchGetItem",
            "dynamodb:BatchWriteItem",
            "sqs:ChangeMessageVisibility",
            "sqs:SendMessage",
        }
    },
}
PUBLISH_OR_SEND = re.compile(r":(Publish|Send)", re.IGNORECASE)
EVERY_TOPIC = {"Fn::Sub": "arn:${AWS::Partition}:sns:*:*:*"}
CHECK_ID = re.compile(r"^CKV2?_AWS_\d+$")


@pytest.fixture(scope="module")
def template() -> Template:
    return load_template(REPO / "template.yaml")


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _statements(template: Template, function_id: str) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    for policy in _listed(template.resources[function_id]["Properties"].get("Policies") or []):
        statements.extend(_listed(policy["Statement"]))
    return statements


def test_every_function_has_its_declared_permissions(template: Template) -> None:
    assert set(template.functions) == set(EXPECTED_ACTIONS), "a new function declares its permissions here"


@pytest.mark.parametrize("function_id", sorted(EXPECTED_ACTIONS))
def test_a_role_grants_exactly_the_actions_its_code_uses(template: Template, function_id: str) -> None:
    policies = _listed(template.resources[function_id]["Properties"].get("Policies") or [])
    # Only inline statements: a managed policy or a SAM policy template would grant unlisted actions.
    assert all(isinstance(policy, dict) and set(policy) == {"Statement"} for policy in policies), policies

    granted: dict[str, set[str]] = {}
    for statement in _statements(template, function_id):
        granted.setdefault(statement["Effect"], set()).update(_listed(statement["Action"]))

    assert granted == EXPECTED_ACTIONS[function_id]


@pytest.mark.parametrize("function_id", sorted(EXPECTED_ACTIONS))
def test_a_permission_names_this_stacks_resources(template: Template, function_id: str) -> None:
    """No literal ARN and no "*", but an SMS: each resource is built from the stack's own names."""
    names = set(template.resources) | set(template.parameters)
    for statement in _statements(template, function_id):
        if statement["Effect"] != "Allow":
            continue
        for resource in _listed(statement["Resource"]):
            if resource == "*":
                assert _listed(statement["Action"]) == ["sns:Publish"], statement
                continue
            assert set(references(resource)) & names, f"{function_id}: {resource} names none of ours"


@pytest.mark.parametrize("function_id", sorted(EXPECTED_ACTIONS))
def test_no_publish_or_send_on_every_resource_but_an_sms_kept_off_every_topic(
    template: Template, function_id: str
) -> None:
    statements = _statements(template, function_id)
    for statement in statements:
        wide = "*" in _listed(statement["Resource"])
        sends = [action for action in _listed(statement["Action"]) if PUBLISH_OR_SEND.search(action)]
        if statement["Effect"] != "Allow" or not wide or not sends:
            continue
        assert sends == ["sns:Publish"], f"{function_id} may {sends} anywhere"
        assert "Condition" not in statement
        denies = [
            s
            for s in statements
            if s["Effect"] == "Deny" and "sns:Publish" in _listed(s["Action"]) and "Condition" not in s
        ]
        assert [_listed(deny["Resource"]) for deny in denies] == [[EVERY_TOPIC]], (
            f"{function_id} may publish an SMS, so it needs a Deny of sns:Publish on every topic"
        )


def test_webhook_deliveries_move_only_to_the_slow_lane_and_touch_only_the_webhooks_table(
    template: Template,
) -> None:
    """Issue 27: a task moves from the fast lane to the slow one, never elsewhere; a retry is
    postponed in either lane; the endpoint's flag lives in WebhooksTable with everything else."""
    named: dict[str, set[str]] = {}
    for statement in _statements(template, "WebhookDeliveryFunction"):
        assert statement["Effect"] == "Allow"
        for action in _listed(statement["Action"]):
            for resource in _listed(statement["Resource"]):
                named.setdefault(action, set()).update(references(resource))

    (flags,) = [s for s in _statements(template, "WebhookDeliveryFunction") if "Condition" in s]
    assert _listed(flags["Action"]) == ["dynamodb:BatchWriteItem"]  # a flag's copies, nothing else
    assert flags["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [dynamodb_webhooks.LANE_PREFIX + "*"]}
    }
    assert named.pop("sqs:SendMessage") == {"WebhookSlowLaneQueue"}
    assert named.pop("sqs:ChangeMessageVisibility") == {"WebhookDeliveryQueue", "WebhookSlowLaneQueue"}
    assert named
    assert all(resources == {"WebhooksTable"} for resources in named.values()), named


def test_api_keys_are_only_read_by_the_api_function_one_key_at_a_time(template: Template) -> None:
    """Keys are written by operators (`sendonce create-api-key`), never by a function."""
    on_keys = {
        function_id: set(_listed(statement["Action"]))
        for function_id in template.functions
        for statement in _statements(template, function_id)
        if "ApiKeysTable" in set(references(statement["Resource"]))
    }

    assert on_keys == {"ApiFunction": {"dynamodb:GetItem"}}


def test_email_is_sent_only_from_the_configured_address_through_the_stacks_configuration_set(
    template: Template,
) -> None:
    (statement,) = [
        s for s in _statements(template, "DispatchEmailFunction") if "ses:SendEmail" in _listed(s["Action"])
    ]

    resources = _listed(statement["Resource"])
    assert "*" not in resources
    assert {"EmailFromAddress", "EmailConfigurationSet"} <= set(references(resources))
    assert statement["Condition"] == {"StringEquals": {"ses:FromAddress": {"Ref": "EmailFromAddress"}}}


def test_only_ses_for_this_account_publishes_ses_events(template: Template) -> None:
    (policy,) = [
        resource["Properties"]
        for resource in template.resources.values()
        if resource["Type"] == "AWS::SNS::TopicPolicy"
        and {"Ref": "EmailEventsTopic"} in _listed(resource["Properties"]["Topics"])
    ]
    statements = _listed(policy["PolicyDocument"]["Statement"])
    allows = [s for s in statements if s["Effect"] == "Allow"]
    denies = [s for s in statements if s["Effect"] == "Deny"]

    assert len(allows) == 1
    assert allows[0]["Principal"] == {"Service": "ses.amazonaws.com"}
    assert _listed(allows[0]["Action"]) == ["sns:Publish"]
    assert allows[0]["Condition"]["StringEquals"]["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}
    assert "EmailConfigurationSet" in set(references(allows[0]["Condition"]["ArnLike"]["aws:SourceArn"]))
    # Same-account roles are allowed by their own policies: only a Deny in the topic's keeps them out.
    assert len(denies) == 1
    assert denies[0]["Principal"] == "*"
    assert _listed(denies[0]["Action"]) == ["sns:Publish"]
    assert denies[0]["Condition"] == {"BoolIfExists": {"aws:PrincipalIsAWSService": "false"}}


def test_the_ses_events_go_to_that_topic(template: Template) -> None:
    destination = template.resources["EmailEventDestination"]["Properties"]["EventDestination"]

    assert destination["SnsDestination"]["TopicARN"] == {"Ref": "EmailEventsTopic"}


def test_every_skipped_checkov_check_says_why(template: Template) -> None:
    skipped = 0
    for logical_id, resource in template.resources.items():
        for skip in ((resource.get("Metadata") or {}).get("checkov") or {}).get("skip") or []:
            assert CHECK_ID.match(str(skip["id"])), f"{logical_id}: {skip}"
            comment = str(skip.get("comment") or "")
            assert len(comment) >= 40, f"{logical_id} skips {skip['id']} without a reason"
            assert "\n" not in comment, f"{logical_id}: a reason fits on one line"
            skipped += 1
    assert skipped > 0


def test_the_checks_a_cheap_fix_meets_are_met_not_skipped(template: Template) -> None:
    """Point-in-time recovery, API access logs, log retention: fixed, so never skipped."""
    fixed = {"CKV_AWS_28", "CKV_AWS_95", "CKV_AWS_66"}
    for logical_id, resource in template.resources.items():
        for skip in ((resource.get("Metadata") or {}).get("checkov") or {}).get("skip") or []:
            assert skip["id"] not in fixed, f"{logical_id} skips {skip['id']}"
