"""A template: a workspace's named content for one channel, in immutable numbered versions.

A version, once written, never changes: (workspace, name, version) always means one content, so a
message that names the version it was rendered from names what it was rendered from. A deleted
template takes no new send; its name may be created again, and its versions then go on from the
last number it had, never reusing one.
"""

from __future__ import annotations

import re
from datetime import datetime

from msgspec import Struct

from sendonce.messages.model import Channel

# 1 to 64 of a-z 0-9 _ -, starting with a letter or a digit.
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


class TemplateContent(Struct, frozen=True):
    """What a version holds: its source texts (Jinja2), `subject` for email, `html` email only."""

    body: str
    subject: str | None = None
    html: str | None = None


class Template(Struct, frozen=True):
    """One version of a template, as stored."""

    workspace_id: str
    name: str
    channel: Channel
    version: int
    content: TemplateContent
    created_at: datetime


class TemplatePage(Struct, frozen=True):
    """The latest version of each live template, by name, and where the next page starts."""

    templates: list[Template]
    next_cursor: str | None
