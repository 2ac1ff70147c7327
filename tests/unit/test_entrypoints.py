"""Every function of template.yaml has its entry point in `sendonce.entrypoints`, and only there.

A function's file in functions/ imports its entry point's module, inside `frozen_imports`, and
nothing else of the layer; every module of entrypoints/ (but `shared/`) is a function's; each holds
its composition root, whose `build` takes its settings and its clients; and only entry points read
the settings from the environment. So a new function is one module there, its file in functions/
and its block of the template (the import-linter contracts of pyproject.toml, run by `make lint`,
keep the imports running one way).
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest
from sendonce import composition

from sendonce_local.template import FunctionSpec, load_template

REPO = Path(__file__).resolve().parents[2]
LAYER = REPO / "layers" / "sendonce" / "sendonce"
ENTRYPOINTS = LAYER / "entrypoints"
PREFIX = "sendonce.entrypoints."


def _functions() -> dict[str, FunctionSpec]:
    return load_template(REPO / "template.yaml").functions


def _imported_in_block(spec: FunctionSpec) -> list[str]:
    tree = ast.parse(spec.handler_file.read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.With))
    return [node.module or "" for node in block.body if isinstance(node, ast.ImportFrom)]


def _entrypoint_of(spec: FunctionSpec) -> str:
    (module,) = _imported_in_block(spec)
    return module


@pytest.mark.parametrize("function_id", sorted(_functions()))
def test_a_functions_file_imports_its_entry_point_and_nothing_else(function_id: str) -> None:
    spec = _functions()[function_id]

    imported = _imported_in_block(spec)

    assert len(imported) == 1, imported
    assert imported[0].startswith(PREFIX)
    assert not imported[0].startswith(PREFIX + "shared")


@pytest.mark.parametrize("function_id", sorted(_functions()))
def test_a_functions_file_exposes_its_handler_and_root(function_id: str) -> None:
    tree = ast.parse(_functions()[function_id].handler_file.read_text(encoding="utf-8"))
    last = ast.unparse(tree.body[-1])

    assert last == "__all__ = ['handler', 'root']" or last.startswith("handler, root = dispatcher_function(")


def test_every_entry_point_module_is_a_functions() -> None:
    modules = {path.stem for path in ENTRYPOINTS.glob("*.py") if path.stem != "__init__"}
    used = {_entrypoint_of(spec).removeprefix(PREFIX) for spec in _functions().values()}

    assert modules == used


@pytest.mark.parametrize("name", sorted({path.stem for path in ENTRYPOINTS.glob("*.py")} - {"__init__"}))
def test_each_entry_point_holds_its_root_built_from_settings_and_clients(name: str) -> None:
    module = importlib.import_module(PREFIX + name)

    parameters = list(inspect.signature(module.build).parameters)

    assert "settings" in parameters
    assert "clients" in parameters
    if name == "dispatch":  # one module for every channel: a root per dispatcher function
        handler, root = module.dispatcher_function("sms")
        assert callable(handler)
    else:
        assert callable(module.handler)
        root = module.root
    assert isinstance(root, composition.Root)


def test_only_entry_points_read_the_settings_from_the_environment() -> None:
    readers = sorted(
        str(path.relative_to(LAYER))
        for path in LAYER.rglob("*.py")
        if ".from_environment(" in path.read_text(encoding="utf-8")
        and ENTRYPOINTS not in path.parents
        and LAYER / "settings" not in path.parents
    )

    assert readers == []
