"""The deployed stack's permissions, read from template.yaml (the README, Deploy).

Each function's role grants exactly the actions its code uses (EXPECTED_ACTIONS: a new permission is
a deliberate change here), each on resources of this stack. No publish or send action is allowed on
"*", except an SMS (sns:Publish), which AWS grants only so and which a Deny keeps off every topic.
Only SES, for this stack's configuration set, may publish to the topic of SES events. Every checkov
check skipped says why: once in .checkov.yaml for every resource of a type, or on the resource it
skips in the template; either way on a type checkov runs it on, and never in both places.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cfn_tools import load_yaml
from sendonce.adapters import dynamodb_webhooks
from sendonce.adapters.dynamodb_activity import promise_key
from sendonce.adapters.dynamodb_campaigns import tally_key
from sendonce.adapters.s3_recipients import object_key

from sendonce_local.template import Template, load_template, references

REPO = Path(__file__).resolve().parents[2]

# What each function's code calls (its composition root and the adapters it builds), and nothing else.
# Transactions need the action of each item: a Put needs PutItem, an Update UpdateItem, a
# ConditionCheck ConditionCheckItem (test_a_function_that_checks_in_a_transaction_may_check).
EXPECTED_ACTIONS: dict[str, dict[str, set[str]]] = {
    # entrypoints.api.build: DynamoDbApiKeyStore (the caller's key), DynamoDbSendingStore (create
    # transaction of Puts, cancel, lock release, get, list on the keys-only indexes, then the
    # items), Powertools idempotency, SqsMessageQueue, SqsEventQueue, DynamoDbWebhookStore
    # (endpoints, events listed through their index); and the campaigns' (entrypoints.api._campaigns):
    # DynamoDbCampaignStore (a campaign and its gate in transactions, its pages and errors queried),
    # S3RecipientFiles, SqsCampaignWork (a plan, parked pages, a sweep).
    "ApiFunction": {
        "Allow": {
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:Query",
            "dynamodb:BatchGetItem",  # listing pages; quota shards summed; a send's recipient suppressed?
            "dynamodb:ConditionCheckItem",  # the create transaction's suppression checks
            "sqs:SendMessage",
            "secretsmanager:GetSecretValue",
            "s3:PutObject",  # a campaign's inline recipients stored; its upload's URL presigned
            "s3:GetObject",  # the uploaded list's size read at start (HeadObject)
        }
    },
    # entrypoints.dispatch.build: DynamoDbDispatchStore (claim, finish, lock release),
    # DynamoDbSuppressionStore (the claimed recipient's two entries, one BatchGetItem), SqsRedelivery,
    # the channel's provider (and the HTTP provider's token), and test messages' simulator
    # (DynamoDbSimulatorStore's UpdateItems, SqsEventQueue).
    "DispatchSmsFunction": {
        "Allow": {
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:BatchGetItem",
            "dynamodb:ConditionCheckItem",  # the claim transaction's suppression checks
            "sqs:ChangeMessageVisibility",
            "sqs:SendMessage",
            "sns:Publish",
            "sms-voice:SendTextMessage",  # AWS End User Messaging SMS, the sms-v2 provider
            "secretsmanager:GetSecretValue",  # the HTTP provider's token, Twilio's credentials
        },
        "Deny": {"sns:Publish"},
    },
    "DispatchImessageFunction": {
        "Allow": {
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:BatchGetItem",
            "dynamodb:ConditionCheckItem",  # the claim transaction's suppression checks
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
            "dynamodb:ConditionCheckItem",  # the claim transaction's suppression checks
            "sqs:ChangeMessageVisibility",
            "sqs:SendMessage",
            "ses:SendEmail",
            "secretsmanager:GetSecretValue",
        }
    },
    # entrypoints.status.build: DynamoDbProviderEventStore (get, record, transaction, lock release)
    # and the hashing key of the suppression entries an event makes.
    "StatusFunction": {
        "Allow": {
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "secretsmanager:GetSecretValue",
        }
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
            # A campaign's message's change added to its campaign's counts, in the event's
            # transaction (dynamodb_campaigns.tally_update): on its counters only.
            "dynamodb:UpdateItem",
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
    # entrypoints.campaigns.build: DynamoDbCampaignStore (campaigns, gates, pages in transactions of
    # Puts, Updates and a parked page's ConditionCheck; parked pages queried; errors by
    # BatchWriteItem), DynamoDbCampaignPace and DynamoDbLimits (the LimitsTable), BatchSender on
    # DynamoDbSendingStore (the create transaction with its suppression checks and the gate's check,
    # locks, a sweep's listing on ByCampaign and its cancels), DynamoDbSuppressionStore,
    # DynamoDbTemplateStore, S3RecipientFiles (the list, whole and by range), SqsCampaignWork.
    "CampaignFunction": {
        "Allow": {
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:Query",
            "dynamodb:BatchGetItem",
            "dynamodb:BatchWriteItem",  # a page's refused lines, its errors
            "dynamodb:ConditionCheckItem",  # the suppression checks and the gate; a parked page
            "sqs:SendMessage",
            "s3:GetObject",
            "secretsmanager:GetSecretValue",  # the hashing key
        }
    },
    # entrypoints.erasures.build: DynamoDbErasureStore (the record's progress and completion, the
    # pending ones queried on ByWorkspace and read by BatchGetItem), the listing and the cancel of
    # MessageService on DynamoDbSendingStore (keys-only indexes, then BatchGetItem; a cancel's
    # UpdateItem and its lock's DeleteItem), DynamoDbTraceEraser (GetItem and UpdateItem in place;
    # Query on ByMessage, ProviderEventsByMessage and a workspace's campaigns and their errors),
    # SqsErasureQueue (a run handed on, the sweep's requeues); the hashing key.
    "ErasureFunction": {
        "Allow": {
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",  # a canceled message's dedup lock released, as a user's cancel does
            "dynamodb:Query",
            "dynamodb:BatchGetItem",
            "sqs:SendMessage",
            "secretsmanager:GetSecretValue",
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


# SendTextMessage is granted on the origination identity it sends from as well as on the stack's
# configuration set: AWS chooses one of the account's when SmsV2OriginationIdentity is empty, so these
# name the account's identities of each kind, in the stack's region, and nothing wider.
SMS_ORIGINATION_IDENTITIES = (":phone-number/*", ":pool/*", ":sender-id/*")


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
            if _listed(statement["Action"]) == ["sms-voice:SendTextMessage"] and any(
                kind in str(resource) for kind in SMS_ORIGINATION_IDENTITIES
            ):
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


def test_the_message_changes_function_updates_only_counters(template: Template) -> None:
    """It writes events; the items it updates are counters alone: a campaign's delivery counters in
    the MessagesTable (`tally_key`), the promise's daily counts in the WebhooksTable (`promise_key`)."""
    updates = [
        statement
        for statement in _statements(template, "MessageChangesFunction")
        if "dynamodb:UpdateItem" in _listed(statement["Action"])
    ]
    campaign_counters = tally_key("ws", "cmp", 0)["pk"]["S"].removesuffix("ws#cmp#0")
    promise_counters = promise_key("ws", 0, "2026-01-01")["pk"]["S"].removesuffix("ws#0")

    assert len(updates) == 2
    by_table = {}
    for update in updates:
        assert _listed(update["Action"]) == ["dynamodb:UpdateItem"]
        (table,) = references(update["Resource"])
        by_table[table] = update["Condition"]
    assert by_table == {
        "MessagesTable": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [campaign_counters + "*"]}},
        "WebhooksTable": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [promise_counters + "*"]}},
    }


def test_campaign_lists_are_reached_only_in_their_bucket_under_their_prefix(template: Template) -> None:
    """The API stores a list and presigns its upload; the fan-out only reads it; nothing else."""
    prefix = object_key("ws", "cmp").removesuffix("ws/cmp.jsonl")
    on_s3: dict[str, set[str]] = {}
    for function_id in template.functions:
        for statement in _statements(template, function_id):
            actions = {action for action in _listed(statement["Action"]) if action.startswith("s3:")}
            if not actions:
                continue
            assert statement["Effect"] == "Allow"
            assert actions == set(_listed(statement["Action"])), statement
            assert _listed(statement["Resource"]) == [{"Fn::Sub": "${CampaignsBucket.Arn}/" + prefix + "*"}]
            on_s3.setdefault(function_id, set()).update(actions)

    assert on_s3 == {"ApiFunction": {"s3:PutObject", "s3:GetObject"}, "CampaignFunction": {"s3:GetObject"}}


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


def test_no_deployed_function_lets_status_webhooks_reach_private_addresses(template: Template) -> None:
    """Only the local stack lifts the rule; from a function, a loopback address is Lambda's own API."""
    variable = "SENDONCE_WEBHOOK_ALLOW_PRIVATE_TARGETS"
    set_to = {
        f: spec.environment[variable]
        for f, spec in template.functions.items()
        if variable in spec.environment
    }

    # The two functions whose settings read it: the API (registration) and the delivery function.
    assert set_to == {"ApiFunction": "false", "WebhookDeliveryFunction": "false"}


def test_the_ses_events_go_to_that_topic(template: Template) -> None:
    destination = template.resources["EmailEventDestination"]["Properties"]["EventDestination"]

    assert destination["SnsDestination"]["TopicARN"] == {"Ref": "EmailEventsTopic"}


CHECKOV_CONFIG = REPO / ".checkov.yaml"
CHECKOV_PYTHON = REPO / ".venv-checkov" / "bin" / "python"
# A shared skip's reason: the comment lines right above its id, the first starting with its type.
SHARED_REASON = re.compile(r"^(AWS::\w+::\w+): (.+)$", re.DOTALL)


def _resource_skips(template: Template) -> list[tuple[str, str, str]]:
    """(logical id, check, reason) of every skip in the template's Metadata."""
    return [
        (logical_id, str(skip["id"]), str(skip.get("comment") or ""))
        for logical_id, resource in template.resources.items()
        for skip in ((resource.get("Metadata") or {}).get("checkov") or {}).get("skip") or []
    ]


def _shared_skips() -> list[tuple[str, str]]:
    """(check, reason) of every skip in .checkov.yaml, in its order: the ids as checkov reads them
    (`skip-check`), each with the comment lines right above it."""
    text = CHECKOV_CONFIG.read_text(encoding="utf-8")
    reasons: dict[str, str] = {}
    comment: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comment.append(stripped.lstrip("#").strip())
            continue
        entry = re.fullmatch(r"-\s*(\S+)", stripped)
        if entry:
            reasons[entry.group(1)] = " ".join(comment)
        comment = []
    checks = [str(check) for check in load_yaml(text).get("skip-check") or []]
    return [(check, reasons.get(check, "")) for check in checks]


def _kinds_checkov_runs(checks: set[str]) -> dict[str, set[str]]:
    """The resource types the pinned checkov runs each check on (its CloudFormation registry)."""
    if not CHECKOV_PYTHON.exists():
        pytest.skip("checkov is not installed (`make scan` installs it; `make test` does first)")
    script = (
        "import json, sys\n"
        "from checkov.cloudformation.checks.resource.registry import cfn_registry\n"
        "import checkov.cloudformation.checks.resource.aws\n"
        "wanted = set(sys.argv[1:])\n"
        "kinds = {}\n"
        "for kind, checks in cfn_registry.checks.items():\n"
        "    for check in checks:\n"
        "        if check.id in wanted:\n"
        "            kinds.setdefault(check.id, []).append(kind)\n"
        "print(json.dumps(kinds))\n"
    )
    completed = subprocess.run(
        [str(CHECKOV_PYTHON), "-c", script, *sorted(checks)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return {check: set(kinds) for check, kinds in json.loads(completed.stdout).items()}


def test_every_skipped_checkov_check_says_why(template: Template) -> None:
    skips = [(logical_id, check, reason) for logical_id, check, reason in _resource_skips(template)]
    skips += [(".checkov.yaml", check, reason) for check, reason in _shared_skips()]
    for where, check, reason in skips:
        assert CHECK_ID.match(check), f"{where}: {check}"
        assert len(reason) >= 40, f"{where} skips {check} without a reason"
        assert "\n" not in reason, f"{where}: a reason fits on one line"
    assert {where for where, _, _ in skips} > {".checkov.yaml"}


def test_a_shared_skip_is_for_a_type_of_the_template(template: Template) -> None:
    shared = _shared_skips()
    kinds = {resource["Type"] for resource in template.resources.values()}

    assert len({check for check, _ in shared}) == len(shared), "each check is skipped once"
    for check, reason in shared:
        named = SHARED_REASON.match(reason)
        assert named, f".checkov.yaml: the reason of {check} starts with the type it is skipped for"
        assert named.group(1) in kinds, f".checkov.yaml skips {check} for {named.group(1)}, which is not here"


def test_no_check_is_skipped_both_once_and_on_a_resource(template: Template) -> None:
    shared = {check for check, _ in _shared_skips()}
    on_resources = {(logical_id, check) for logical_id, check, _ in _resource_skips(template)}

    assert not {(logical_id, check) for logical_id, check in on_resources if check in shared}


def test_a_skip_on_every_resource_of_a_type_for_one_reason_is_skipped_once(template: Template) -> None:
    """Such a skip belongs in .checkov.yaml (a type of one resource keeps its skip on it)."""
    of_type: dict[str, set[str]] = {}
    for logical_id, resource in template.resources.items():
        of_type.setdefault(resource["Type"], set()).add(logical_id)
    by_check: dict[tuple[str, str], dict[str, str]] = {}
    for logical_id, check, reason in _resource_skips(template):
        by_check.setdefault((template.resources[logical_id]["Type"], check), {})[logical_id] = reason
    for (kind, check), reasons in by_check.items():
        everywhere = set(reasons) == of_type[kind] and len(of_type[kind]) > 1
        assert not (everywhere and len(set(reasons.values())) == 1), f"{check} on every {kind}"


def test_every_skip_is_of_a_check_checkov_runs_on_that_type(template: Template) -> None:
    """A skip of a check that never runs on its resource would hide nothing, or something else."""
    resource_skips = _resource_skips(template)
    shared = _shared_skips()
    kinds = _kinds_checkov_runs({check for _, check, _ in resource_skips} | {check for check, _ in shared})

    for logical_id, check, _ in resource_skips:
        kind = template.resources[logical_id]["Type"]
        assert kind in kinds.get(check, set()), (
            f"{logical_id} ({kind}) skips {check}, which checkov runs on {kinds.get(check)}"
        )
    for check, reason in shared:
        named = SHARED_REASON.match(reason)
        assert named
        assert named.group(1) in kinds.get(check, set()), (
            f".checkov.yaml: {check} does not run on {named.group(1)}"
        )


def test_the_checks_a_cheap_fix_meets_are_met_not_skipped(template: Template) -> None:
    """Point-in-time recovery, API access logs, log retention: fixed, so never skipped."""
    fixed = {"CKV_AWS_28", "CKV_AWS_95", "CKV_AWS_66"}
    for logical_id, check, _ in _resource_skips(template):
        assert check not in fixed, f"{logical_id} skips {check}"
    for check, _ in _shared_skips():
        assert check not in fixed, f".checkov.yaml skips {check}"


# The functions whose transactions carry a ConditionCheck (a recipient's suppression entries, built by
# adapters/dynamodb_suppressions.py's SuppressionGuard): the API's create and the dispatchers' claim;
# and (adapters/dynamodb_sending.py) a send's template head, in the API's create only; and the
# campaign fan-out's creates, which check the suppressions and their campaign's gate
# (dynamodb_sending's `_gate_check`), and its parked pages, which check their campaign is not sending
# (adapters/dynamodb_campaigns.py, `save_progress`).
CHECKING_FUNCTIONS = (
    "ApiFunction",
    "DispatchSmsFunction",
    "DispatchImessageFunction",
    "DispatchEmailFunction",
    "CampaignFunction",
)
# Each module that writes a ConditionCheck, and why.
CONDITION_CHECK_WRITERS = {
    "adapters/dynamodb_suppressions.py": "a recipient's suppression entries (SuppressionGuard)",
    "adapters/dynamodb_sending.py": "a send's template head; a campaign's create checks its gate is open",
    # A page parks only while its campaign is not sending: a resume in between hands it out again.
    "adapters/dynamodb_campaigns.py": "a parked page's campaign is not sending (save_progress)",
}


def test_only_the_suppression_guard_and_the_create_write_a_condition_check() -> None:
    """A new ConditionCheck elsewhere must say why in CONDITION_CHECK_WRITERS, and add its
    functions to CHECKING_FUNCTIONS."""
    package = REPO / "layers" / "sendonce" / "sendonce"
    writers = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if re.search(r'\{\s*"ConditionCheck"\s*:', path.read_text(encoding="utf-8"))
    )

    assert writers == sorted(CONDITION_CHECK_WRITERS)


@pytest.mark.parametrize("function", CHECKING_FUNCTIONS)
def test_a_function_that_checks_in_a_transaction_may_check(function: str) -> None:
    """Without dynamodb:ConditionCheckItem, DynamoDB refuses the whole transaction: every send (or
    claim) would fail on AWS, where moto and DynamoDB Local grant everything."""
    assert "dynamodb:ConditionCheckItem" in EXPECTED_ACTIONS[function]["Allow"]
    template = load_yaml((REPO / "template.yaml").read_text(encoding="utf-8"))
    statements = [
        statement
        for policy in template["Resources"][function]["Properties"]["Policies"]
        for statement in policy.get("Statement", [])
    ]
    granted = [
        statement
        for statement in statements
        if statement["Effect"] == "Allow" and "dynamodb:ConditionCheckItem" in statement["Action"]
    ]
    assert [statement["Resource"] for statement in granted] == [{"Fn::GetAtt": ["MessagesTable", "Arn"]}]
