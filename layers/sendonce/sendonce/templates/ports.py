"""The templates context's port: where a workspace's templates and their versions are kept.

Every operation is scoped by workspace: another workspace's template is not found, never shown.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from msgspec import Struct

from sendonce.templates.model import Template, TemplateContent, TemplatePage


class NameTaken(Struct, frozen=True):
    """A live template already has that name in the workspace (`current`: its latest version)."""

    current: Template


class TemplateMissing(Struct, frozen=True):
    """No live template has that name in the workspace (never created, or deleted)."""


class TemplateStore(Protocol):
    def create(self, template: Template) -> Template | NameTaken:
        """The template's first version, or, for a name deleted before, its next: the returned
        template carries the version written (`template.version` is ignored)."""
        ...

    def add_version(
        self, workspace_id: str, name: str, content: TemplateContent, now: datetime
    ) -> Template | TemplateMissing:
        """A new version after the latest, whatever other writers add at the same time: each writer
        gets a version of its own, numbered one after another."""
        ...

    def latest(self, workspace_id: str, name: str) -> Template | None:
        """The latest version of a live template."""
        ...

    def version(self, workspace_id: str, name: str, version: int) -> Template | None:
        """That version of a live template."""
        ...

    def page(self, workspace_id: str, limit: int, cursor: str | None) -> TemplatePage:
        """The live templates' latest versions, by name; raise InvalidCursor for a cursor this list
        never gave."""
        ...

    def delete(self, workspace_id: str, name: str, now: datetime) -> bool:
        """No new send may use it from now on; False when no live template has that name."""
        ...
