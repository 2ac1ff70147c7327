"""The templates context's renderer port: a version's content and a send's data in, text out.

Rendering is Jinja2 in its sandbox, with nothing in reach but the data's own values. It is bounded:
a render runs at most `RENDER_SECONDS`, produces at most `OUTPUT_CHARACTERS` characters in all, and
may not use more memory than its bound; past any of them it is stopped and told `OverLimit`, and
the function rendering it goes on. A variable the data does not have is an error, never an empty
string. `html` is auto-escaped; `subject` and `body` are not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from msgspec import Struct

from sendonce.templates.model import TemplateContent

RENDER_SECONDS = 1.0
OUTPUT_CHARACTERS = 1_000_000


class Rendered(Struct, frozen=True):
    """The content rendered: each field that the version has."""

    body: str
    subject: str | None = None
    html: str | None = None


class MissingData(Struct, frozen=True):
    """Every variable the template reads that the data does not have, dotted where nested
    (`order.id`), each once, sorted."""

    names: tuple[str, ...]


class OverLimit(Struct, frozen=True):
    """The render was stopped: `limit` is "time", "output" or "memory"."""

    limit: str


class Forbidden(Struct, frozen=True):
    """The template reached for something the sandbox refuses (a Python object's internals, an
    unsafe attribute or call); `reason` says what, without echoing data."""

    reason: str


class InvalidSource(Struct, frozen=True):
    """A field of a version that does not parse as a template: `field` ("subject", "body" or
    "html") and what is wrong, with its line."""

    field: str
    message: str


RenderOutcome = Rendered | MissingData | OverLimit | Forbidden


class Renderer(Protocol):
    def check(self, content: TemplateContent) -> list[InvalidSource]:
        """The fields that do not parse (none: every field is a template)."""
        ...

    def render(self, content: TemplateContent, data: Mapping[str, Any]) -> RenderOutcome:
        """The content rendered with `data` as its variables, within the bounds."""
        ...
