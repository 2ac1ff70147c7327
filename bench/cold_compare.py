"""A function's cold start now against an earlier revision's, side by side, on the deployed runtime.

`python -m bench.cold_compare <revision> [function] [rounds] [seed]`: not part of `make bench`,
whose ratios come from separate runs; this one answers "did this change make it slower?" on a
shared, noisy machine. Both trees are measured as `cold_start.cold_starts_by_runtime` measures (the
layer as it ships, fresh `-S` interpreters, nothing else importable, bytecode compiled ahead), in
rounds whose order is shuffled anew, the first round not counted, each tree with its own template's
environment and its own function file. The earlier tree is checked out (`git worktree`) under
build/cold_compare/; only its `sendonce` package and its function file differ from the working
tree's, the installed dependencies are the same. Prints the medians and the median of the round by
round differences, in wall-clock and CPU milliseconds, beside the baseline's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from bench.cold_start import (
    BASELINE_SCRIPT,
    BUILD_DIR,
    BUILD_ROOT,
    COMPILE,
    IMPORT_BY_PATH,
    ROOT,
    _shipped_environment,
    interpreter,
    median_difference,
    median_of,
    shipped_layer,
    shuffled_rounds,
)
from bench.local_stack import free_ports
from sendonce_local.environment import function_environment
from sendonce_local.template import load_template

WORK = BUILD_DIR.parent / "cold_compare"


def _remove(tree: Path) -> None:
    command = ["git", "worktree", "remove", "--force", str(tree)]
    subprocess.run(command, check=False, cwd=ROOT, capture_output=True)


def _checkout(revision: str) -> Path:
    tree = WORK / "tree"
    _remove(tree)
    shutil.rmtree(tree, ignore_errors=True)
    command = ["git", "worktree", "add", "--quiet", "--detach", str(tree), revision]
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return tree


def _earlier_package(tree: Path, python: Path) -> Path:
    """A directory holding only the earlier `sendonce`, compiled: put before the shipped layer."""
    directory = WORK / "earlier"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    shutil.copytree(tree / "layers" / "sendonce" / "sendonce", directory / "sendonce")
    subprocess.run([str(python), *COMPILE, str(directory)], check=True, timeout=300)
    return directory


def _script(tree: Path, function: str) -> tuple[str, dict[str, str]]:
    template = load_template(tree / "template.yaml")
    spec = template.functions[function]
    script = IMPORT_BY_PATH.format(file=str(spec.handler_file), builders=BUILD_ROOT)
    return script, function_environment(template, free_ports())


def main(argv: list[str]) -> None:
    revision = argv[0]
    function = argv[1] if len(argv) > 1 else "ApiFunction"
    rounds = int(argv[2]) if len(argv) > 2 else 41
    seed = int(argv[3]) if len(argv) > 3 else 7
    runtime = str(load_template(ROOT / "template.yaml").globals["Function"]["Runtime"])
    python = interpreter(runtime)
    if python is None:
        sys.exit(f"no {runtime} interpreter on this machine")
    layer = shipped_layer(runtime, python)
    tree = _checkout(revision)
    try:
        earlier = _earlier_package(tree, python)
        now_script, now_env = _script(ROOT, function)
        then_script, then_env = _script(tree, function)
        now_env = _shipped_environment(now_env, layer)
        then_env = {**_shipped_environment(then_env, layer), "PYTHONPATH": f"{earlier}:{layer}"}
        runs = {
            "baseline": (python, BASELINE_SCRIPT, now_env),
            "now": (python, now_script, now_env),
            revision: (python, then_script, then_env),
        }
        samples = shuffled_rounds(runs, rounds, ROOT, seed)
    finally:
        _remove(tree)

    def median(name: str, unit: str) -> float:
        return round(median_of(samples[name], unit), 1)

    def difference(unit: str) -> float:
        return round(median_difference(samples["now"], samples[revision], unit), 1)

    report = {
        "runtime": runtime,
        "function": function,
        "rounds": rounds,
        "median_ms": {name: median(name, "ms") for name in runs},
        "median_cpu_ms": {name: median(name, "cpu_ms") for name in runs},
        "ratio_to_baseline": {name: round(median(name, "ms") / median("baseline", "ms"), 2) for name in runs},
        "now_minus_earlier_ms": difference("ms"),
        "now_minus_earlier_cpu_ms": difference("cpu_ms"),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
