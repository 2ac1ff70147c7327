"""Every setting is declared once: the settings classes, the template and the README agree.

The settings classes (`sendonce.settings`, `variables()`) say what each function reads and the
value it takes when unset. template.yaml sets them on the functions: from a parameter, from a
resource of the stack, or as a fixed value. The README's Settings table lists every setting a user
or operator can set (the classes' `SENDONCE_*` ones and the local stack's own), with its default
and where a deployed stack's value comes from ("set by"); its Deploy section names every
parameter. Here each is held to the others.
"""

from __future__ import annotations

import os
import re
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any

import pytest
from sendonce import settings
from sendonce.settings import (
    ApiSettings,
    CampaignSettings,
    DispatcherSettings,
    ErasureSettings,
    EventsSettings,
    HandoffSettings,
    MessageChangesSettings,
    WebhookDeliverySettings,
)

from sendonce_local.template import Template, load_template

REPO = Path(__file__).resolve().parents[2]
SETTING = re.compile(r"SENDONCE_[A-Z0-9_]*[A-Z0-9]")
# Powertools reads its own variables (Globals); no settings class of ours does.
POWERTOOLS = "POWERTOOLS_"

# The settings class each function's composition root builds (a new function declares its own).
FUNCTION_SETTINGS: dict[str, type[Any]] = {
    "ApiFunction": ApiSettings,
    "CampaignFunction": CampaignSettings,
    "ErasureFunction": ErasureSettings,
    "DispatchSmsFunction": DispatcherSettings,
    "DispatchImessageFunction": DispatcherSettings,
    "DispatchEmailFunction": DispatcherSettings,
    "OutboxFunction": DispatcherSettings,
    "HandoffFunction": HandoffSettings,
    "StatusFunction": EventsSettings,
    "MessageChangesFunction": MessageChangesSettings,
    "WebhookDeliveryFunction": WebhookDeliverySettings,
}
CLASSES = sorted(set(FUNCTION_SETTINGS.values()), key=lambda cls: cls.__name__)


@dataclass(frozen=True)
class Row:
    """One setting of the README's table."""

    variable: str
    default: str | None  # the value the row states first, if it states one (a number, a word, `code`)
    set_by: str  # "parameter P", "the stack: R", "fixed: V", "its default" or "the local stack"


@pytest.fixture(scope="module")
def template() -> Template:
    return load_template(REPO / "template.yaml")


def _readme_section(title: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def _stated(cell: str) -> str | None:
    """The value a default cell states first: `code`, or a value of one word ("none": no value)."""
    first = re.split(r";| \(", cell, maxsplit=1)[0].strip()
    code = re.fullmatch(r"`([^`]+)`", first)
    if code:
        return code.group(1)
    if re.fullmatch(r"[\w.-]+", first) and first != "none":
        return first
    return None


def _readme_rows() -> dict[str, Row]:
    rows: dict[str, Row] = {}
    for line in _readme_section("Settings").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        variables = re.findall(r"`([^`]+)`", cells[0])
        defaults = cells[1].split(" / ") if len(variables) > 1 else [cells[1]]
        set_by = cells[2].removeprefix("parameters ").split(" / ") if len(variables) > 1 else [cells[2]]
        if len(set_by) == len(variables) and set_by[0].startswith("`"):
            set_by = [f"parameter {each}" for each in set_by]
        elif len(set_by) != len(variables):
            set_by = set_by * len(variables)
        assert len(defaults) == len(variables), line
        for variable, default, source in zip(variables, defaults, set_by, strict=True):
            assert variable not in rows, f"the README lists {variable} twice"
            rows[variable] = Row(variable, _stated(default), source)
    return rows


def _read_by_classes() -> dict[str, dict[type[Any], Any]]:
    """Each variable the classes read, with its default in each class that reads it."""
    read: dict[str, dict[type[Any], Any]] = {}
    for cls in CLASSES:
        for variable, default in cls.variables().items():
            read.setdefault(variable, {})[cls] = default
    return read


def _setters(template: Template, variable: str) -> dict[str, Any]:
    """The functions that set `variable`, with the (unresolved) value each gives it."""
    return {
        function_id: spec.environment[variable]
        for function_id, spec in template.functions.items()
        if variable in spec.environment
    }


def _local_stack_settings() -> set[str]:
    """The `SENDONCE_*` variables the local stack's own code names (not the functions')."""
    names: set[str] = set()
    for path in (REPO / "sendonce_local").rglob("*.py"):
        names |= set(SETTING.findall(path.read_text(encoding="utf-8")))
    return names - set(_read_by_classes())


def _named_in_sources() -> set[str]:
    """Every `SENDONCE_*` name in the project's Python outside the tests."""
    names: set[str] = set()
    for root, directories, files in os.walk(REPO):
        directories[:] = [
            d for d in directories if not d.startswith(".") and d not in {"build", "node_modules", "tests"}
        ]
        for name in files:
            if name.endswith(".py"):
                names |= set(SETTING.findall((Path(root) / name).read_text(encoding="utf-8")))
    return names


def _same(stated: str, value: Any) -> bool:
    if isinstance(value, bool):
        return stated == str(value).lower()
    if isinstance(value, int | float):
        return float(stated) == float(value)
    return stated == str(value)


# ---------------------------------------------------------------------------- classes and template
def test_every_function_names_its_settings_class(template: Template) -> None:
    assert set(FUNCTION_SETTINGS) == set(template.functions)
    # Every settings class of the package is some function's.
    assert set(CLASSES) == {getattr(settings, name) for name in settings.CLASSES}


@pytest.mark.parametrize("function_id", sorted(FUNCTION_SETTINGS))
def test_a_required_variable_is_set_on_every_function_that_reads_it(
    template: Template, function_id: str
) -> None:
    required = {
        name for name, default in FUNCTION_SETTINGS[function_id].variables().items() if default is MISSING
    }
    assert required <= set(template.functions[function_id].environment)


@pytest.mark.parametrize("function_id", sorted(FUNCTION_SETTINGS))
def test_a_function_is_given_only_what_its_settings_read(template: Template, function_id: str) -> None:
    """Its own environment, that is; Globals' is checked below."""
    own = (template.resources[function_id]["Properties"].get("Environment") or {}).get("Variables") or {}
    assert set(own) <= set(FUNCTION_SETTINGS[function_id].variables())


def test_every_variable_of_globals_is_read_by_a_class_or_by_powertools(template: Template) -> None:
    shared = (template.globals["Function"].get("Environment") or {}).get("Variables") or {}
    read = set(_read_by_classes())
    assert {name for name in shared if not name.startswith(POWERTOOLS) and name not in read} == set()


def test_every_variable_a_class_reads_is_set_by_the_template_or_left_to_its_default(
    template: Template,
) -> None:
    """A class's variable is set on one of the functions built from it, or the README says a
    deployed stack leaves it to its default ("its default")."""
    rows = _readme_rows()
    for variable, by_class in _read_by_classes().items():
        for cls in by_class:
            functions = {f for f, each in FUNCTION_SETTINGS.items() if each is cls}
            if functions & set(_setters(template, variable)):
                continue
            row = rows.get(variable)
            assert row is not None, f"{cls.__name__} reads {variable}: no function of it is given it"
            assert row.set_by == "its default", (
                f"{cls.__name__} reads {variable}, which no function of it is given: set it in the "
                "template, or say in the README's table that a deployed stack takes its default"
            )


# ------------------------------------------------------------------------------------------ README
def test_the_readme_lists_every_setting_a_user_or_operator_can_set() -> None:
    listed = set(_readme_rows())
    ours = {name for name in _read_by_classes() if name.startswith("SENDONCE_")}

    assert ours - listed == set(), "a setting of the functions is missing from the README's table"
    assert _local_stack_settings() - listed == set(), "a local stack setting is missing from the table"
    named = _named_in_sources() | set(_read_by_classes())
    assert listed - named == set(), "the README's table lists a setting nothing reads"


def test_the_readme_says_where_each_deployed_value_comes_from(template: Template) -> None:
    read = _read_by_classes()
    for row in _readme_rows().values():
        setters = _setters(template, row.variable)
        if row.set_by == "the local stack":
            assert row.variable not in read, f"{row.variable} is read by the functions"
            continue
        assert row.variable in read, f"{row.variable}: no settings class reads it"
        if row.set_by == "its default":
            assert not setters, f"{row.variable} is set by the template"
            continue
        assert setters, f"{row.variable} ({row.set_by}) is set on no function"
        kind, _, what = row.set_by.partition(" ")
        named = re.findall(r"`([^`]+)`", what)
        if kind == "parameter":
            assert named, row
            assert named[0] in template.parameters, row
            assert all(value == {"Ref": named[0]} for value in setters.values()), (row, setters)
        elif kind == "fixed:":
            assert all(value == named[0] for value in setters.values()), (row, setters)
        else:
            assert row.set_by.startswith("the stack: "), row
            assert named, row
            assert template.resource_type(named[0]), row
            # The resource itself (!Ref), or a URL of it (!Sub "https://${HttpApi}...").
            assert all(
                value == {"Ref": named[0]} or f"${{{named[0]}}}" in str(value.get("Fn::Sub", ""))
                for value in setters.values()
            ), (row, setters)


def test_defaults_agree_where_both_state_one(template: Template) -> None:
    read = _read_by_classes()
    for row in _readme_rows().values():
        if row.variable not in read:
            continue
        for cls, default in read[row.variable].items():
            if default is MISSING or default == "":
                continue  # a class that states none
            assert row.default is not None, f"{row.variable}: the README states no default ({default!r})"
            assert _same(row.default, default), (
                f"{row.variable}: README {row.default}, {cls.__name__} {default!r}"
            )
        for value in _setters(template, row.variable).values():
            if isinstance(value, dict) and set(value) == {"Ref"} and value["Ref"] in template.parameters:
                parameter = template.parameters[value["Ref"]]
                if "Default" in parameter and row.default is not None:
                    assert _same(row.default, parameter["Default"]), (row, value["Ref"])
                for default in read[row.variable].values():
                    if default is not MISSING and default != "" and "Default" in parameter:
                        assert _same(str(parameter["Default"]), default), (row.variable, value["Ref"])


def test_a_parameter_that_feeds_a_variable_names_it(template: Template) -> None:
    for spec in template.functions.values():
        for variable, value in spec.environment.items():
            if isinstance(value, dict) and value.get("Ref") in template.parameters:
                description = str(template.parameters[value["Ref"]].get("Description", ""))
                assert description.startswith(variable), (value["Ref"], variable)


def test_the_readme_names_every_parameter_in_its_deploy_section(template: Template) -> None:
    named = set(re.findall(r"`([A-Za-z][A-Za-z0-9]*)`", _readme_section("Deploy")))
    assert set(template.parameters) - named == set()
