"""A channel is declared once, in `sendonce.channels`: everything else follows from its entry.

The template is held to the registry here (its queues, dead-letter queues, dispatcher functions,
provider parameters and alarms), and a fourth channel registered in a test is accepted, validated
and sent through the real schema, settings and use case with nothing else touched.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from sendonce import channels
from sendonce.api.commands import SendMessageRequest
from sendonce.channels import ChannelSpec
from sendonce.messages.model import Channel, Status
from sendonce.messages.recipients import normalise_phone
from sendonce.messages.service import MessageService, SendCommand
from sendonce.settings import ApiSettings, DispatcherSettings, InvalidSettings

from sendonce_local.template import Template, load_template
from tests.unit.unit_fakes import FakeQueue, InMemoryStore, ManualClock, hand_off

ROOT = Path(__file__).resolve().parents[2]
PAGER = ChannelSpec("pager", normalise_phone, subject="forbidden", providers=("http",))


@pytest.fixture(scope="module")
def template() -> Template:
    return load_template(ROOT / "template.yaml")


def _ref(value: Any) -> str | None:
    return value.get("Ref") if isinstance(value, dict) else None


def _env(template: Template, function_id: str) -> dict[str, Any]:
    return template.functions[function_id].environment


@pytest.mark.parametrize("spec", channels.all_specs(), ids=lambda spec: spec.name)
def test_every_registered_channel_has_its_resources_in_the_template(
    template: Template, spec: ChannelSpec
) -> None:
    name = spec.resource_name
    queue, dead_letters, function = f"{name}Queue", f"{name}DeadLetterQueue", f"Dispatch{name}Function"
    assert template.resource_type(queue) == "AWS::SQS::Queue"
    assert template.resource_type(dead_letters) == "AWS::SQS::Queue"
    redrive = template.resources[queue]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]
    assert redrive == {"Fn::GetAtt": [dead_letters, "Arn"]}
    assert template.resource_type(f"{name}DeadLetterAlarm") == "AWS::CloudWatch::Alarm"

    dispatcher = template.functions[function]
    assert dispatcher.code_dir == ROOT / "functions" / f"dispatch_{spec.name}"
    assert [m.queue_id for m in template.sqs_mappings if m.function_id == function] == [queue]
    assert _ref(dispatcher.environment[spec.queue_url_setting]) == queue
    parameter = f"{name}Provider"
    assert _ref(dispatcher.environment[spec.provider_setting]) == parameter
    assert tuple(template.parameters[parameter]["AllowedValues"]) == spec.providers
    assert template.parameters[parameter]["Default"] == spec.providers[0]

    # The API hands messages to every channel's queue; the outbox hands them over and asks providers.
    assert _ref(_env(template, "ApiFunction")[spec.queue_url_setting]) == queue
    assert _ref(_env(template, "OutboxFunction")[spec.queue_url_setting]) == queue
    assert _ref(_env(template, "OutboxFunction")[spec.provider_setting]) == parameter


def test_every_dispatcher_of_the_template_is_a_registered_channel(template: Template) -> None:
    dispatchers = {f for f in template.functions if f.startswith("Dispatch")}
    assert dispatchers == {f"Dispatch{spec.resource_name}Function" for spec in channels.all_specs()}


def test_every_dispatcher_entry_point_only_names_its_channel() -> None:
    for spec in channels.all_specs():
        source = (ROOT / "functions" / f"dispatch_{spec.name}" / "app.py").read_text(encoding="utf-8")
        assert f'handler, root = dispatcher_function("{spec.name}")' in source
        # Besides its imports (inside `frozen_imports`, as tests/unit/test_startup.py checks): no
        # logic of its own.
        own = [
            s for s in ast.parse(source).body[1:] if not isinstance(s, ast.Import | ast.ImportFrom | ast.With)
        ]
        assert [ast.unparse(s) for s in own] == [f"handler, root = dispatcher_function({spec.name!r})"]


def test_an_unknown_channel_is_refused_never_taken_for_another() -> None:
    with pytest.raises(channels.UnknownChannel):
        channels.spec("fax")
    with pytest.raises(ValidationError):
        SendMessageRequest.model_validate({"channel": "fax", "to": "+15550100000", "body": "hi"})


# ---------------------------------------------------------------------------- a fourth channel
@pytest.fixture
def pager() -> Iterator[ChannelSpec]:
    with channels.registered(PAGER) as spec:
        yield spec


def test_a_registered_fourth_channel_is_validated_by_its_own_rules(pager: ChannelSpec) -> None:
    request = SendMessageRequest.model_validate({"channel": "pager", "to": "+1 (555) 010-0000", "body": "hi"})
    assert request.to == "+15550100000"
    with pytest.raises(ValidationError):
        SendMessageRequest.model_validate(
            {"channel": "pager", "to": "+15550100000", "body": "hi", "subject": "s"}
        )
    with pytest.raises(ValidationError):
        SendMessageRequest.model_validate({"channel": "pager", "to": "nobody@example.com", "body": "hi"})
    assert "pager" in SendMessageRequest.model_json_schema()["properties"]["channel"]["enum"]


def test_a_fourth_channel_has_its_settings_named_after_it(pager: ChannelSpec) -> None:
    environ = {
        "MESSAGES_TABLE": "t",
        "SENDONCE_HASHING_KEY_ARN": "HashingKeySecret",
        "IDEMPOTENCY_TABLE": "i",
        "API_KEYS_TABLE": "k",
        **{spec.queue_url_setting: f"https://queue/{spec.name}" for spec in channels.all_specs()},
    }
    assert ApiSettings.from_environment(environ).queue_urls["pager"] == "https://queue/pager"
    with pytest.raises(InvalidSettings, match="PAGER_QUEUE_URL"):
        ApiSettings.from_environment({k: v for k, v in environ.items() if k != "PAGER_QUEUE_URL"})
    dispatcher = DispatcherSettings.from_environment(environ)
    assert dispatcher.providers_for("pager") == ("http",)
    assert dispatcher.queue_url("pager") == "https://queue/pager"
    with pytest.raises(InvalidSettings, match="SENDONCE_PAGER_PROVIDER"):
        DispatcherSettings.from_environment({**environ, "SENDONCE_PAGER_PROVIDER": "sns"})


def test_a_fourth_channel_is_sent_through_the_same_use_case(pager: ChannelSpec) -> None:
    store, queue, clock = InMemoryStore(), FakeQueue(), ManualClock()
    service = MessageService(store=store, queue=queue, dedup_window=timedelta(minutes=15), clock=clock)
    command = SendCommand(
        workspace_id="ws_1",
        channel=Channel("pager"),
        recipient=channels.normalise_recipient("pager", "+1 555 010 0000"),
        body="hi",
    )
    first = service.send(command)
    assert first.created
    assert first.message is not None
    assert first.message.channel == "pager"
    assert first.message.status is Status.QUEUED
    hand_off(store, queue, clock)
    assert queue.enqueued == [(first.message.id, 0)]
    assert service.send(command).duplicate
