"""sendonce_cli: the operator CLI installs and runs without the local stack or its emulator.

- The distribution's declared dependencies, and everything they in turn require, name no moto and
  no sendonce-dev.
- In a fresh interpreter where the development distribution is out of sight (its entry points
  hidden, `moto` and `sendonce_local` refused at import), `sendonce --help` and every operator
  command's `--help` answer, and nothing tries to import either; the local stack's `run` and
  `invoke` are still listed and say in one line how to get them.
- With the development distribution installed, as `make install` leaves it, its `run` and `invoke`
  are the CLI's commands, and the operator commands still load no moto.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import tomllib
from importlib.metadata import PackageNotFoundError, distribution, requires
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from sendonce_cli.commands import DEVELOPMENT_COMMANDS, GROUP, HOW_TO_GET

REPO = Path(__file__).resolve().parents[2]
CLI_PYPROJECT = REPO / "clients" / "cli" / "pyproject.toml"
DEV_PYPROJECT = REPO / "pyproject.toml"
FORBIDDEN = {"moto", "sendonce-dev"}
OPERATOR_HELPS = [
    ["--help"],
    ["create-api-key", "--help"],
    ["release-lock", "--help"],
    ["resolve", "--help"],
    ["workspace", "--help"],
    ["workspace", "set-limits", "--help"],
    ["suppressions", "--help"],
    ["suppressions", "list", "--help"],
    ["suppressions", "add", "--help"],
    ["suppressions", "remove", "--help"],
]

# Runs `sendonce` (sendonce_cli.main.main) on each argv of argv[1] (JSON) in this one interpreter and
# prints, as JSON, each run's exit status and output, the refused imports, and the moto and
# sendonce_local modules loaded. argv[2] == "operator": as an operator's install, without sendonce-dev.
RUNNER = textwrap.dedent(
    """
    import contextlib, io, json, sys
    import importlib.metadata as metadata

    refused = []

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in ("moto", "sendonce_local"):
                refused.append(name)
                raise ModuleNotFoundError(f"No module named {name!r} (refused by the test)")
            return None

    if sys.argv[2] == "operator":
        sys.meta_path.insert(0, Refuse())
        every = metadata.entry_points

        def entry_points(**selection):
            return [entry for entry in every(**selection) if entry.dist.name != "sendonce-dev"]

        metadata.entry_points = entry_points

    from sendonce_cli.main import main

    runs = []
    for argv in json.loads(sys.argv[1]):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(argv)
            except SystemExit as stop:
                status = stop.code
        runs.append({"argv": argv, "status": status, "out": out.getvalue(), "err": err.getvalue()})
    loaded = sorted(name for name in sys.modules if name.partition(".")[0] in ("moto", "sendonce_local"))
    print(json.dumps({"runs": runs, "refused": refused, "loaded": loaded}))
    """
)


def _sendonce(argvs: list[list[str]], install: str) -> dict[str, Any]:
    finished = subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(argvs), install],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    answer: dict[str, Any] = json.loads(finished.stdout)
    return answer


def _closure(name: str, extras: frozenset[str] = frozenset()) -> set[str]:
    """Every distribution `name` (with `extras`) requires, directly or not, as installed here."""
    found: set[str] = set()
    waiting = [(canonicalize_name(name), extras)]
    while waiting:
        current, wanted = waiting.pop()
        for line in requires(current) or []:
            requirement = Requirement(line)
            marker = requirement.marker
            if marker is not None and not any(
                marker.evaluate({"extra": extra}) for extra in (wanted or frozenset({""}))
            ):
                continue
            required = canonicalize_name(requirement.name)
            if required not in found:
                found.add(required)
                waiting.append((required, frozenset(requirement.extras)))
    return found


# ---------------------------------------------------------------------------- what it declares
def test_the_cli_declares_the_layer_package_and_boto3_and_neither_moto_nor_the_local_stack() -> None:
    declared = tomllib.loads(CLI_PYPROJECT.read_text())["project"]["dependencies"]
    names = {canonicalize_name(Requirement(line).name) for line in declared}

    assert names == {"sendonce", "boto3"}
    assert {canonicalize_name(Requirement(line).name) for line in requires("sendonce-cli") or []} == names


def test_nothing_the_cli_requires_requires_moto_or_the_local_stack() -> None:
    every = _closure("sendonce-cli")

    assert {"sendonce", "boto3", "botocore", "aws-lambda-powertools", "pydantic"} <= every
    assert not every & FORBIDDEN
    # the check can see them: the development distribution does require moto
    assert "moto" in _closure("sendonce-dev")


def test_the_sendonce_command_is_the_clis_and_the_local_stack_adds_run_and_invoke() -> None:
    scripts = {
        e.name: e.value for e in distribution("sendonce-cli").entry_points if e.group == "console_scripts"
    }
    development = distribution("sendonce-dev").entry_points
    declared = tomllib.loads(DEV_PYPROJECT.read_text())["project"]

    assert scripts == {"sendonce": "sendonce_cli.main:main"}
    assert "scripts" not in declared  # one distribution owns bin/sendonce
    assert sorted(declared["entry-points"][GROUP]) == sorted(DEVELOPMENT_COMMANDS)
    assert sorted(e.name for e in development if e.group == GROUP) == sorted(DEVELOPMENT_COMMANDS)
    assert not [e for e in development if e.group == "console_scripts"]


def test_the_local_stack_is_not_a_distribution_of_the_cli() -> None:
    with pytest.raises(PackageNotFoundError):
        distribution("sendonce-local")
    assert not (REPO / "clients" / "cli" / "src" / "sendonce_local").exists()


# ---------------------------------------------------------------------------- an operator's install
def test_without_the_local_stack_every_operator_help_answers_and_nothing_imports_it() -> None:
    answer = _sendonce(
        [*OPERATOR_HELPS, ["run"], ["run", "--parameter-overrides", "A=1"], ["invoke", "--help"]], "operator"
    )

    assert answer["refused"] == []
    assert answer["loaded"] == []
    helps, missing = answer["runs"][: len(OPERATOR_HELPS)], answer["runs"][len(OPERATOR_HELPS) :]
    for run in helps:
        assert (run["status"], run["err"]) == (0, ""), run
        assert run["out"].startswith("usage: sendonce"), run
    listing = helps[0]["out"]
    for name in ["run", "invoke", "create-api-key", "release-lock", "resolve", "workspace", "suppressions"]:
        assert f"\n    {name} " in listing, name
    assert re.search(r"\n    run +the local stack's: not installed here\n", listing)
    assert re.search(r"\n    invoke +the local stack's: not installed here\n", listing)
    for run in missing:
        command = run["argv"][0]
        assert run["status"] == 2, run
        assert run["out"] == ""
        assert run["err"] == f"sendonce {command}: not installed here; {HOW_TO_GET}\n"


# ---------------------------------------------------------------------------- a developer's install
def test_with_the_local_stack_run_and_invoke_are_commands_and_the_operator_ones_load_no_moto() -> None:
    answer = _sendonce([*OPERATOR_HELPS, ["run", "--help"], ["invoke", "--help"]], "development")

    assert all(run["status"] == 0 for run in answer["runs"]), answer["runs"]
    listing = answer["runs"][0]["out"]
    assert re.search(r"\n    run +serve the local stack in the foreground", listing)
    assert re.search(r"\n    invoke +run one function of the template on one event file", listing)
    assert "--parameter-overrides Name=Value" in answer["runs"][-2]["out"]
    assert "--event EVENT, -e EVENT" in answer["runs"][-1]["out"]
    # the entry points' module alone: moto and the stack load only when `run` or `invoke` runs
    assert answer["loaded"] == ["sendonce_local", "sendonce_local.commands"]
