"""A function's imports run with the collector paused, and what they built ends up frozen out of
its reach; every function module of the template imports that way, and the local stack's fork
server still preloads what it imports. After a SnapStart restore, what must be unique per
execution environment is drawn again, by the hook registered with Lambda's runtime."""

from __future__ import annotations

import ast
import gc
import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sendonce.composition import Root
from sendonce.startup import after_restore, frozen_imports, register_restore_hook

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


class _RuntimeHooks:
    """Stands for `snapshot_restore_py`, the module Lambda's Python runtimes bring."""

    def __init__(self) -> None:
        self.after: list[Callable[[], None]] = []

    def register_after_restore(self, hook: Callable[[], None]) -> None:
        self.after.append(hook)


def test_the_restore_hook_is_registered_with_the_runtimes_hooks() -> None:
    hooks = _RuntimeHooks()

    assert register_restore_hook(hooks) is True
    assert hooks.after == [after_restore]


def test_without_the_runtimes_hooks_nothing_is_registered_and_nothing_fails() -> None:
    assert register_restore_hook() is False  # no snapshot_restore_py outside Lambda


def test_after_a_restore_two_environments_from_one_snapshot_draw_apart_and_build_afresh() -> None:
    """Two environments resumed from one snapshot start with the same `random` state; the hook
    reseeds each from the OS, and forgets every root, so nothing built before is shared."""
    built: list[object] = []
    root: Root[object] = Root(lambda: built.append(object()) or built[-1])
    first = root.get()
    random.seed(28)  # the snapshot's state, the same in every resumed environment
    snapshot = random.getstate()

    draws = []
    for _ in range(2):  # each resumed environment
        random.setstate(snapshot)
        after_restore()
        draws.append([random.random() for _ in range(4)])

    assert draws[0] != draws[1]
    assert root.get() is not first  # built again, after the restore


def test_a_forked_child_draws_apart_from_its_parent() -> None:
    """The standard library's own hook: `random` reseeds itself in a forked child."""
    random.seed(28)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.write(write, repr(random.random()).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = float(os.read(read, 64).decode())
    os.close(read)
    os.close(write)

    assert child != random.random()
