"""A function's cold start now against an earlier revision's, side by side, on the deployed runtime.

`python -m bench.cold_compare <revision> [function] [rounds] [seed] [runtimes]`: not part of `make
bench`, whose ratios come from separate runs; this one answers "did this change make it slower?" on
a shared, noisy machine. Both trees are measured as `cold_start.cold_starts_by_runtime` measures
(the layer as it ships, fresh `-S` interpreters, nothing else importable, bytecode compiled ahead),
in rounds whose order is shuffled anew, the first round not counted, each tree with its own
template's environment and its own function file. The earlier tree is checked out (`git worktree`)
under build/cold_compare/; only its `sendonce` package and its function file differ from the working
tree's, the installed dependencies are the same. Prints the medians and the median of the round by
round differences, in wall-clock and CPU milliseconds, beside the baseline's and the API's shape
alone (`cold_start.SHAPE_FLOOR`, with the ratio of each tree to it: what the API function's own code
costs).

`runtimes`: the template's by default; a comma-separated list (`python3.11,python3.13`) or `all`
(`cold_start.RUNTIMES`) measures each, in the same rounds, and prints one report per runtime.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.cold_start import (
    BASELINE_SCRIPT,
    BUILD_DIR,
    BUILD_ROOT,
    COMPILE,
    IMPORT_BY_PATH,
    ROOT,
    RUNTIMES,
    SHAPE_FLOOR,
    SHAPE_FLOOR_SCRIPT,
    Run,
    Sample,
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


def remove_tree(tree: Path) -> None:
    """Take a checked-out earlier tree away again (its git worktree too)."""
    command = ["git", "worktree", "remove", "--force", str(tree)]
    subprocess.run(command, check=False, cwd=ROOT, capture_output=True)


def checkout(revision: str, work: Path = WORK) -> Path:
    """`revision`'s tree, checked out afresh (a detached git worktree) under `work`."""
    tree = work / "tree"
    remove_tree(tree)
    shutil.rmtree(tree, ignore_errors=True)
    command = ["git", "worktree", "add", "--quiet", "--detach", str(tree), revision]
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return tree


def _earlier_package(tree: Path, python: Path, runtime: str) -> Path:
    """A directory holding only the earlier `sendonce`, compiled: put before the shipped layer."""
    directory = WORK / "earlier" / runtime
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


def _runtimes(argument: str | None) -> list[str]:
    if argument is None:
        return [str(load_template(ROOT / "template.yaml").globals["Function"]["Runtime"])]
    return list(RUNTIMES) if argument == "all" else argument.split(",")


def _report(
    samples: dict[tuple[str, str], list[Sample]], runtime: str, names: list[str], revision: str
) -> dict[str, Any]:
    def median(name: str, unit: str) -> float:
        return round(median_of(samples[runtime, name], unit), 1)

    def difference(unit: str) -> float:
        return round(median_difference(samples[runtime, "now"], samples[runtime, revision], unit), 1)

    def ratio(name: str, to: str, unit: str = "ms", digits: int = 3) -> float:
        return round(median(name, unit) / median(to, unit), digits)

    trees = ("now", revision)
    return {
        "median_ms": {name: median(name, "ms") for name in names},
        "median_cpu_ms": {name: median(name, "cpu_ms") for name in names},
        "ratio_to_baseline": {name: ratio(name, "baseline", digits=2) for name in names},
        "ratio_to_shape": {name: ratio(name, SHAPE_FLOOR) for name in trees},
        "cpu_ratio_to_shape": {name: ratio(name, SHAPE_FLOOR, "cpu_ms") for name in trees},
        "now_minus_earlier_ms": difference("ms"),
        "now_minus_earlier_cpu_ms": difference("cpu_ms"),
    }


def main(argv: list[str]) -> None:
    revision = argv[0]
    function = argv[1] if len(argv) > 1 else "ApiFunction"
    rounds = int(argv[2]) if len(argv) > 2 else 41
    seed = int(argv[3]) if len(argv) > 3 else 7
    runtimes = _runtimes(argv[4] if len(argv) > 4 else None)
    pythons = {runtime: interpreter(runtime) for runtime in runtimes}
    missing = [runtime for runtime, python in pythons.items() if python is None]
    if missing:
        sys.exit(f"no interpreter on this machine for {', '.join(missing)}")
    names = ["baseline", SHAPE_FLOOR, "now", revision]
    tree = checkout(revision)
    try:
        now_script, now_environment = _script(ROOT, function)
        then_script, then_environment = _script(tree, function)
        runs: dict[tuple[str, str], Run] = {}
        for runtime, python in pythons.items():
            assert python is not None
            layer = shipped_layer(runtime, python)
            earlier = _earlier_package(tree, python, runtime)
            now_env = _shipped_environment(now_environment, layer)
            then_env = {**_shipped_environment(then_environment, layer), "PYTHONPATH": f"{earlier}:{layer}"}
            runs[runtime, "baseline"] = (python, BASELINE_SCRIPT, now_env)
            runs[runtime, SHAPE_FLOOR] = (python, SHAPE_FLOOR_SCRIPT, now_env)
            runs[runtime, "now"] = (python, now_script, now_env)
            runs[runtime, revision] = (python, then_script, then_env)
        samples = shuffled_rounds(runs, rounds, ROOT, seed)
    finally:
        remove_tree(tree)

    reports = {runtime: _report(samples, runtime, names, revision) for runtime in runtimes}
    header = {"function": function, "rounds": rounds}
    if len(runtimes) == 1:
        print(json.dumps({"runtime": runtimes[0], **header, **reports[runtimes[0]]}, indent=2))
    else:
        print(json.dumps({**header, "by_runtime": reports}, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
