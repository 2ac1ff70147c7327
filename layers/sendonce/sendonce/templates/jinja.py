"""The templates context's Jinja2 side, in process: a version's source checked, parsed and rendered.

Nothing a template reads is in reach but the data's own values and the template language's own
tools: an immutable sandbox (no private or unsafe attribute, no call that changes a value), no
loader (a template that includes, imports or extends another is refused), `StrictUndefined` (a
variable the data does not have is an error, never an empty string). `html` is rendered by an
auto-escaping environment, `subject` and `body` by one that does not escape.

Parsing evaluates nothing, and compiling is made to evaluate nothing either (no optimizer, a
finalize that takes the context; see `_environment`), so `check` and `parse` are bounded by the
source's size. Rendering is not: this module stops at `output_limit` characters and ends a recursion
too deep as `OverLimit("memory")` (the stack is memory), but a loop that runs long or a value that
grows large is the caller's to stop. `adapters.forked_renderer` runs `render_here` (parse, then
`render_parsed`) in a worker process of its own, bounded; in this process it is unbounded, for tests.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateSyntaxError, meta, nodes, pass_context
from jinja2.exceptions import SecurityError, UndefinedError
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import missing
from msgspec import Struct

from sendonce.templates.model import TemplateContent
from sendonce.templates.rendering import (
    Forbidden,
    InvalidSource,
    MissingData,
    OverLimit,
    Rendered,
    RenderOutcome,
)

# The fields in the order they are rendered (and their output counted).
FIELDS = ("subject", "body", "html")

# Tests and filters that ask whether a variable is there: a name read only through them may be absent.
_GUARD_TESTS = frozenset({"defined", "undefined"})
_GUARD_FILTERS = frozenset({"default", "d"})

# How many of the data's values are looked through to name where a missing attribute was read.
_SEARCH_VALUES = 100_000


class UnrenderableSource(ValueError):
    """A content that does not parse was given to render: it should have been checked (`check`)."""


class _MissingRead(UndefinedError):
    """A variable read that the data does not have, and the value it was read from (`missing` for
    a top-level name), so that it can be named by where it is in the data."""

    def __init__(self, message: str | None, owner: Any, name: Any) -> None:
        super().__init__(message)
        self.owner = owner
        self.name = name


class _Strict(StrictUndefined):
    # StrictUndefined raises `_undefined_exception(message)`: for a missing read, the _MissingRead
    # that keeps the value read from; the sandbox's refusals keep their SecurityError.
    __slots__ = ()

    def __init__(
        self,
        hint: str | None = None,
        obj: Any = missing,
        name: str | None = None,
        exc: type[Exception] = UndefinedError,
    ) -> None:
        super().__init__(hint, obj, name, exc)  # type: ignore[arg-type]
        if exc is UndefinedError:
            self._undefined_exception = partial(_MissingRead, owner=obj, name=name)  # type: ignore[assignment]


@pass_context
def _as_is(context: Context, value: Any) -> Any:
    return value


def _environment(*, autoescape: bool) -> ImmutableSandboxedEnvironment:
    # Compiling evaluates no expression of the template: no optimizer (it folds constants), and a
    # finalize that takes the context, without which the code generator evaluates each constant
    # output (`{{ 'x' * 10**9 }}`) as it compiles.
    # A source's last line break is its author's, kept (Jinja2 drops it by default).
    environment = ImmutableSandboxedEnvironment(
        undefined=_Strict,
        autoescape=autoescape,
        optimized=False,
        finalize=_as_is,
        keep_trailing_newline=True,
    )
    # lipsum is text from nowhere: a template's output is the template's and the data's only.
    environment.globals.pop("lipsum", None)
    return environment


_PLAIN = _environment(autoescape=False)
_ESCAPED = _environment(autoescape=True)


def _environment_of(field: str) -> ImmutableSandboxedEnvironment:
    return _ESCAPED if field == "html" else _PLAIN


def _sources(content: TemplateContent) -> Iterator[tuple[str, str]]:
    for field in FIELDS:
        source = getattr(content, field)
        if source is not None:
            yield field, source


def _line(error: TemplateSyntaxError) -> str:
    return f"line {error.lineno}: {error.message}"


def _parse(field: str, source: str) -> nodes.Template | InvalidSource:
    try:
        return _environment_of(field).parse(source)
    except TemplateSyntaxError as error:
        return InvalidSource(field, _line(error))
    except RecursionError:
        # The parser descends once per level of nesting: a source this deep is no template.
        return InvalidSource(field, "nested too deeply")


def _compile(field: str, ast: nodes.Template) -> Template | InvalidSource:
    try:
        return _environment_of(field).from_string(ast)
    except TemplateSyntaxError as error:  # an unknown filter or test is found here, not by the parser
        return InvalidSource(field, _line(error))
    except (RecursionError, SyntaxError):  # Python's own limits on the code Jinja2 writes
        return InvalidSource(field, "nested too deeply")


def _refused(ast: nodes.Template) -> str | None:
    """What the template does that a template may not, or None."""
    for node in ast.find_all((nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)):
        tag = {nodes.Include: "include", nodes.Extends: "extends"}.get(type(node), "import")
        return f"line {node.lineno}: a template stands alone, {tag} is not allowed"
    for modifier in ast.find_all(nodes.ScopedEvalContextModifier):
        # The code generator evaluates an `autoescape` block's expression as it compiles.
        if not all(isinstance(option.value, nodes.Const) for option in modifier.options):
            return f"line {modifier.lineno}: autoescape takes true or false, not an expression"
    return None


def check(content: TemplateContent) -> list[InvalidSource]:
    """The fields that do not parse or compile, or that do what a template may not (`_refused`)."""
    problems: list[InvalidSource] = []
    for field, source in _sources(content):
        ast = _parse(field, source)
        if isinstance(ast, InvalidSource):
            problems.append(ast)
            continue
        refused = _refused(ast)
        if refused is not None:
            problems.append(InvalidSource(field, refused))
            continue
        compiled = _compile(field, ast)
        if isinstance(compiled, InvalidSource):
            problems.append(compiled)
    return problems


class Parsed(Struct, frozen=True):
    """A content parsed, not compiled: each present field and its syntax tree."""

    trees: tuple[tuple[str, Any], ...]


def parse(content: TemplateContent) -> Parsed | Forbidden:
    """The content parsed, or Forbidden for what a template may not do; a content that does not parse
    raises UnrenderableSource (checked content always parses)."""
    trees: list[tuple[str, Any]] = []
    for field, source in _sources(content):
        ast = _parse(field, source)
        if isinstance(ast, InvalidSource):
            raise UnrenderableSource(f"{field}: {ast.message}")
        refused = _refused(ast)
        if refused is not None:
            return Forbidden(refused)
        trees.append((field, ast))
    return Parsed(tuple(trees))


def _guarded(ast: nodes.Template) -> set[str]:
    names: set[str] = set()
    for test in ast.find_all(nodes.Test):
        if test.name in _GUARD_TESTS and isinstance(test.node, nodes.Name):
            names.add(test.node.name)
    for filter_ in ast.find_all(nodes.Filter):
        if filter_.name in _GUARD_FILTERS and isinstance(filter_.node, nodes.Name):
            names.add(filter_.node.name)
    return names


def _reads(ast: nodes.Template) -> set[str]:
    """The top-level names the template reads, but those it reads only through `is defined` or
    `default` (it does without them)."""
    return meta.find_undeclared_variables(ast) - _guarded(ast)


class _OutputFull(Exception):
    """The output went past its limit."""


def _where(data: Mapping[str, Any], owner: Any) -> str | None:
    """Where `owner` (a mapping or a list) is in the data, as a template would write it."""
    if not isinstance(owner, Mapping | list):
        return None  # a scalar is shared by identity too often to be placed
    queue: deque[tuple[str, Any]] = deque(data.items())
    seen = 0
    while queue and seen < _SEARCH_VALUES:
        path, value = queue.popleft()
        seen += 1
        if value is owner:
            return path
        if isinstance(value, Mapping):
            queue.extend((f"{path}.{key}", item) for key, item in value.items())
        elif isinstance(value, list):
            queue.extend((f"{path}[{index}]", item) for index, item in enumerate(value))
    return None


def _missing_name(error: UndefinedError, data: Mapping[str, Any]) -> str:
    if not isinstance(error, _MissingRead) or error.name is None:
        return str(error.message)
    if error.owner is missing:
        return str(error.name)
    path = _where(data, error.owner)
    if path is None:  # a value the template made (`set`) or a scalar: the name as Jinja2 reports it
        return str(error.name)
    return f"{path}[{error.name}]" if isinstance(error.name, int) else f"{path}.{error.name}"


def _reason(error: Exception) -> str:
    # Jinja2's messages may quote a value (`... is not safely callable` shows its repr): say what
    # kind of thing was refused, never what it held.
    message = str(error)
    if isinstance(error, OverflowError):
        return "a range longer than the sandbox allows"
    if message.startswith("access to attribute"):
        kind = re.search(r"of '(\w+)' object", message)
        return "an attribute the sandbox refuses" + (f" (on a value of type {kind.group(1)})" if kind else "")
    if message.endswith("is not safely callable"):
        return "a call the sandbox refuses (it would change a value or reach Python's internals)"
    return f"the sandbox refused it ({type(error).__name__})"


def render_parsed(parsed: Parsed, data: Mapping[str, Any], output_limit: int) -> RenderOutcome:
    """The parsed content compiled and rendered with the data's top-level keys as its variables:
    Rendered; MissingData naming every top-level variable the template reads that the data lacks and
    the one the render stopped at, dotted where nested; Forbidden; or OverLimit. Raises
    UnrenderableSource for a content that does not compile (checked content always compiles)."""
    return _render_compiled(Compiled.of(parsed), data, output_limit)


class Compiled(Struct, frozen=True):
    """A content parsed and compiled: what renders it, as often as asked (a version never changes)."""

    parsed: Parsed
    templates: tuple[tuple[str, Template], ...]

    @classmethod
    def of(cls, parsed: Parsed) -> Compiled:
        templates: list[tuple[str, Template]] = []
        for field, ast in parsed.trees:
            compiled = _compile(field, ast)
            if isinstance(compiled, InvalidSource):
                raise UnrenderableSource(f"{field}: {compiled.message}")
            templates.append((field, compiled))
        return cls(parsed, tuple(templates))


class CompiledContents:
    """Contents parsed and compiled once each in the process that renders them (the renderer's
    worker): each version's next renders reuse its compiled templates. At most `size`, the oldest
    forgotten first; a content Forbidden or unrenderable is told so again each time (no entry)."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._kept: dict[TemplateContent, Compiled] = {}

    def render(self, content: TemplateContent, data: Mapping[str, Any], output_limit: int) -> RenderOutcome:
        """`render_here`'s outcome, without parsing or compiling a content met before."""
        compiled = self._kept.get(content)
        if compiled is None:
            parsed = parse(content)
            if isinstance(parsed, Forbidden):
                return parsed
            compiled = Compiled.of(parsed)
            if len(self._kept) >= self._size:
                del self._kept[next(iter(self._kept))]
            self._kept[content] = compiled
        return _render_compiled(compiled, data, output_limit)


def _render_compiled(compiled: Compiled, data: Mapping[str, Any], output_limit: int) -> RenderOutcome:
    parsed, templates = compiled.parsed, compiled.templates
    variables = dict(data)
    out: dict[str, str] = {}
    written = 0
    try:
        for field, template in templates:
            parts: list[str] = []
            # Streamed, so that the output is counted as it grows, not once it is all there.
            for part in template.generate(variables):
                written += len(part)
                if written > output_limit:
                    raise _OutputFull
                parts.append(part)
            out[field] = "".join(parts)
    except _OutputFull:
        return OverLimit("output")
    except UndefinedError as error:
        # Every absent name at once: those the template reads anywhere, and the one it stopped at
        # (which alone may be nested, or read where the tree does not show it).
        absent = {name for _, ast in parsed.trees for name in _reads(ast) if name not in variables}
        return MissingData(tuple(sorted(absent | {_missing_name(error, data)})))
    except (SecurityError, OverflowError) as error:
        return Forbidden(_reason(error))
    except RecursionError:
        # A macro that calls itself: the stack is the render's memory, and it ran out.
        return OverLimit("memory")
    except (ArithmeticError, LookupError, TypeError, ValueError) as error:
        # A template that fails on this data (`1 / 0`, `"a" + 1`): no outcome names it better. Its
        # type only, as its message may quote the data.
        return Forbidden(f"the template failed on this data ({type(error).__name__})")
    return Rendered(body=out.get("body", ""), subject=out.get("subject"), html=out.get("html"))


def render_here(content: TemplateContent, data: Mapping[str, Any], output_limit: int) -> RenderOutcome:
    """`parse` then `render_parsed`, in this process, without a bound on time or memory."""
    parsed = parse(content)
    if isinstance(parsed, Forbidden):
        return parsed
    return render_parsed(parsed, data, output_limit)
