"""The templates' store contract, on every engine (its items and conflicts on moto and DynamoDB Local).

A name's versions numbered one after another, each readable and never changed; a live name taken
once; a delete that hides every version and takes no new one, after which the name may be created
again and its numbers go on; every operation scoped by workspace; the listing by name, paged; and
races: writers adding versions at once each get a number of their own, creators of one name at
once leave one template.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from msgspec.structs import replace
from sendonce.adapters.dynamodb_suppressions import encode_cursor
from sendonce.adapters.dynamodb_templates import head_key, name_cursor, version_key
from sendonce.adapters.dynamodb_writes import MAX_ATTEMPTS
from sendonce.errors import DependencyUnavailable, InvalidCursor
from sendonce.messages.model import Channel
from sendonce.templates.model import Template, TemplateContent
from sendonce.templates.ports import NameTaken, TemplateMissing, TemplateStore

from tests.store.conftest import NOW, DynamoDbEngine, Engine, Stores, build_stores, conflicts, only, race

ADDERS = 20
CREATORS = 10


@pytest.fixture
def templates(stores: Stores) -> TemplateStore:
    return stores.templates


def _content(n: int = 1) -> TemplateContent:
    return TemplateContent(body=f"Hi {{{{ name }}}}, v{n}")


def _template(
    name: str = "welcome",
    workspace: str = "ws_a",
    content: TemplateContent | None = None,
    channel: str = "sms",
    at: datetime = NOW,
) -> Template:
    return Template(
        workspace_id=workspace,
        name=name,
        channel=Channel(channel),
        version=7,  # ignored: the store numbers versions
        content=content or _content(),
        created_at=at,
    )


def _created(
    templates: TemplateStore,
    name: str = "welcome",
    workspace: str = "ws_a",
    content: TemplateContent | None = None,
) -> Template:
    outcome = templates.create(_template(name, workspace, content))
    assert isinstance(outcome, Template), outcome
    return outcome


def _added(templates: TemplateStore, n: int, name: str = "welcome", workspace: str = "ws_a") -> Template:
    outcome = templates.add_version(workspace, name, _content(n), NOW + timedelta(minutes=n))
    assert isinstance(outcome, Template), outcome
    return outcome


def _names(templates: TemplateStore, workspace: str, limit: int) -> list[list[str]]:
    """Every page of the workspace's listing, followed from the first, as names."""
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = templates.page(workspace, limit, cursor)
        pages.append([template.name for template in page.templates])
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


# ---------------------------------------------------------------------------- create, versions
def test_given_a_template_created_then_it_is_its_first_version_and_its_latest(
    templates: TemplateStore,
) -> None:
    email = TemplateContent(body="Hi {{ name }}", subject="Welcome", html="<p>Hi {{ name }}</p>")

    created = templates.create(_template(content=email, channel="email"))

    assert created == replace(_template(content=email, channel="email"), version=1)
    assert templates.latest("ws_a", "welcome") == created
    assert templates.version("ws_a", "welcome", 1) == created
    assert templates.version("ws_a", "welcome", 2) is None
    assert templates.version("ws_a", "welcome", 0) is None
    assert templates.latest("ws_a", "other") is None


def test_given_a_live_template_then_creating_its_name_again_is_told_its_latest_and_writes_nothing(
    engine: Engine, templates: TemplateStore
) -> None:
    _created(templates)
    latest = _added(templates, 2)
    before = engine.snapshot()

    assert templates.create(_template(content=_content(9))) == NameTaken(latest)
    assert engine.snapshot() == before


def test_given_versions_added_then_numbered_one_after_another_and_each_readable_as_written(
    templates: TemplateStore,
) -> None:
    first = _created(templates)
    second = _added(templates, 2)
    third = _added(templates, 3)

    assert [first.version, second.version, third.version] == [1, 2, 3]
    assert third.content == _content(3)
    assert third.created_at == NOW + timedelta(minutes=3)
    assert third.channel == first.channel  # a version keeps its template's channel
    assert templates.latest("ws_a", "welcome") == third
    for written in (first, second, third):
        assert templates.version("ws_a", "welcome", written.version) == written
    assert templates.version("ws_a", "welcome", 4) is None


def test_given_no_template_then_no_version_is_added_and_nothing_is_deleted(templates: TemplateStore) -> None:
    assert templates.add_version("ws_a", "welcome", _content(), NOW) == TemplateMissing()
    assert not templates.delete("ws_a", "welcome", NOW)
    assert templates.latest("ws_a", "welcome") is None


# ---------------------------------------------------------------------------- delete, create again
def test_given_a_template_deleted_then_no_version_is_read_or_added_and_it_is_deleted_once(
    templates: TemplateStore,
) -> None:
    _created(templates)
    _added(templates, 2)

    assert templates.delete("ws_a", "welcome", NOW + timedelta(hours=1))

    assert templates.latest("ws_a", "welcome") is None
    assert templates.version("ws_a", "welcome", 1) is None
    assert templates.version("ws_a", "welcome", 2) is None
    assert templates.add_version("ws_a", "welcome", _content(3), NOW) == TemplateMissing()
    assert not templates.delete("ws_a", "welcome", NOW + timedelta(hours=2))
    assert templates.page("ws_a", 10, None).templates == []


def test_given_a_deleted_name_created_again_then_its_versions_go_on_from_the_last_number(
    templates: TemplateStore,
) -> None:
    _created(templates)
    second = _added(templates, 2)
    _added(templates, 3)
    assert templates.delete("ws_a", "welcome", NOW)

    again = templates.create(_template(content=_content(40), channel="email", at=NOW + timedelta(days=1)))

    assert isinstance(again, Template), again
    assert again.version == 4
    assert again.channel == Channel("email")
    assert templates.latest("ws_a", "welcome") == again
    assert templates.version("ws_a", "welcome", 4) == again
    assert _added(templates, 5).version == 5
    # A number is never reused: an earlier version, if shown, is still what it was.
    assert templates.version("ws_a", "welcome", 2) in (None, second)


# ---------------------------------------------------------------------------- workspaces
def test_given_another_workspace_then_it_sees_nothing_and_changes_nothing(
    engine: Engine, templates: TemplateStore
) -> None:
    mine = _created(templates)
    before = engine.snapshot()

    assert templates.latest("ws_b", "welcome") is None
    assert templates.version("ws_b", "welcome", 1) is None
    assert templates.page("ws_b", 10, None).templates == []
    assert templates.add_version("ws_b", "welcome", _content(2), NOW) == TemplateMissing()
    assert not templates.delete("ws_b", "welcome", NOW)
    assert engine.snapshot() == before

    theirs = _created(templates, workspace="ws_b", content=_content(8))
    assert theirs.version == 1  # the name is theirs too, numbered on its own
    assert templates.latest("ws_a", "welcome") == mine
    assert templates.latest("ws_b", "welcome") == theirs


# ---------------------------------------------------------------------------- the listing
def test_given_templates_then_listed_by_name_latest_versions_only_deleted_left_out(
    templates: TemplateStore,
) -> None:
    for name in ("foxtrot", "bravo", "echo", "alpha", "delta", "charlie"):
        _created(templates, name=name)
    latest_echo = _added(templates, 2, name="echo")
    assert templates.delete("ws_a", "charlie", NOW)
    _created(templates, name="other", workspace="ws_b")

    assert _names(templates, "ws_a", 2) == [["alpha", "bravo"], ["delta", "echo"], ["foxtrot"]]
    assert _names(templates, "ws_a", 5) == [["alpha", "bravo", "delta", "echo", "foxtrot"]]
    assert _names(templates, "ws_a", 10) == [["alpha", "bravo", "delta", "echo", "foxtrot"]]
    assert templates.page("ws_a", 10, None).templates[3] == latest_echo


def test_given_a_page_then_the_next_resumes_after_it_even_once_its_last_name_is_deleted(
    templates: TemplateStore,
) -> None:
    for name in ("a1", "a2", "a3", "a4", "a5", "a6", "a7"):
        _created(templates, name=name)
    first = templates.page("ws_a", 2, None)
    assert [t.name for t in first.templates] == ["a1", "a2"]
    for name in ("a2", "a3", "a4", "a5"):  # the page's last and every one after it but two
        assert templates.delete("ws_a", name, NOW)

    assert first.next_cursor is not None
    second = templates.page("ws_a", 1, first.next_cursor)
    assert [t.name for t in second.templates] == ["a6"]
    assert second.next_cursor is not None
    last = templates.page("ws_a", 1, second.next_cursor)
    assert [t.name for t in last.templates] == ["a7"]
    assert last.next_cursor is None


@pytest.mark.parametrize(
    "cursor",
    ["", "%%%", "bm90IGEgbmFtZQ", name_cursor("Welcome"), encode_cursor("2036-11-30T12:00:00.000Z#ann@x.io")],
)
def test_given_a_cursor_the_listing_never_gave_then_invalid_cursor(
    templates: TemplateStore, cursor: str
) -> None:
    _created(templates)

    with pytest.raises(InvalidCursor):
        templates.page("ws_a", 10, cursor)


# ---------------------------------------------------------------------------- races
def test_given_versions_added_at_once_then_each_writer_gets_its_own_number_and_every_version_is_kept(
    templates: TemplateStore,
) -> None:
    _created(templates)

    answers = race(ADDERS, lambda i: templates.add_version("ws_a", "welcome", _content(100 + i), NOW))

    added = only(answers, Template)
    assert len(added) == ADDERS, answers
    assert sorted(t.version for t in added) == list(range(2, ADDERS + 2))
    for template in added:
        assert templates.version("ws_a", "welcome", template.version) == template
    latest = templates.latest("ws_a", "welcome")
    assert latest is not None
    assert latest.version == ADDERS + 1


@pytest.mark.parametrize("deleted_first", [False, True])
def test_given_one_name_created_at_once_then_one_template_and_every_other_is_told_it(
    templates: TemplateStore, deleted_first: bool
) -> None:
    if deleted_first:
        _created(templates)
        assert templates.delete("ws_a", "welcome", NOW)

    answers = race(CREATORS, lambda i: templates.create(_template(content=_content(i))))

    [winner] = only(answers, Template)
    assert winner.version == (2 if deleted_first else 1)
    assert only(answers, NameTaken) == [NameTaken(winner)] * (CREATORS - 1), answers
    assert templates.latest("ws_a", "welcome") == winner
    assert templates.version("ws_a", "welcome", winner.version) == winner


# ---------------------------------------------------------------------------- the DynamoDB items
def test_given_a_template_then_its_head_and_version_items_are_keyed_by_workspace_and_name(
    dynamodb_engine: DynamoDbEngine, templates: TemplateStore
) -> None:
    _created(templates)
    _added(templates, 2)
    assert templates.delete("ws_a", "welcome", NOW)

    head = dynamodb_engine.item(head_key("ws_a", "welcome"))
    assert head is not None
    assert (head["pk"]["S"], head["sk"]["S"]) == ("TEMPLATES#ws_a", "welcome")
    assert head["version"] == {"N": "2"}
    assert head["deletedAt"] == {"S": "2036-11-30T12:00:00.000Z"}
    assert {(item["pk"]["S"], item["sk"]["S"]) for item in dynamodb_engine.items()} == {
        ("TEMPLATES#ws_a", "welcome"),
        ("TEMPLATE#ws_a#welcome", "v#0000000001"),
        ("TEMPLATE#ws_a#welcome", "v#0000000002"),
    }
    assert version_key("ws_a", "welcome", 2)["sk"] == {"S": "v#0000000002"}
    assert "expiresAt" not in head  # templates outlive messages


def test_given_conflicts_on_the_first_tries_then_a_version_is_written_once(
    dynamodb_engine: DynamoDbEngine, templates: TemplateStore
) -> None:
    _created(templates)
    client = dynamodb_engine.new_client()
    calls = conflicts(client, 3)

    added = build_stores(client).templates.add_version("ws_a", "welcome", _content(2), NOW)

    assert isinstance(added, Template)
    assert added.version == 2
    assert len(calls) == 4
    assert templates.latest("ws_a", "welcome") == added


def test_given_conflicts_on_every_try_then_dependency_unavailable_and_nothing_written(
    dynamodb_engine: DynamoDbEngine,
) -> None:
    client = dynamodb_engine.new_client()
    calls = conflicts(client, 1000)

    with pytest.raises(DependencyUnavailable):
        build_stores(client).templates.create(_template())

    assert len(calls) == MAX_ATTEMPTS
    assert dynamodb_engine.items() == []


def test_given_a_name_that_is_no_template_name_then_create_refuses_it(templates: TemplateStore) -> None:
    """`#` would make another (workspace, name) of its version items' key."""
    with pytest.raises(ValueError, match="no template name"):
        templates.create(_template(name="a#b"))
