"""The templates' Jinja2 side in process (templates.jinja): what a template reads, what it may not.

A variable the data does not have is an error, listing every top-level one at once; the sandbox
refuses Python's internals and every call that changes a value; a template stands alone; the output
stops at its limit; `html` alone is escaped. Time and memory are the forked renderer's
(test_forked_renderer).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sendonce.templates import jinja
from sendonce.templates.jinja import UnrenderableSource, check, render_here
from sendonce.templates.model import TemplateContent
from sendonce.templates.rendering import Forbidden, InvalidSource, MissingData, OverLimit, Rendered

LIMIT = 1_000_000


def body(source: str, data: dict[str, Any] | None = None, limit: int = LIMIT) -> object:
    return render_here(TemplateContent(body=source), data or {}, limit)


@pytest.mark.parametrize(
    ("source", "data", "expected"),
    [
        ("Hello {{ name }}", {"name": "Ada"}, "Hello Ada"),
        ("Order {{ order.id }}", {"order": {"id": 42}}, "Order 42"),
        ("{{ order['id'] }}", {"order": {"id": 7}}, "7"),
        ("{% for i in items %}{{ i.sku }},{% endfor %}", {"items": [{"sku": "a"}, {"sku": "b"}]}, "a,b,"),
        ("{{ name | upper }} {{ items | length }}", {"name": "ada", "items": [1, 2]}, "ADA 2"),
        ("{% if vip %}gold{% else %}plain{% endif %}", {"vip": False}, "plain"),
        ("{{ coupon | default('none') }}", {}, "none"),
        ("{% if coupon is defined %}{{ coupon }}{% endif %}.", {}, "."),
        ("{% set n = 2 %}{{ n * 3 }}", {}, "6"),
        ("{{ x }}", {"x": None}, "None"),
    ],
)
def test_a_template_renders_with_the_datas_top_level_keys_as_its_variables(
    source: str, data: dict[str, Any], expected: str
) -> None:
    assert body(source, data) == Rendered(body=expected)


def test_html_alone_is_escaped() -> None:
    content = TemplateContent(body="{{ v }}", subject="{{ v }}", html="<p>{{ v }}</p>")

    outcome = render_here(content, {"v": "<b>&"}, LIMIT)

    assert outcome == Rendered(body="<b>&", subject="<b>&", html="<p>&lt;b&gt;&amp;</p>")


def test_every_missing_top_level_name_is_listed_at_once_sorted() -> None:
    outcome = body("{{ zeta }} {{ alpha }} {{ here }} {{ mid }} {{ alpha }}", {"here": 1})

    assert outcome == MissingData(("alpha", "mid", "zeta"))


def test_a_name_read_only_where_it_may_be_absent_is_not_listed() -> None:
    outcome = body("{{ a | default('') }}{% if b is defined %}{{ b }}{% endif %}{{ c }}")

    assert outcome == MissingData(("c",))


@pytest.mark.parametrize(
    ("source", "data", "name"),
    [
        ("{{ order.id }}", {"order": {}}, "order.id"),
        ("{{ order.customer.email }}", {"order": {"customer": {}}}, "order.customer.email"),
        ("{% for i in items %}{{ i.sku }}{% endfor %}", {"items": [{"sku": 1}, {}]}, "items[1].sku"),
        ("{{ items[3] }}", {"items": [1]}, "items[3]"),
    ],
)
def test_a_missing_nested_name_is_dotted_from_the_data(source: str, data: dict[str, Any], name: str) -> None:
    assert body(source, data) == MissingData((name,))


def test_a_missing_name_read_from_a_value_not_in_the_data_is_named_as_jinja_names_it() -> None:
    assert body("{% set o = {} %}{{ o.id }}") == MissingData(("id",))


@pytest.mark.parametrize(
    "source",
    [
        "{{ ''.__class__ }}",
        "{{ ''.__class__.__mro__ }}",
        "{{ ().__class__.__base__.__subclasses__() }}",
        "{{ data.__init__.__globals__ }}",
        "{{ data.update({'a': 1}) }}",
        "{{ items.append(1) }}",
        "{{ '{0.__class__}'.format(1) }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ range.__globals__ }}",
        "{{ range(10 ** 9) | list }}",
    ],
)
def test_the_sandbox_refuses_python_internals_and_changes(source: str) -> None:
    outcome = body(source, {"data": {"k": "v"}, "items": [], "name": "n"})

    assert isinstance(outcome, Forbidden)


def test_a_refusal_does_not_echo_the_data() -> None:
    outcome = body("{{ secret.__class__ }}{{ secret.nope() }}", {"secret": "s3cr3t-token"})

    assert isinstance(outcome, Forbidden)
    assert "s3cr3t" not in outcome.reason


def test_a_template_failing_on_its_data_is_told_without_the_data() -> None:
    outcome = body("{{ n | int + 'x' }}{{ 1 / zero }}", {"n": "s3cr3t", "zero": 0})

    assert isinstance(outcome, Forbidden)
    assert "s3cr3t" not in outcome.reason


@pytest.mark.parametrize(
    ("source", "tag"),
    [
        ("{% include 'x' %}", "include"),
        ("{% import 'x' as y %}", "import"),
        ("{% from 'x' import y %}", "import"),
        ("hi\n{% extends 'x' %}", "extends"),
    ],
)
def test_a_template_stands_alone(source: str, tag: str) -> None:
    problems = check(TemplateContent(body="ok", html=source))

    assert len(problems) == 1
    assert problems[0].field == "html"
    assert tag in problems[0].message
    assert isinstance(render_here(TemplateContent(body=source), {}, LIMIT), Forbidden)


def test_check_names_each_bad_field_and_its_line() -> None:
    content = TemplateContent(body="fine {{ x }}", subject="{{ oops", html="<p>\n{{ x | nosuch }}</p>")

    problems = check(content)

    assert [problem.field for problem in problems] == ["subject", "html"]
    assert problems[0].message.startswith("line 1:")
    assert problems[1].message.startswith("line 2:")
    assert "nosuch" in problems[1].message


def test_check_passes_good_content() -> None:
    content = TemplateContent(body="{{ a }}", subject="{{ b }}", html="{% if c %}{{ c }}{% endif %}")

    assert check(content) == []


@pytest.mark.parametrize(
    "source",
    ["{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", "{% for a in b %}" * 30 + "{% endfor %}" * 30],
)
def test_a_source_nested_too_deeply_is_invalid(source: str) -> None:
    assert check(TemplateContent(body=source)) == [InvalidSource("body", "nested too deeply")]


@pytest.mark.parametrize(
    "source",
    ["{{ 'x' * 10 ** 9 }}", "{{ 'x' | center(10 ** 9) }}", "{{ [1] * 10 ** 9 }}", "{{ 10 ** 10 ** 10 }}"],
)
def test_check_evaluates_nothing(source: str) -> None:
    started = time.monotonic()

    assert check(TemplateContent(body=source)) == []
    assert time.monotonic() - started < 0.5


def test_an_autoescape_expression_is_refused_a_constant_is_not() -> None:
    assert check(TemplateContent(body="{% autoescape false %}{{ x }}{% endautoescape %}")) == []
    assert len(check(TemplateContent(body="{% autoescape 'x' * 9 %}{% endautoescape %}"))) == 1


def test_rendering_a_content_that_does_not_parse_raises() -> None:
    with pytest.raises(UnrenderableSource):
        body("{{ x")


def test_the_output_stops_at_its_limit_in_all_fields_together() -> None:
    content = TemplateContent(body="{{ 'b' * 6 }}", subject="{{ 's' * 5 }}")

    assert render_here(content, {}, 11) == Rendered(body="bbbbbb", subject="sssss")
    assert render_here(content, {}, 10) == OverLimit("output")
    assert body("{% for i in range(100000) %}x{% endfor %}", limit=1000) == OverLimit("output")


def test_a_macro_that_calls_itself_runs_out_of_memory() -> None:
    assert body("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}") == OverLimit("memory")


def test_lipsum_is_not_in_reach() -> None:
    assert body("{{ lipsum() }}") == MissingData(("lipsum",))


# Jinja2 writes every line break as "\n": a "\r" is the one plain character that does not come back.
PLAIN = st.text(st.characters(blacklist_characters="{}%#\r", blacklist_categories=("Cs",)), max_size=200)


@given(PLAIN)
def test_plain_text_renders_to_itself(text: str) -> None:
    assert body(text) == Rendered(body=text)


def test_line_breaks_are_written_as_newlines_and_the_last_one_kept() -> None:
    assert body("a\r\nb\rc\n") == Rendered(body="a\nb\nc\n")


def test_compiled_contents_compile_a_content_once_and_render_each_data(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compiled: list[str] = []
    compile_one = jinja._compile

    def counting(field: str, ast: Any) -> Any:
        compiled.append(field)
        return compile_one(field, ast)

    monkeypatch.setattr(jinja, "_compile", counting)
    kept = jinja.CompiledContents(size=2)
    hello, bye, third = (TemplateContent(body=f"{word} {{{{ name }}}}") for word in ("Hi", "Bye", "Yo"))

    assert kept.render(hello, {"name": "Ann"}, 100) == Rendered(body="Hi Ann")
    assert kept.render(hello, {"name": "Bo"}, 100) == Rendered(body="Hi Bo")
    assert kept.render(hello, {}, 100) == MissingData(("name",))
    assert len(compiled) == 1
    kept.render(bye, {"name": "x"}, 100)
    kept.render(third, {"name": "x"}, 100)  # past its size: the oldest, hello, is forgotten
    kept.render(hello, {"name": "x"}, 100)
    assert len(compiled) == 4
    reaching = TemplateContent(body="{{ ''.__class__ }}")
    assert kept.render(reaching, {}, 100) == render_here(reaching, {}, 100)
