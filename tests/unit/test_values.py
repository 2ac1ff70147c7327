"""Values are msgspec Structs: the package declares no dataclass but its settings classes.

A frozen dataclass compiles its generated methods when its module is imported (about 0.45 ms each on
python3.13); a Struct is built in C (about 0.01 ms). docs/architecture.md, "Values", says why.
"""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from sendonce.dispatch.ports import ClaimedMessage
from sendonce.messages.model import Channel, Message, Status
from sendonce.messages.ports import Created, DuplicateOf

PACKAGE = Path(__file__).resolve().parents[2] / "layers" / "sendonce" / "sendonce"
# Each field names the variable it is read from in its metadata, which `from_environment` reads.
DATACLASSES_ALLOWED_IN = PACKAGE / "settings"


def _dataclasses(path: Path, root: Path = PACKAGE) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if name == "dataclass":
                    found.append(f"{path.relative_to(root)}: {node.name}")
    return found


def test_the_package_declares_its_values_as_structs_not_dataclasses() -> None:
    modules = [path for path in PACKAGE.rglob("*.py") if DATACLASSES_ALLOWED_IN not in path.parents]
    found = [each for path in modules for each in _dataclasses(path)]

    assert found == []


def test_the_check_finds_a_dataclass(tmp_path: Path) -> None:
    module = tmp_path / "values.py"
    module.write_text("from dataclasses import dataclass\n\n@dataclass(frozen=True)\nclass A:\n    x: int\n")
    assert _dataclasses(module, root=tmp_path) == ["values.py: A"]


NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def message() -> Message:
    return Message(
        id="msg_01HZY0000000000000000000AA",
        workspace_id="ws_1",
        channel=Channel("sms"),
        to="+15550100000",
        body="hello",
        status=Status.QUEUED,
        created_at=NOW,
        updated_at=NOW,
    )


def test_a_frozen_value_refuses_a_change_and_is_replaced_instead(message: Message) -> None:
    created = Created(message)

    with pytest.raises(AttributeError):
        created.message = message  # type: ignore[misc]
    assert msgspec.structs.replace(message, body="other").body == "other"
    assert message.body != "other"


def test_outcomes_compare_by_value_and_type(message: Message) -> None:
    assert Created(message) == Created(message)
    assert Created(message) != DuplicateOf(original=message, locked_at=message.created_at)


def test_a_claimed_message_claimed_again_keeps_its_latest_retry_figures(message: Message) -> None:
    first = ClaimedMessage.of(message, NOW, throttled_attempts=1)

    again = ClaimedMessage.of(first, NOW, throttled_attempts=2)

    assert (again.first_attempt_at, again.throttled_attempts, again.body) == (NOW, 2, message.body)
