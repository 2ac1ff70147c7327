"""A function's imports run with the collector paused, and what they built ends up frozen out of
its reach; every function module of the template imports that way, and the local stack's fork
server still preloads what it imports."""

from __future__ import annotations

import ast
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from sendonce.startup import frozen_imports

from sendonce_local.lambda_runtime import handler_imports
from sendonce_local.template import load_template

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def collector() -> Iterator[None]:
    """The test process's collector, as it was, whatever a test does to it."""
    was_enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if was_enabled:
        gc.enable()
    else:
        gc.disable()


class _Imported:
    """Stands for an object an import builds: a class, a module's dictionary."""


def test_the_collector_is_paused_in_the_block_and_on_again_after_it_with_the_block_frozen(
    collector: None,
) -> None:
    gc.enable()
    frozen_before = gc.get_freeze_count()

    with frozen_imports():
        assert not gc.isenabled()
        built = [_Imported() for _ in range(1_000)]

    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen_before + len(built)
    collected = {id(item) for generation in range(3) for item in gc.get_objects(generation=generation)}
    assert not collected & {id(item) for item in built}  # no collection scans them again


def test_a_collector_that_was_off_stays_off(collector: None) -> None:
    gc.disable()

    with frozen_imports():
        pass

    assert not gc.isenabled()


def test_an_import_that_fails_still_puts_the_collector_back(collector: None) -> None:
    gc.enable()

    with pytest.raises(ImportError), frozen_imports():
        raise ImportError("no module named nowhere")

    assert gc.isenabled()


def _function_files() -> list[Path]:
    template = load_template(REPO / "template.yaml")
    return sorted({spec.handler_file for spec in template.functions.values()})


@pytest.mark.parametrize("file", _function_files(), ids=lambda file: file.parent.name)
def test_every_function_module_imports_inside_frozen_imports(file: Path) -> None:
    module = ast.parse(file.read_text(encoding="utf-8"))
    statements = module.body[1:]  # after the docstring
    imports_at_top = [s for s in statements if isinstance(s, ast.Import | ast.ImportFrom)]
    blocks = [s for s in statements if isinstance(s, ast.With)]

    assert [ast.unparse(s) for s in imports_at_top] == ["from sendonce.startup import frozen_imports"]
    assert len(blocks) == 1
    assert ast.unparse(blocks[0].items[0].context_expr) == "frozen_imports()"
    assert all(isinstance(s, ast.Import | ast.ImportFrom) for s in blocks[0].body)
    assert statements.index(blocks[0]) == statements.index(imports_at_top[0]) + 1


@pytest.mark.parametrize("file", _function_files(), ids=lambda file: file.parent.name)
def test_the_local_stacks_fork_server_preloads_what_a_function_imports_inside_the_block(file: Path) -> None:
    spec = next(s for s in load_template(REPO / "template.yaml").functions.values() if s.handler_file == file)
    block = next(s for s in ast.parse(file.read_text(encoding="utf-8")).body if isinstance(s, ast.With))
    imported = [node.module for node in block.body if isinstance(node, ast.ImportFrom) and node.module]

    assert imported
    assert set(imported) <= set(handler_imports(spec))
