"""The forked renderer (adapters.forked_renderer), for real: each render in a child of this process.

The function survives any template: a render that runs too long, grows too large or says too much is
stopped and told OverLimit, and nothing of it is left behind, no child process, no descriptor.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sendonce.adapters.forked_renderer import ForkedRenderer
from sendonce.templates.jinja import UnrenderableSource
from sendonce.templates.model import TemplateContent
from sendonce.templates.rendering import Forbidden, InvalidSource, MissingData, OverLimit, Rendered

NESTED_LOOPS = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
HUGE_STRING = "{{ 'x' * 10 ** 9 }}"
# Doubles a string 40 times (a terabyte), one `~` at a time.
DOUBLING = (
    "{% set s = namespace(v='x') %}{% for i in range(40) %}{% set s.v = s.v ~ s.v %}{% endfor %}{{ s.v }}"
)


@pytest.fixture
def renderer() -> ForkedRenderer:
    return ForkedRenderer(seconds=0.3)


def render(renderer: ForkedRenderer, source: str, data: dict[str, Any] | None = None) -> object:
    return renderer.render(TemplateContent(body=source), data or {})


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def children_left() -> bool:
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return False
    return True


@pytest.fixture(autouse=True)
def nothing_left_behind() -> Iterator[None]:
    before = open_descriptors()
    yield
    assert not children_left()
    assert open_descriptors() == before


def test_a_render_comes_back_from_its_child(renderer: ForkedRenderer) -> None:
    content = TemplateContent(body="Hi {{ name }}", subject="{{ n }} for you", html="<b>{{ name }}</b>")

    outcome = renderer.render(content, {"name": "<Ada>", "n": 3})

    assert outcome == Rendered(body="Hi <Ada>", subject="3 for you", html="<b>&lt;Ada&gt;</b>")


def test_check_is_in_process(renderer: ForkedRenderer) -> None:
    assert renderer.check(TemplateContent(body="{{ x", html="{% include 'y' %}")) == [
        InvalidSource("body", "line 1: unexpected end of template, expected 'end of print statement'."),
        InvalidSource("html", "line 1: a template stands alone, include is not allowed"),
    ]


def test_a_render_that_runs_too_long_is_stopped(renderer: ForkedRenderer) -> None:
    started = time.monotonic()

    assert render(renderer, NESTED_LOOPS) == OverLimit("time")
    # Stopped, not left to run its billions of steps (a margin for a loaded machine).
    assert time.monotonic() - started < 0.3 + 5


def test_a_render_is_stopped_at_one_second_by_default() -> None:
    started = time.monotonic()

    assert render(ForkedRenderer(), NESTED_LOOPS) == OverLimit("time")
    assert 1.0 <= time.monotonic() - started < 1.0 + 5


@pytest.mark.parametrize("source", [HUGE_STRING, DOUBLING])
def test_a_render_that_grows_too_large_is_stopped(source: str) -> None:
    # Time to spare: on a loaded machine the copies up to the bound may take longer than 0.3 s,
    # and it is the memory bound that must stop these.
    assert render(ForkedRenderer(seconds=10), source) == OverLimit("memory")


def test_a_render_that_says_too_much_is_stopped() -> None:
    small = ForkedRenderer(seconds=0.3, output_characters=1000)

    assert render(small, "{{ 'x' * 1001 }}") == OverLimit("output")
    assert render(small, "{{ 'x' * 1000 }}") == Rendered(body="x" * 1000)


def test_the_default_output_cap_holds(renderer: ForkedRenderer) -> None:
    assert render(renderer, "{{ 'é' * 1000000 }}") == Rendered(body="é" * 1_000_000)
    assert render(renderer, "{{ 'x' * 1000001 }}") == OverLimit("output")


def test_a_refusal_and_missing_data_come_back_intact(renderer: ForkedRenderer) -> None:
    assert render(renderer, "{{ ''.__class__.__mro__ }}") == Forbidden(
        "an attribute the sandbox refuses (on a value of type str)"
    )
    assert render(renderer, "{{ b }}{{ a }}{{ order.id }}", {"order": {}}) == MissingData(("a", "b"))
    assert render(renderer, "{{ order.id }}", {"order": {}}) == MissingData(("order.id",))


def test_a_macro_that_calls_itself_is_stopped(renderer: ForkedRenderer) -> None:
    assert render(renderer, "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}") == OverLimit("memory")


def test_a_template_that_stands_on_another_is_refused_without_a_child(renderer: ForkedRenderer) -> None:
    assert isinstance(render(renderer, "{% extends 'base' %}"), Forbidden)


@pytest.mark.parametrize("source", ["{{ x", "{{ x | nosuch }}"])
def test_a_content_that_does_not_parse_or_compile_raises(renderer: ForkedRenderer, source: str) -> None:
    # `nosuch` parses: it is the child, compiling, that finds no such filter.
    with pytest.raises(UnrenderableSource, match="body: line 1"):
        render(renderer, source)


def test_twenty_renders_killed_or_not_leave_nothing_behind(renderer: ForkedRenderer) -> None:
    sources = ["{{ n }}", NESTED_LOOPS, HUGE_STRING, "{{ ''.__class__ }}", "{{ missing }}"] * 4

    outcomes = [render(renderer, source, {"n": 1}) for source in sources]

    assert outcomes[:5] == [
        Rendered(body="1"),
        OverLimit("time"),
        OverLimit("memory"),
        Forbidden("an attribute the sandbox refuses (on a value of type str)"),
        MissingData(("missing",)),
    ]
    assert outcomes == outcomes[:5] * 4
