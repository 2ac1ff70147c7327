"""Commands another distribution adds to `sendonce`, through the entry-point group `sendonce.commands`.

One entry a command, named as the command and pointing at a `Command`. The development
distribution (sendonce-dev) adds the local stack's `run` and `invoke` so: the operator commands
never import it, and without it `sendonce run` says in one line how to get it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points

GROUP = "sendonce.commands"

# The development distribution's commands: named here so that without it they still show in
# `sendonce --help` and say how to get them. tests/unit/test_cli_package.py holds this equal to what
# it registers.
DEVELOPMENT_COMMANDS = ("run", "invoke")
HOW_TO_GET = (
    "it comes with the local stack (the development distribution, sendonce-dev): "
    "run `make install` in a clone of the repository"
)


@dataclass(frozen=True)
class Command:
    """A command as `sendonce` lists, parses and runs it; `run` answers the exit status."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str | None = None


def installed() -> dict[str, Command]:
    """The commands of the installed distributions, by name."""
    found: dict[str, Command] = {}
    for entry in entry_points(group=GROUP):
        command = entry.load()
        if not isinstance(command, Command):
            raise TypeError(
                f"entry point {entry.name} = {entry.value} of {GROUP} is not a sendonce_cli Command"
            )
        found[entry.name] = command
    return found
