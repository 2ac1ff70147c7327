"""The forked renderer (adapters.forked_renderer), for real: renders in a worker process of its own.

The function survives any template: a render that runs too long, grows too large or says too much is
stopped and told OverLimit, the worker it ran in is replaced, and nothing of it is left behind, no
process, no descriptor, once the renderer is closed.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jinja2.lexer
import pytest
from jinja2.utils import LRUCache
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


MakeRenderer = Callable[..., ForkedRenderer]


@pytest.fixture
def make_renderer() -> Iterator[MakeRenderer]:
    """ForkedRenderer, each closed after the test (before `nothing_left_behind` looks)."""
    made: list[ForkedRenderer] = []

    def make(**bounds: Any) -> ForkedRenderer:
        made.append(ForkedRenderer(**bounds))
        return made[-1]

    yield make
    for renderer in made:
        renderer.close()


@pytest.fixture
def renderer(make_renderer: MakeRenderer) -> ForkedRenderer:
    return make_renderer(seconds=0.3)


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


def test_a_render_comes_back_from_the_worker(renderer: ForkedRenderer) -> None:
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


def test_a_render_is_stopped_at_one_second_by_default(make_renderer: MakeRenderer) -> None:
    started = time.monotonic()

    assert render(make_renderer(), NESTED_LOOPS) == OverLimit("time")
    assert 1.0 <= time.monotonic() - started < 1.0 + 5


@pytest.mark.parametrize("source", [HUGE_STRING, DOUBLING])
def test_a_render_that_grows_too_large_is_stopped(make_renderer: MakeRenderer, source: str) -> None:
    # Time to spare: on a loaded machine the copies up to the bound may take longer than 0.3 s,
    # and it is the memory bound that must stop these.
    assert render(make_renderer(seconds=10), source) == OverLimit("memory")


def test_a_render_that_says_too_much_is_stopped(make_renderer: MakeRenderer) -> None:
    small = make_renderer(seconds=0.3, output_characters=1000)

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


def test_a_template_that_stands_on_another_is_refused(renderer: ForkedRenderer) -> None:
    assert isinstance(render(renderer, "{% extends 'base' %}"), Forbidden)


@pytest.mark.parametrize("source", ["{{ x", "{{ x | nosuch }}"])
def test_a_content_that_does_not_parse_or_compile_raises(renderer: ForkedRenderer, source: str) -> None:
    # `nosuch` parses: it is compiling that finds no such filter.
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


def children() -> set[int]:
    """This process's child processes, as /proc shows them."""
    found: set[int] = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            parent = parent_of(int(name))
            if parent == os.getpid():
                found.add(int(name))
    return found


def parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def gone(pid: int) -> bool:
    """The process is no child of this one (ended and reaped)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_renders_reuse_one_worker(renderer: ForkedRenderer) -> None:
    assert renderer.worker_pid is None  # forked on the first render, not before

    first = [render(renderer, "{{ n }}", {"n": n}) for n in range(50)]
    worker = renderer.worker_pid
    # Answers that are not a Rendered keep it too.
    assert isinstance(render(renderer, "{{ ''.__class__ }}"), Forbidden)
    assert render(renderer, "{{ missing }}") == MissingData(("missing",))
    with pytest.raises(UnrenderableSource):
        render(renderer, "{{ x | nosuch }}")
    last = [render(renderer, "{{ n }}", {"n": n}) for n in range(50)]

    assert first == last == [Rendered(body=str(n)) for n in range(50)]
    assert worker is not None
    assert renderer.worker_pid == worker
    assert children() == {worker}


@pytest.mark.parametrize(
    ("source", "limit", "seconds"), [(NESTED_LOOPS, "time", 0.3), (HUGE_STRING, "memory", 10)]
)
def test_after_a_render_that_overran_the_next_has_a_fresh_worker(
    make_renderer: MakeRenderer, source: str, limit: str, seconds: float
) -> None:
    renderer = make_renderer(seconds=seconds)
    assert render(renderer, "{{ n }}", {"n": 1}) == Rendered(body="1")
    overran = renderer.worker_pid

    assert render(renderer, source) == OverLimit(limit)
    assert renderer.worker_pid is None  # ended and reaped, not left to the next render
    assert overran is not None
    assert gone(overran)

    assert render(renderer, "{{ n }}", {"n": 2}) == Rendered(body="2")
    assert renderer.worker_pid not in (None, overran)


def test_a_worker_killed_between_renders_is_replaced(renderer: ForkedRenderer) -> None:
    assert render(renderer, "{{ n }}", {"n": 1}) == Rendered(body="1")
    killed = renderer.worker_pid
    assert killed is not None
    os.kill(killed, signal.SIGKILL)
    os.waitid(os.P_PID, killed, os.WEXITED | os.WNOWAIT)  # dead, not yet reaped: its pipe is broken

    assert render(renderer, "{{ n }}", {"n": 2}) == Rendered(body="2")
    assert renderer.worker_pid not in (None, killed)
    assert gone(killed)


def test_renders_from_eight_threads_each_get_their_own_answer(renderer: ForkedRenderer) -> None:
    # All start at once on a renderer without a worker (they race to start it), and one of them
    # renders a template that runs too long halfway (its worker is replaced under the others).
    start = threading.Barrier(8)

    def renders(thread: int) -> list[object]:
        start.wait()
        sources = [NESTED_LOOPS if (thread, i) == (3, 10) else "{{ t }}.{{ i }}" for i in range(20)]
        return [render(renderer, source, {"t": thread, "i": i}) for i, source in enumerate(sources)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = dict(enumerate(pool.map(renders, range(8))))

    expected = {
        t: [OverLimit("time") if (t, i) == (3, 10) else Rendered(body=f"{t}.{i}") for i in range(20)]
        for t in range(8)
    }
    assert results == expected
    assert children() == {renderer.worker_pid}


def test_a_process_forked_from_the_parent_has_a_worker_of_its_own(renderer: ForkedRenderer) -> None:
    assert render(renderer, "{{ n }}", {"n": 1}) == Rendered(body="1")
    parents_worker = renderer.worker_pid
    # The fork is made while another thread is mid-render, holding the renderer's lock.
    busy = threading.Thread(target=render, args=(renderer, NESTED_LOOPS))
    busy.start()
    while not renderer._lock.locked():
        time.sleep(0.001)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # forked with threads, on purpose
        child = os.fork()
    if child == 0:
        code = 1
        try:
            # A deadlock ends the child, and so fails the test, rather than hangs it.
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(20)
            rendered = render(renderer, "{{ n }}", {"n": 2}) == Rendered(body="2")
            worker = renderer.worker_pid
            own = worker not in (None, parents_worker) and parent_of(worker or 0) == os.getpid()
            renderer.close()
            code = 0 if rendered and own else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    busy.join()

    assert os.waitstatus_to_exitcode(status) == 0
    # The parent's worker was the parent's all along (replaced after the busy render ran too long).
    assert render(renderer, "{{ n }}", {"n": 3}) == Rendered(body="3")
    assert children() == {renderer.worker_pid}


def test_close_leaves_nothing_behind(renderer: ForkedRenderer) -> None:
    before = open_descriptors()
    assert render(renderer, "{{ n }}", {"n": 1}) == Rendered(body="1")
    worker = renderer.worker_pid
    assert worker is not None
    assert open_descriptors() == before + 2  # the parent's ends of the two pipes

    renderer.close()
    renderer.close()  # again: nothing to do

    assert renderer.worker_pid is None
    assert gone(worker)
    assert open_descriptors() == before
    # A render after close starts a fresh worker.
    assert render(renderer, "{{ n }}", {"n": 2}) == Rendered(body="2")


def test_a_renderer_dropped_unclosed_ends_its_worker() -> None:
    renderer = ForkedRenderer()
    assert render(renderer, "{{ n }}", {"n": 1}) == Rendered(body="1")
    worker = renderer.worker_pid
    assert worker is not None

    del renderer
    gc.collect()

    assert gone(worker)


def test_the_data_comes_through_as_given(renderer: ForkedRenderer) -> None:
    # An int past 64 bits, which msgpack cannot carry, among the data's other JSON values.
    data = {"n": 10**30, "f": 0.1, "xs": [None, {"k": True}], "s": "é"}

    assert render(renderer, "{{ n + 1 }} {{ f }} {{ xs[1].k }} {{ xs[0] }} {{ s }}", data) == Rendered(
        body=f"{10**30 + 1} 0.1 True None é"
    )


def test_a_worker_ends_with_its_parent() -> None:
    # A parent that dies without closing its renderer (no finalizer runs on `os._exit`).
    script = (
        "import os\n"
        "from sendonce.adapters.forked_renderer import ForkedRenderer\n"
        "from sendonce.templates.model import TemplateContent\n"
        "renderer = ForkedRenderer()\n"
        "renderer.render(TemplateContent(body='x'), {})\n"
        "print(renderer.worker_pid, flush=True)\n"
        "os._exit(0)\n"
    )
    parent = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    worker = int(parent.stdout)

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and state_of(worker) not in (None, "Z"):
        time.sleep(0.01)
    assert state_of(worker) in (None, "Z")  # gone, or ended and awaiting its new parent's reaping


def state_of(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


class SlowLexerCache(LRUCache):
    """Jinja2's lexer cache, holding its lock 5 ms a look-up: a thread parsing holds it most of the time."""

    def __getitem__(self, key: Any) -> Any:
        with self._wlock:
            time.sleep(0.005)
        return super().__getitem__(key)


def test_a_worker_is_never_forked_mid_parse(
    renderer: ForkedRenderer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `check` parses in this process, under Jinja2's lexer-cache lock: a worker forked while another
    # thread held it would wait for it forever at its first parse, and its render would time out.
    monkeypatch.setattr(jinja2.lexer, "_lexer_cache", SlowLexerCache(50))
    stop = threading.Event()

    def checks() -> None:
        while not stop.is_set():
            renderer.check(TemplateContent(body="{{ n }}"))
            time.sleep(0.001)

    checker = threading.Thread(target=checks)
    checker.start()
    try:
        outcomes = []
        for n in range(20):
            outcomes.append(render(renderer, "{{ n }}", {"n": n}))
            renderer.close()  # the next render forks a fresh worker
    finally:
        stop.set()
        checker.join()

    assert outcomes == [Rendered(body=str(n)) for n in range(20)]
