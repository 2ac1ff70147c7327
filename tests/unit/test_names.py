"""One name, one thing: no two classes or type aliases of the layer share a name, and the words of
docs/architecture.md's glossary keep their sides (provider events come in, status webhooks go out;
a message is dispatched, an event delivered)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

LAYER = Path(__file__).resolve().parents[2] / "layers" / "sendonce" / "sendonce"


def _modules() -> dict[str, ast.Module]:
    return {
        str(path.relative_to(LAYER)): ast.parse(path.read_text(encoding="utf-8"))
        for path in LAYER.rglob("*.py")
    }


def _declared_names(tree: ast.Module) -> set[str]:
    """The classes, and the module-level aliases of a type (`Item = dict[...]`), a module declares."""
    names: set[str] = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript | ast.BinOp):
            names.update(
                target.id
                for target in node.targets
                if isinstance(target, ast.Name) and target.id[:1].isupper()
            )
    return {name for name in names if not name.isupper()}


def test_no_two_classes_or_type_aliases_of_the_layer_share_a_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for module, tree in _modules().items():
        for name in _declared_names(tree):
            where[name].append(module)

    assert {name: modules for name, modules in where.items() if len(modules) > 1} == {}


def test_the_inbound_side_never_says_webhook_and_the_dispatch_side_never_says_delivery() -> None:
    """`provider_events/` is what comes in; `dispatch/` hands a message to its provider. Their
    modules, and the classes they declare or take, use the glossary's words, not the other side's."""
    wrong = []
    for module, tree in _modules().items():
        names = [module] + [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
        names += [
            alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names
        ]
        if module.startswith("provider_events/"):
            wrong += [f"{module}: {name}" for name in names if "webhook" in name.lower()]
        if module.startswith("dispatch/"):
            wrong += [f"{module}: {name}" for name in names if "deliver" in name.lower()]

    assert wrong == []
