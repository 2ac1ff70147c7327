"""Sending from a template, on in-memory ports: rendered at acceptance, the message naming the version
it rendered; refused renders answered before anything is written; a batch reads each template once;
the request's rules (a template or a written body, never both; data with a template only)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from sendonce.api.commands import SendMessageRequest, command_of
from sendonce.channels import normalise_recipient
from sendonce.errors import TemplateDataInvalid, UnknownTemplate
from sendonce.messages.batch import BatchSender, NotRendered
from sendonce.messages.model import Channel, TemplateRef
from sendonce.messages.ports import TemplatedContent, TemplateUse
from sendonce.messages.service import MessageService, SendCommand, SendResult, template_lock_of
from sendonce.templates.model import Template, TemplateContent
from sendonce.templates.service import TemplateService

from tests.unit.unit_fakes import FakeQueue, InMemoryStore, InMemoryTemplates, InProcessRenderer, ManualClock

WINDOW = timedelta(minutes=15)


class CountingTemplates:
    """The templates' use cases, counting the versions asked for (CountingStore: those read)."""

    def __init__(self, service: TemplateService) -> None:
        self.service = service
        self.asked = 0

    def find(self, workspace_id: str, name: str, version: int | None, *, fresh: bool) -> Template | None:
        self.asked += 1
        return self.service.find(workspace_id, name, version, fresh=fresh)

    def render_for_send(self, template: Template, data: Mapping[str, Any]) -> TemplatedContent:
        return self.service.render_for_send(template, data)


class CountingStore(InMemoryTemplates):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def latest(self, workspace_id: str, name: str) -> Template | None:
        self.reads += 1
        return super().latest(workspace_id, name)

    def version(self, workspace_id: str, name: str, version: int) -> Template | None:
        self.reads += 1
        return super().version(workspace_id, name, version)


@pytest.fixture
def kept() -> CountingStore:
    return CountingStore()


@pytest.fixture
def templates(clock: ManualClock, store: InMemoryStore, kept: CountingStore) -> CountingTemplates:
    store.templates = kept  # the create checks the template's head, as the adapter does in its write
    service = TemplateService(kept, InProcessRenderer(), clock=clock)
    service.create("ws_a", "otp", Channel("sms"), TemplateContent(body="Hi {{ name }}, code {{ code }}"))
    service.create(
        "ws_a",
        "receipt",
        Channel("email"),
        TemplateContent(body="Thanks {{ name }}", subject="Order {{ id }}"),
    )
    service.create("ws_a", "long", Channel("sms"), TemplateContent(body="{{ 'x' * n }}"))
    return CountingTemplates(service)


def _service(store: InMemoryStore, clock: ManualClock, templates: CountingTemplates) -> MessageService:
    return MessageService(store, FakeQueue(), WINDOW, clock, templates=lambda: templates)


def _command(data: dict[str, Any] | None = None, name: str = "otp", **changes: Any) -> SendCommand:
    channel = changes.pop("channel", Channel("sms"))
    to = changes.pop("to", "+15550100000")
    return SendCommand(
        workspace_id="ws_a",
        channel=channel,
        recipient=normalise_recipient(channel, to),
        body="",
        template=TemplateUse(
            name, {"name": "Ann", "code": "1"} if data is None else data, changes.pop("version", None)
        ),
        **changes,
    )


def test_a_send_is_rendered_and_its_message_names_the_version(
    store: InMemoryStore, clock: ManualClock, templates: CountingTemplates
) -> None:
    result = _service(store, clock, templates).send(_command())

    assert result.created
    assert result.message is not None
    assert result.message.body == "Hi Ann, code 1"
    assert result.message.template == TemplateRef("otp", 1)
    assert len(store.locks) == 2


def test_a_new_version_is_a_duplicate_for_the_same_data_and_recipient(
    store: InMemoryStore, clock: ManualClock, templates: CountingTemplates
) -> None:
    service = _service(store, clock, templates)
    first = service.send(_command())
    templates.service.add_version("ws_a", "otp", TemplateContent(body="Code {{ code }} for {{ name }}"))

    again = service.send(_command())

    assert again.duplicate
    assert again.message == first.message


def test_an_explicit_older_version_is_rendered_as_it_was(
    store: InMemoryStore, clock: ManualClock, templates: CountingTemplates
) -> None:
    templates.service.add_version("ws_a", "otp", TemplateContent(body="Code {{ code }} for {{ name }}"))

    result = _service(store, clock, templates).send(_command(version=1, to="+15550100001"))

    assert result.message is not None
    assert (result.message.body, result.message.template) == ("Hi Ann, code 1", TemplateRef("otp", 1))


@pytest.mark.parametrize(
    "command",
    [
        _command(name="nope"),
        _command(version=7),
        _command(name="receipt"),  # an email template for an sms send
    ],
)
def test_an_unknown_template_version_or_channel_is_refused_and_nothing_written(
    store: InMemoryStore, clock: ManualClock, templates: CountingTemplates, command: SendCommand
) -> None:
    with pytest.raises(UnknownTemplate):
        _service(store, clock, templates).send(command)

    assert store.messages == {}
    assert store.locks == {}


def test_a_deleted_template_takes_no_new_send(
    store: InMemoryStore, clock: ManualClock, templates: CountingTemplates
) -> None:
    templates.service.delete("ws_a", "otp")

    with pytest.raises(UnknownTemplate):
        _service(store, clock, templates).send(_command())


def test_missing_data_names_every_missing_variable(
    store: InMemoryStore, clock: ManualClock, templates: CountingTemplates
) -> None:
    with pytest.raises(TemplateDataInvalid) as refused:
        _service(store, clock, templates).send(_command(data={}))

    assert refused.value.details == {"missing": ["code", "name"]}
    assert store.messages == {}


@pytest.mark.parametrize(("n", "field"), [(10_001, "body"), (0, "body")])
def test_a_render_that_does_not_fit_its_field_names_the_field(
    store: InMemoryStore, clock: ManualClock, templates: CountingTemplates, n: int, field: str
) -> None:
    with pytest.raises(TemplateDataInvalid) as refused:
        _service(store, clock, templates).send(_command(name="long", data={"n": n}))

    assert refused.value.details == {"field": field}


def test_smart_encoding_applies_to_the_rendered_body(
    store: InMemoryStore, clock: ManualClock, templates: CountingTemplates
) -> None:
    result = _service(store, clock, templates).send(
        _command(data={"name": "\u201cAnn\u201d", "code": "1"}, smart_encoding=True)
    )

    assert result.message is not None
    assert result.message.body == 'Hi "Ann", code 1'


def test_an_email_template_renders_its_subject(
    store: InMemoryStore, clock: ManualClock, templates: CountingTemplates
) -> None:
    command = _command(
        name="receipt", data={"name": "Ada", "id": "A-1"}, channel=Channel("email"), to="ada@x.io"
    )

    result = _service(store, clock, templates).send(command)

    assert result.message is not None
    assert (result.message.subject, result.message.body) == ("Order A-1", "Thanks Ada")


def test_a_batch_reads_each_template_once_and_answers_each_command_alone(
    store: InMemoryStore, clock: ManualClock, templates: CountingTemplates
) -> None:
    sender = BatchSender(store, WINDOW, clock, templates=lambda: templates)
    commands = [_command(to=f"+1555010{i:04d}", data={"name": f"N{i}", "code": "1"}) for i in range(20)] + [
        _command(name="nope"),
        _command(data={"name": "x"}),
        _command(data={"name": "N0", "code": "1"}, to="+15550100000"),
    ]

    outcomes = sender.send_many(commands)

    assert templates.asked == 2  # otp and nope, each once
    assert all(isinstance(o, SendResult) and o.created for o in outcomes[:20])
    assert isinstance(outcomes[20], NotRendered)
    assert isinstance(outcomes[20].error, UnknownTemplate)
    assert isinstance(outcomes[21], NotRendered)
    assert isinstance(outcomes[21].error, TemplateDataInvalid)
    last = outcomes[22]
    assert isinstance(last, SendResult)
    assert last.duplicate  # the first command's template, data and recipient
    assert len(store.messages) == 20


def test_two_commands_sharing_only_the_template_lock_are_one_message_in_a_batch(
    store: InMemoryStore, clock: ManualClock, templates: CountingTemplates
) -> None:
    sender = BatchSender(store, WINDOW, clock, templates=lambda: templates)
    templates.service.add_version("ws_a", "otp", TemplateContent(body="Code {{ code }} for {{ name }}"))

    outcomes = sender.send_many([_command(version=1), _command(version=2)])

    first, second = outcomes
    assert isinstance(first, SendResult)
    assert isinstance(second, SendResult)
    assert (first.created, second.duplicate) == (True, True)
    assert len(store.messages) == 1


# ---------------------------------------------------------------------------- this environment's copy
def test_a_warm_send_reads_no_template_and_its_create_checks_the_copy(
    store: InMemoryStore, clock: ManualClock, templates: CountingTemplates, kept: CountingStore
) -> None:
    service = _service(store, clock, templates)
    service.send(_command())
    reads = kept.reads

    result = service.send(_command(data={"name": "Bo", "code": "2"}))

    assert result.created
    assert kept.reads == reads  # the version this environment read, checked in the create's write


def test_a_version_published_elsewhere_is_sent_at_once(
    store: InMemoryStore, clock: ManualClock, templates: CountingTemplates, kept: CountingStore
) -> None:
    service = _service(store, clock, templates)
    service.send(_command())
    elsewhere = TemplateService(kept, InProcessRenderer(), clock=clock)  # another execution environment
    elsewhere.add_version("ws_a", "otp", TemplateContent(body="Code {{ code }} for {{ name }}"))

    result = service.send(_command(data={"name": "Bo", "code": "2"}))

    assert result.message is not None
    assert (result.message.body, result.message.template) == ("Code 2 for Bo", TemplateRef("otp", 2))


def test_a_template_deleted_elsewhere_takes_no_send_at_once(
    store: InMemoryStore, clock: ManualClock, templates: CountingTemplates, kept: CountingStore
) -> None:
    service = _service(store, clock, templates)
    service.send(_command(version=1))
    TemplateService(kept, InProcessRenderer(), clock=clock).delete("ws_a", "otp")

    with pytest.raises(UnknownTemplate):
        service.send(_command(version=1, data={"name": "Bo", "code": "2"}))
    assert len(store.messages) == 1


# ---------------------------------------------------------------------------- the request
SMS = {"channel": "sms", "to": "+15550100000"}


def _fields(body: dict[str, Any]) -> set[str]:
    with pytest.raises(ValidationError) as invalid:
        SendMessageRequest.model_validate(body)
    return {".".join(str(part) for part in error["loc"]) for error in invalid.value.errors()}


def test_a_request_names_a_template_or_writes_its_body_never_both() -> None:
    assert _fields(SMS | {"body": "hi", "template": {"name": "otp"}}) == {"body"}
    assert _fields(SMS) == {"body"}
    assert _fields(SMS | {"body": "hi", "data": {"a": 1}}) == {"data"}
    assert _fields(SMS | {"template": {"name": "otp", "version": 0}}) == {"template.version", "body"}
    assert _fields(SMS | {"template": {"name": "otp", "other": 1}}) == {"template.other", "body"}


def test_an_email_from_a_template_takes_no_subject_of_its_own() -> None:
    email = {"channel": "email", "to": "ada@x.io", "template": {"name": "receipt"}}

    assert SendMessageRequest.model_validate(email).subject is None
    assert _fields(email | {"subject": "Hi"}) == {"subject"}


def test_data_is_at_most_32_kib_as_json() -> None:
    fits = SMS | {"template": {"name": "otp"}, "data": {"x": "y" * (32 * 1024 - 12)}}
    assert SendMessageRequest.model_validate(fits).data is not None

    assert _fields(fits | {"data": {"x": "y" * (32 * 1024)}}) == {"data"}


def test_the_command_carries_the_request_not_a_render() -> None:
    request = SendMessageRequest.model_validate(
        SMS | {"template": {"name": "otp", "version": 2}, "data": {"b": 1, "a": 2}, "smartEncoding": True}
    )

    command = command_of(request, "ws_a", None)

    assert command.template == TemplateUse("otp", {"b": 1, "a": 2}, 2)
    assert command.body == ""
    assert command.smart_encoding


# ---------------------------------------------------------------------------- the template's identity
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)
data_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=5)  # keys shorter than 7


def _template_lock(body: dict[str, Any]) -> str | None:
    request = SendMessageRequest.model_validate({"channel": "email", "template": {"name": "receipt"}, **body})
    return template_lock_of(command_of(request, "ws_a", None))


@settings(max_examples=60, deadline=None)
@given(data=data_objects, order=st.randoms(use_true_random=False))
def test_property_the_template_identity_is_the_data_whatever_its_key_order_and_the_recipient_set(
    data: dict[str, Any], order: Any
) -> None:
    keys = list(data)
    order.shuffle(keys)
    reordered = {key: data[key] for key in keys}

    one = _template_lock({"to": ["ann@x.io", "bo@x.io"], "data": data})
    other = _template_lock({"to": ["BO@x.io"], "cc": ["ann@X.io"], "data": reordered})

    assert one is not None
    assert one == other
    assert one != _template_lock({"to": ["ann@x.io"], "data": data})  # another set of recipients
    assert one != _template_lock({"to": ["ann@x.io", "bo@x.io"], "data": {**data, "seven!!": 1}})
