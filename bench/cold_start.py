"""Cold start: a fresh interpreter imports a function's module by file path and builds its clients.

Timed inside the child (interpreter start-up itself is the same for every function and the
baseline, and is left out), median over several runs, next to `import boto3` plus one client.

`cold_starts` measures in this environment. `cold_starts_by_runtime` measures as the layer ships,
under each Lambda runtime whose interpreter is on this machine: the layer's dependencies, and the
boto3 that Lambda's runtime would bring, installed for that interpreter (once, under
build/cold_start/), the `sendonce` package copied afresh, all compiled ahead as the layer's build
compiles them, nothing else importable (`-S`: no site-packages), and no bytecode written at run
time, as on Lambda's read-only file system.
"""

from __future__ import annotations

import glob
import importlib.metadata
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tomllib
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from sendonce_local.template import FunctionSpec

ROOT = Path(__file__).resolve().parent.parent
LAYER = ROOT / "layers" / "sendonce"
BUILD_DIR = ROOT / "build" / "cold_start"
RUNTIMES = ("python3.11", "python3.12", "python3.13")
# As layers/sendonce/Makefile compiles the layer: each .pyc is used whatever its source's mtime.
COMPILE = ["-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash"]

# What each function builds on its first invocation: its composition root, which every function's
# module exposes as `root`. A dispatcher builds its SQS client (redelivery) only when a record must
# be postponed.
BUILD_ROOT = "_module.root.get()"
BASELINE_SCRIPT = "import boto3; boto3.client('dynamodb')"
# The API function's shape with nothing of sendonce in it but its way of importing: the baseline,
# plus what the HTTP API is built on (Powertools' Logger and Metrics, its HTTP API resolver with
# request validation, and one route taking a pydantic body), imported inside
# `sendonce.startup.frozen_imports` as every function module imports, and its client built after,
# as a function's root builds it. What the API function costs beyond this is sendonce's own.
SHAPE_FLOOR = "api_shape_floor"
SHAPE_FLOOR_SCRIPT = """
from sendonce.startup import frozen_imports
with frozen_imports():
    import boto3
    from aws_lambda_powertools import Logger, Metrics
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
    from pydantic import BaseModel
    Logger(service='floor')
    Metrics(namespace='floor', service='floor')
    app = APIGatewayHttpResolver(enable_validation=True)
    class Body(BaseModel):
        to: str
    @app.post('/v1/messages')
    def send(body: Body) -> dict:
        return {}
boto3.client('dynamodb')
"""
# The baseline imported the same way: what that way of importing gives `import boto3` itself, so
# that a function's figure can be set against either.
FROZEN_BASELINE = "baseline_frozen_imports"
FROZEN_BASELINE_SCRIPT = """
from sendonce.startup import frozen_imports
with frozen_imports():
    import boto3
boto3.client('dynamodb')
"""
REFERENCES = {SHAPE_FLOOR: SHAPE_FLOOR_SCRIPT, FROZEN_BASELINE: FROZEN_BASELINE_SCRIPT}

# Wall-clock time (what a cold start costs), and the process's own CPU time, which other work on a
# shared machine disturbs far less.
TIMER = """
import time, json
_t0, _c0 = time.perf_counter(), time.process_time()
{body}
print(json.dumps({{"ms": (time.perf_counter() - _t0) * 1000, "cpu_ms": (time.process_time() - _c0) * 1000}}))
"""

IMPORT_BY_PATH = """
import importlib.util
_spec = importlib.util.spec_from_file_location("cold_start_fn", {file!r})
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
{builders}
"""


def function_script(spec: FunctionSpec) -> str:
    return IMPORT_BY_PATH.format(file=str(spec.handler_file), builders=BUILD_ROOT)


def _run_once(body: str, environment: dict[str, str], cwd: Path) -> float:
    completed = subprocess.run(
        [sys.executable, "-c", TIMER.format(body=body)],
        env=environment,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    ms: float = json.loads(completed.stdout.strip().splitlines()[-1])["ms"]
    return ms


def median_ms(body: str, environment: dict[str, str], cwd: Path, runs: int) -> float:
    _run_once(body, environment, cwd)  # writes any missing bytecode; not counted
    return round(statistics.median(_run_once(body, environment, cwd) for _ in range(runs)), 1)


def cold_starts(
    functions: dict[str, FunctionSpec], environment: dict[str, str], cwd: Path, runs: int
) -> dict[str, float]:
    """Median milliseconds: "baseline" and each function by logical id."""
    env = {**os.environ, **environment}
    results = {"baseline": median_ms(BASELINE_SCRIPT, env, cwd, runs)}
    for name, spec in functions.items():
        results[name] = median_ms(function_script(spec), env, cwd, runs)
    return results


def import_time_top(
    spec: FunctionSpec, environment: dict[str, str], cwd: Path, top: int = 12
) -> dict[str, object]:
    """`python -X importtime` on the function: the costliest top-level imports (cumulative)."""
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", function_script(spec)],
        env={**os.environ, **environment},
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    parsed: list[dict[str, object]] = []
    for line in completed.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        self_us, cumulative_us, name = line[len("import time:") :].split("|", 2)
        depth = (len(name) - len(name.lstrip(" ")) - 1) // 2  # the name column is indented per level
        parsed.append(
            {
                "module": name.strip(),
                "depth": depth,
                "self_ms": int(self_us) / 1000,
                "cumulative_ms": int(cumulative_us) / 1000,
            }
        )
    packages: dict[str, float] = {}
    for row in parsed:
        package = str(row["module"]).split(".")[0]
        packages[package] = packages.get(package, 0.0) + float(str(row["self_ms"]))
    by_package = sorted(packages.items(), key=lambda item: -item[1])[:top]
    heaviest = sorted(
        (row for row in parsed if 1 <= int(str(row["depth"])) <= 2),
        key=lambda row: -float(str(row["cumulative_ms"])),
    )[:top]
    return {
        "total_ms": round(max(float(str(row["cumulative_ms"])) for row in parsed), 1),
        "by_package_self_ms": {name: round(ms, 1) for name, ms in by_package},
        "heaviest_cumulative_ms": {
            str(row["module"]): round(float(str(row["cumulative_ms"])), 1) for row in heaviest
        },
    }


# ---------------------------------------------------------------------------- by runtime, as shipped
def interpreter(runtime: str) -> Path | None:
    """This machine's interpreter for a Lambda runtime ("python3.12"): on the PATH, or pyenv's."""
    version = runtime.removeprefix("python")
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [
        shutil.which(runtime),
        *sorted(glob.glob(f"{pyenv_root}/versions/{version}.*/bin/{runtime}")),
    ]
    for candidate in candidates:
        if candidate is None:
            continue
        # A pyenv shim exists for every installed version, but runs only the selected ones.
        probe = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return Path(candidate)
    return None


def layer_requirements() -> list[str]:
    """What the layer ships (its distribution's dependencies) and what Lambda's runtime brings (boto3)."""
    project = tomllib.loads((LAYER / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [*project["dependencies"], f"boto3=={importlib.metadata.version('boto3')}"]


def shipped_layer(runtime: str, python: Path) -> Path:
    """The layer's python/ directory for this runtime: dependencies installed once, `sendonce` anew."""
    requirements = layer_requirements()
    stamp_text = "\n".join([str(python), *requirements])
    target = BUILD_DIR / runtime / "python"
    stamp = BUILD_DIR / runtime / "installed"
    if not stamp.exists() or stamp.read_text(encoding="utf-8") != stamp_text:
        shutil.rmtree(BUILD_DIR / runtime, ignore_errors=True)
        target.mkdir(parents=True)
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-compile",
                "--target",
                str(target),
                *requirements,
            ],
            check=True,
            timeout=900,
        )
        subprocess.run([str(python), *COMPILE, str(target)], check=True, timeout=900)
        stamp.write_text(stamp_text, encoding="utf-8")
    package = target / "sendonce"
    shutil.rmtree(package, ignore_errors=True)
    shutil.copytree(LAYER / "sendonce", package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([str(python), *COMPILE, str(package)], check=True, timeout=300)
    return target


def _run_shipped(python: Path, body: str, environment: dict[str, str], cwd: Path) -> dict[str, float]:
    completed = subprocess.run(
        [str(python), "-S", "-c", TIMER.format(body=body)],
        env=environment,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    times: dict[str, float] = json.loads(completed.stdout.strip().splitlines()[-1])
    return times


def _shipped_environment(environment: dict[str, str], layer: Path) -> dict[str, str]:
    inherited = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PYTHON", "VIRTUAL_ENV", "PYENV_VERSION"))
    }
    return {**inherited, **environment, "PYTHONPATH": str(layer), "PYTHONDONTWRITEBYTECODE": "1"}


def cold_starts_by_runtime(
    functions: dict[str, FunctionSpec],
    environment: dict[str, str],
    cwd: Path,
    runs: int,
    runtimes: tuple[str, ...] = RUNTIMES,
    seed: int = 5,
) -> dict[str, dict[str, object]]:
    """Per runtime: the baseline's median ms, and each function's median ms and its ratio to it,
    in wall-clock time and in the process's CPU time; and the same for the API's shape alone
    (`SHAPE_FLOOR`), the least any API function built on it could cost, and for the baseline
    imported as the functions import (`FROZEN_BASELINE`).

    The runs go round by round (`shuffled_rounds`: every runtime's baseline, shape and functions,
    once a round, in an order shuffled anew each round), so a change in the machine's load weighs on
    all of them alike, no script always runs right after another, and the runtimes' own figures
    compare. A runtime whose interpreter
    is not on this machine, or for which the layer cannot be installed, is reported so.
    """
    results: dict[str, dict[str, object]] = {}
    scripts = {"baseline": BASELINE_SCRIPT, **REFERENCES}
    scripts.update({name: function_script(spec) for name, spec in functions.items()})
    ready: dict[str, tuple[Path, dict[str, str]]] = {}
    for runtime in runtimes:
        python = interpreter(runtime)
        if python is None:
            results[runtime] = {"error": f"no {runtime} interpreter on this machine"}
            continue
        try:
            layer = shipped_layer(runtime, python)
        except subprocess.CalledProcessError as error:  # e.g. no pip for that interpreter
            results[runtime] = {"error": f"the layer could not be installed for {runtime}: {error}"}
            continue
        ready[runtime] = (python, _shipped_environment(environment, layer))
    samples = shuffled_rounds(
        {
            (runtime, name): (python, script, env)
            for runtime, (python, env) in ready.items()
            for name, script in scripts.items()
        },
        runs,
        cwd,
        seed,
    )
    for runtime, (python, _) in ready.items():
        wall = {name: median_of(samples[runtime, name], "ms") for name in scripts}
        cpu = {name: median_of(samples[runtime, name], "cpu_ms") for name in scripts}
        results[runtime] = {
            "python": _full_version(python),
            "baseline_ms": round(wall["baseline"], 1),
            "baseline_cpu_ms": round(cpu["baseline"], 1),
            "functions": {name: _against_baseline(name, wall, cpu) for name in functions},
            **{name: _against_baseline(name, wall, cpu) for name in REFERENCES},
        }
    return {runtime: results[runtime] for runtime in runtimes}


Sample = dict[str, float]  # one fresh interpreter's timing: "ms" (wall clock) and "cpu_ms"
Run = tuple[Path, str, dict[str, str]]  # an interpreter, the script it runs, its environment
K = TypeVar("K", bound=Hashable)


def shuffled_rounds(runs: Mapping[K, Run], rounds: int, cwd: Path, seed: int) -> dict[K, list[Sample]]:
    """Each run once a round, in an order shuffled anew each round, `rounds` times after one round
    that is not counted (the file system's caches warm up): the machine's load weighs on all alike,
    and no run always follows another. Each run's samples, round by round."""
    samples: dict[K, list[Sample]] = {key: [] for key in runs}
    order = random.Random(seed)
    for round_number in range(rounds + 1):
        keys = list(runs)
        order.shuffle(keys)
        for key in keys:
            python, script, environment = runs[key]
            times = _run_shipped(python, script, environment, cwd)
            if round_number > 0:
                samples[key].append(times)
    return samples


def median_of(samples: Sequence[Sample], unit: str) -> float:
    return statistics.median(sample[unit] for sample in samples)


def median_difference(samples: Sequence[Sample], against: Sequence[Sample], unit: str) -> float:
    """The median of the round-by-round differences: what one run costs more than another, with
    each round's load on both alike."""
    return statistics.median(a[unit] - b[unit] for a, b in zip(samples, against, strict=True))


def _against_baseline(name: str, wall: dict[str, float], cpu: dict[str, float]) -> dict[str, float]:
    """A script's median wall-clock and CPU milliseconds, and each as a ratio to the baseline's."""
    return {
        "ms": round(wall[name], 1),
        "ratio": round(wall[name] / wall["baseline"], 2),
        "cpu_ms": round(cpu[name], 1),
        "cpu_ratio": round(cpu[name] / cpu["baseline"], 2),
    }


def _full_version(python: Path) -> str:
    probe = [str(python), "-c", "import platform; print(platform.python_version())"]
    return subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip()
