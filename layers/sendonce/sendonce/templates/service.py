"""The templates' use cases: create, add a version, read, list, delete, and render a preview.

A version is checked before it is stored: its fields as its channel allows them (`subject` where
the channel requires one and nowhere else, `html` only where the channel takes one), and each
field parsing as a template. Nothing that breaks a rule is stored. A render reads the version it
names (the latest when it names none) and renders it within the renderer's bounds; a send from a
template (`sendonce.messages.ports.SendTemplates`) finds and renders its version the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sendonce import channels
from sendonce.clock import Clock, utc_now
from sendonce.errors import InvalidTemplate, TemplateDataInvalid, TemplateExists, TemplateNotFound
from sendonce.messages.model import Channel
from sendonce.messages.ports import TemplatedContent
from sendonce.observability import logger
from sendonce.templates.model import NAME, Template, TemplateContent, TemplatePage
from sendonce.templates.ports import NameTaken, TemplateMissing, TemplateStore
from sendonce.templates.rendering import Forbidden, MissingData, OverLimit, Rendered, Renderer

# The template versions a function keeps for its sends (each a few KiB at most).
KEPT_VERSIONS = 512


class TemplateService:
    def __init__(self, store: TemplateStore, renderer: Renderer, clock: Clock = utc_now) -> None:
        self._store = store
        self._renderer = renderer
        self._clock = clock
        # What sends read, kept for the life of the execution environment: a version never changes,
        # and which one is the latest (or whether the template still lives) the send's create checks.
        self._versions: dict[tuple[str, str, int], Template] = {}
        self._latest: dict[tuple[str, str], int] = {}

    def create(self, workspace_id: str, name: str, channel: Channel, content: TemplateContent) -> Template:
        if NAME.fullmatch(name) is None:
            raise InvalidTemplate("name", "must be 1 to 64 of a-z 0-9 _ -, starting with a letter or a digit")
        self._check(channel, content)
        template = Template(workspace_id, name, channel, 1, content, self._clock())
        written = self._store.create(template)
        if isinstance(written, NameTaken):
            raise TemplateExists(f"A template named {name} exists already.")
        logger.info(
            "template.created",
            extra={"event": "template.created", "workspace_id": workspace_id, "version": written.version},
        )
        return written

    def add_version(self, workspace_id: str, name: str, content: TemplateContent) -> Template:
        current = self.latest(workspace_id, name)
        self._check(current.channel, content)
        written = self._store.add_version(workspace_id, name, content, self._clock())
        if isinstance(written, TemplateMissing):
            raise TemplateNotFound()
        logger.info(
            "template.versioned",
            extra={"event": "template.versioned", "workspace_id": workspace_id, "version": written.version},
        )
        return written

    def latest(self, workspace_id: str, name: str) -> Template:
        found = self._store.latest(workspace_id, name) if NAME.fullmatch(name) else None
        if found is None:
            raise TemplateNotFound()
        return found

    def version(self, workspace_id: str, name: str, version: int) -> Template:
        found = self._store.version(workspace_id, name, version) if NAME.fullmatch(name) else None
        if found is None:
            raise TemplateNotFound()
        return found

    def page(self, workspace_id: str, limit: int, cursor: str | None) -> TemplatePage:
        return self._store.page(workspace_id, limit, cursor)

    def delete(self, workspace_id: str, name: str) -> None:
        if not NAME.fullmatch(name) or not self._store.delete(workspace_id, name, self._clock()):
            raise TemplateNotFound()
        logger.info("template.deleted", extra={"event": "template.deleted", "workspace_id": workspace_id})

    def render(
        self, workspace_id: str, name: str, version: int | None, data: Mapping[str, Any]
    ) -> tuple[Template, Rendered]:
        """The version (the latest when None) rendered with `data`; TemplateDataInvalid when the
        render is refused."""
        template = (
            self.latest(workspace_id, name) if version is None else self.version(workspace_id, name, version)
        )
        return template, self._rendered(template, data)

    def find(self, workspace_id: str, name: str, version: int | None, *, fresh: bool) -> Template | None:
        """A send's template (`SendTemplates`): that version of a live template, the latest when None;
        not `fresh`, as this environment last read it when it did."""
        if NAME.fullmatch(name) is None:
            return None
        if not fresh:
            number = self._latest.get((workspace_id, name)) if version is None else version
            kept = self._versions.get((workspace_id, name, number)) if number is not None else None
            if kept is not None:
                return kept
        found = (
            self._store.latest(workspace_id, name)
            if version is None
            else self._store.version(workspace_id, name, version)
        )
        if found is not None:
            self._keep(found, latest=version is None)
        return found

    def _keep(self, template: Template, *, latest: bool) -> None:
        if len(self._versions) >= KEPT_VERSIONS:  # the oldest kept goes first
            del self._versions[next(iter(self._versions))]
        self._versions[(template.workspace_id, template.name, template.version)] = template
        if latest:
            if len(self._latest) >= KEPT_VERSIONS:
                del self._latest[next(iter(self._latest))]
            self._latest[(template.workspace_id, template.name)] = template.version

    def render_for_send(self, template: Template, data: Mapping[str, Any]) -> TemplatedContent:
        """A send's content (`SendTemplates`): the version rendered, as `render` renders a preview."""
        rendered = self._rendered(template, data)
        return TemplatedContent(
            version=template.version, body=rendered.body, subject=rendered.subject, html=rendered.html
        )

    def _rendered(self, template: Template, data: Mapping[str, Any]) -> Rendered:
        outcome = self._renderer.render(template.content, data)
        if isinstance(outcome, MissingData):
            names = ", ".join(outcome.names)
            raise TemplateDataInvalid(f"The data has no {names}.", missing=list(outcome.names))
        if isinstance(outcome, OverLimit):
            raise TemplateDataInvalid(f"The render went over its {outcome.limit} limit.", limit=outcome.limit)
        if isinstance(outcome, Forbidden):
            raise TemplateDataInvalid(
                f"The template could not be rendered: {outcome.reason}.", reason=outcome.reason
            )
        return outcome

    def _check(self, channel: Channel, content: TemplateContent) -> None:
        spec = channels.spec(channel)
        if spec.subject == "required" and content.subject is None:
            raise InvalidTemplate("subject", f"is required for {channel}")
        if spec.subject == "forbidden" and content.subject is not None:
            raise InvalidTemplate("subject", f"is not allowed for {channel}")
        if not spec.html and content.html is not None:
            raise InvalidTemplate("html", f"is not allowed for {channel}")
        for invalid in self._renderer.check(content):
            raise InvalidTemplate(invalid.field, invalid.message)
